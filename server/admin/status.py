"""What /api/status says: the process mode and workers, versions, counts,
running programs, request latency, the sandbox's defences and the
settings in force (secrets masked)."""
import platform
import time

import asyncpg
import tornado

from .. import __version__, metrics


async def status(ctx):
    counts = await ctx.pool.fetchrow(
        """SELECT (SELECT count(*) FROM users) AS users,
                  (SELECT count(*) FROM users WHERE active) AS active_users,
                  (SELECT count(*) FROM live_sessions) AS sessions""")
    # Both read files (the instance's worker list, the metrics of every worker).
    workers = await ctx.file_threads.run(ctx.instance.read_workers)
    live = await ctx.file_threads.run(metrics.snapshot)
    return {
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
    }
