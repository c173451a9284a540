"""The one-run-per-student lock, held in PostgreSQL so that it holds across
workers, processes and containers.

A row per running student; the worker that runs it refreshes the row's
heartbeat every HEARTBEAT seconds. If that worker dies, the row goes stale
after STALE seconds and the next claim takes it over, so a crash never
locks a student out for longer than that.
"""
import os
import socket

HEARTBEAT = 10
STALE = 30


async def claim(pool, username, run_id):
    """True if `username` had no live run and now has `run_id`."""
    taken = await pool.fetchval(
        """INSERT INTO active_runs (username, run_id, owner) VALUES ($1, $2, $3)
           ON CONFLICT (username) DO UPDATE
               SET run_id = EXCLUDED.run_id, owner = EXCLUDED.owner,
                   started_at = now(), heartbeat_at = now()
               WHERE active_runs.heartbeat_at < now() - make_interval(secs => $4)
           RETURNING run_id""",
        username, run_id, f"{socket.gethostname()}:{os.getpid()}", STALE)
    return taken == run_id


async def release(pool, username, run_id):
    await pool.execute("DELETE FROM active_runs WHERE username = $1 AND run_id = $2", username, run_id)


async def heartbeat(pool, run_ids):
    if run_ids:
        await pool.execute("UPDATE active_runs SET heartbeat_at = now() WHERE run_id = ANY($1::text[])",
                           list(run_ids))
