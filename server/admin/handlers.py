"""Teacher and admin endpoints: the server's status, the roster, pushing starter files."""
import platform
import time

import asyncpg
import tornado

from .. import __version__, metrics
from ..files import paths
from ..files.handlers import FilesBase
from ..web import ApiError, ApiHandler
from . import accounts


class StatusHandler(ApiHandler):
    async def get(self):
        await self.require_user("admin")
        ctx = self.ctx
        counts = await ctx.pool.fetchrow(
            """SELECT (SELECT count(*) FROM users) AS users,
                      (SELECT count(*) FROM users WHERE active) AS active_users,
                      (SELECT count(*) FROM sessions WHERE expires_at > now()) AS sessions""")
        workers = await ctx.files.run(ctx.instance.read_workers)
        live = await ctx.files.run(metrics.snapshot)
        self.finish_json({
            "mode": "single process" if ctx.cfg.process_count == 1 else "multi-process",
            "processes": ctx.cfg.process_count,
            "worker_pids": workers,
            "answered_by": ctx.pid,
            "uptime_seconds": round(time.time() - ctx.instance.started_at, 1),
            "versions": {"pyclassroom": __version__, "python": platform.python_version(),
                         "tornado": tornado.version, "asyncpg": asyncpg.__version__},
            "counts": dict(counts),
            "sandbox": ctx.sandbox.name,
            "defences": ctx.sandbox.defences(),
            "runs": {k: live[k] for k in ("active_runs", "queued_runs", "connected_ides")},
            "requests": {"count": live["requests"], "latency_ms": live["latency_ms"]},
            "settings": dict(ctx.cfg.masked()),
        })


class RosterHandler(ApiHandler):
    """GET the class: every student with their last save time and what
    their home held after their last run (and whether it is over quota)."""

    async def get(self):
        await self.require_user("teacher", "admin")
        cfg = self.ctx.cfg
        rows = await self.ctx.pool.fetch(
            """SELECT username, display_name, active, last_save_at, disk_bytes, disk_files FROM users
               WHERE role = 'student' ORDER BY username""")
        self.finish_json({"students": [
            {"username": r["username"], "display_name": r["display_name"], "active": r["active"],
             "last_save_at": r["last_save_at"].isoformat() if r["last_save_at"] else None,
             "disk_bytes": r["disk_bytes"], "disk_files": r["disk_files"],
             "over_quota": (r["disk_bytes"] or 0) > cfg.QUOTA_BYTES or (r["disk_files"] or 0) > cfg.QUOTA_FILES}
            for r in rows]})


class PushHandler(FilesBase):
    """POST {"path": in course/, "students": [...] (default: all active)}:
    copy a starter file or folder into students' homes, never overwriting."""

    async def post(self):
        await self.require_user("teacher", "admin")
        body = self.json_body()
        source = paths.parse(self.field(body, "path", str, max_len=paths.MAX_PATH_BYTES), allow_root=False)
        chosen = self.field(body, "students", list, required=False)
        if chosen is not None and not all(isinstance(u, str) for u in chosen):
            raise ApiError(400, "wrong_type", "The field 'students' must be a list of usernames.")
        rows = await self.ctx.pool.fetch("SELECT username FROM users WHERE role = 'student' AND active")
        everyone = [r["username"] for r in rows]
        if chosen is None:
            targets = everyone
        else:
            unknown = [u for u in chosen if u not in everyone]
            if unknown:
                raise ApiError(400, "unknown_students", "Not active students: " + ", ".join(map(str, unknown)))
            targets = chosen
        copied, skipped, failed = await self.fs("push", self.store.push, source, targets)
        self.finish_json({"copied": copied, "skipped": skipped, "failed": failed, "students": len(targets)})


class UsersHandler(ApiHandler):
    """GET accounts (?q= search, ?role=), POST one new account."""

    async def get(self):
        await self.require_user("admin")
        role = self.get_argument("role", None)
        if role is not None and role not in ("student", "teacher", "admin"):
            raise ApiError(400, "bad_role", "role must be student, teacher or admin.")
        users = await accounts.list_users(self.ctx.pool, self.get_argument("q", "")[:100], role)
        self.finish_json({"users": users, "limit": accounts.LIST_LIMIT})

    async def post(self):
        admin = await self.require_user("admin")
        body = self.json_body()
        user, password = await accounts.create_user(
            self.ctx, admin["username"], self.field(body, "username", str, max_len=64),
            self.field(body, "display_name", str, max_len=200), self.field(body, "role", str, max_len=20),
            self.field(body, "password", str, max_len=256, required=False))
        given = body.get("password") is not None
        self.finish_json({"user": user, "password": None if given else password}, 201)


class ImportUsersHandler(ApiHandler):
    """POST {"csv": text}: a class list, all rows or none."""

    async def post(self):
        admin = await self.require_user("admin")
        body = self.json_body()
        report = await accounts.import_users(self.ctx, admin["username"],
                                             self.field(body, "csv", str, max_len=1 << 20))
        self.finish_json(report)


class UserPasswordHandler(ApiHandler):
    """POST: a new generated password for the user, shown once."""

    async def post(self, username):
        admin = await self.require_user("admin")
        password = await accounts.reset_password(self.ctx, admin["username"], username)
        self.finish_json({"username": username, "password": password})


class UserActiveHandler(ApiHandler):
    """POST {"active": false|true}: deactivate (sessions end) or reactivate."""

    async def post(self, username):
        admin = await self.require_user("admin")
        active = self.field(self.json_body(), "active", bool)
        if username == admin["username"] and not active:
            raise ApiError(400, "cannot_deactivate_self", "You cannot deactivate your own account.")
        await accounts.set_active(self.ctx, admin["username"], username, active)
        self.finish_json({"username": username, "active": active})
