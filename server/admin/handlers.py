"""Admin endpoints: the server's status."""
import platform
import time

import asyncpg
import tornado

from .. import __version__
from ..web import ApiHandler


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
