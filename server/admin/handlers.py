"""Teacher and admin endpoints: the server's status, the roster, pushing starter files."""
import platform
import time

import asyncpg
import tornado

from .. import __version__
from ..files import paths
from ..files.handlers import FilesBase
from ..web import ApiError, ApiHandler


class StatusHandler(ApiHandler):
    async def get(self):
        await self.require_user("admin")
        ctx = self.ctx
        counts = await ctx.pool.fetchrow(
            """SELECT (SELECT count(*) FROM users) AS users,
                      (SELECT count(*) FROM users WHERE active) AS active_users,
                      (SELECT count(*) FROM sessions WHERE expires_at > now()) AS sessions""")
        workers = await ctx.files.run(ctx.instance.read_workers)
        self.finish_json({
            "mode": "single process" if ctx.cfg.process_count == 1 else "multi-process",
            "processes": ctx.cfg.process_count,
            "worker_pids": workers,
            "answered_by": ctx.pid,
            "uptime_seconds": round(time.time() - ctx.instance.started_at, 1),
            "versions": {"pyclassroom": __version__, "python": platform.python_version(),
                         "tornado": tornado.version, "asyncpg": asyncpg.__version__},
            "counts": dict(counts),
            "settings": dict(ctx.cfg.masked()),
        })


class RosterHandler(ApiHandler):
    """GET the class: every student with their last save time."""

    async def get(self):
        await self.require_user("teacher", "admin")
        rows = await self.ctx.pool.fetch(
            """SELECT username, display_name, active, last_save_at FROM users
               WHERE role = 'student' ORDER BY username""")
        self.finish_json({"students": [
            {"username": r["username"], "display_name": r["display_name"], "active": r["active"],
             "last_save_at": r["last_save_at"].isoformat() if r["last_save_at"] else None}
            for r in rows]})


class PushHandler(FilesBase):
    """POST {"path": in course/, "students": [...] (default: all active)}:
    copy a starter file or folder into students' homes, never overwriting."""

    async def post(self):
        await self.require_user("teacher", "admin")
        body = self.json_body()
        source = paths.parse(self.field(body, "path", str, max_len=paths.MAX_PATH_BYTES), allow_root=False)
        chosen = self.field(body, "students", list, required=False)
        rows = await self.ctx.pool.fetch("SELECT username FROM users WHERE role = 'student' AND active")
        everyone = [r["username"] for r in rows]
        if chosen is None:
            targets = everyone
        else:
            unknown = [u for u in chosen if u not in everyone]
            if unknown:
                raise ApiError(400, "unknown_students", "Not active students: " + ", ".join(map(str, unknown)))
            targets = chosen
        copied, skipped = await self.fs("push", self.store.push, source, targets)
        self.finish_json({"copied": copied, "skipped": skipped, "students": len(targets)})
