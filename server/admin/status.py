"""What /api/status says: the process mode and workers, versions, counts
of people (accounts, signed in, online in the IDE) and classes, running
programs, request latency, the file storage's condition, the sandbox's defences and the settings in
force (secrets masked). The admin page says each in words and units."""
import platform
import time

import asyncpg
import tornado

from .. import __version__, metrics
from ..teaching.activity import STALE_SECONDS


async def status(ctx):
    # People: accounts (and how many are deactivated), who is signed in
    # (a live session), who has the IDE open now (a fresh presence row).
    counts = await ctx.pool.fetchrow(
        """SELECT (SELECT count(*) FROM users) AS accounts,
                  (SELECT count(*) FROM users WHERE NOT active) AS deactivated,
                  (SELECT count(DISTINCT user_id) FROM live_sessions) AS signed_in,
                  (SELECT count(*) FROM live_sessions) AS sessions,
                  (SELECT count(DISTINCT user_id) FROM presence
                   WHERE heartbeat_at > now() - $1 * interval '1 second') AS online,
                  (SELECT count(*) FROM classes) AS classes""", float(STALE_SECONDS))
    # Both read files (the instance's worker list, the metrics of every worker).
    # The storage's probe has a thread of its own: a hung storage is reported, not waited on.
    storage = await ctx.files.health.condition_now(budget=1.0)
    workers = await ctx.file_threads.call(ctx.instance.read_workers)
    live = await ctx.file_threads.call(metrics.snapshot)
    return {
        "mode": "single process" if ctx.cfg.process_count == 1 else "multi-process",
        "processes": ctx.cfg.process_count,
        "worker_pids": workers,
        "answered_by": ctx.pid,
        "uptime_seconds": round(time.time() - ctx.instance.started_at, 1),
        "versions": {"pyclassroom": __version__, "python": platform.python_version(),
                     "tornado": tornado.version, "asyncpg": asyncpg.__version__},
        "counts": dict(counts),
        "storage": storage,
        "sandbox": ctx.sandbox_kind.name,
        "defences": ctx.sandbox_kind.defences(),
        "editing_help": ctx.assist.describe(),
        "runs": {k: live[k] for k in ("active_runs", "queued_runs", "connected_ides")},
        # Starts in line, tried again, and failed twice by reason (starts.py; the log has each one's words).
        "sandbox_starts": live["sandbox_starts"],
        "requests": {"count": live["requests"], "latency_ms": live["latency_ms"]},
        "settings": dict(ctx.cfg.masked()),
    }
