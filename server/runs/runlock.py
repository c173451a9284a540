"""The one-run-per-student lock, held in PostgreSQL so that it holds across
workers, processes and containers.

A row per running student; the worker that runs it refreshes the row's
heartbeat every HEARTBEAT seconds. If that worker dies, the row goes stale
after STALE seconds and the next claim takes it over, so a crash never
locks a student out for longer than that.
"""
import os
import socket
from typing import Iterable

from ..db import Pool

HEARTBEAT = 10
STALE = 30


async def claim(pool: Pool, username: str, run_id: str, token_hash: bytes) -> str:
    """Claim the lock for a run asked for by session `token_hash`, in one
    round trip: "claimed", "busy" (the student has a live run), or
    "session_ended"."""
    row = await pool.fetchrow(
        """WITH live AS (SELECT EXISTS (SELECT 1 FROM live_sessions WHERE token_hash = $5) AS ok),
                claimed AS (
                    INSERT INTO active_runs (username, run_id, owner)
                    SELECT $1, $2, $3 FROM live WHERE live.ok
                    ON CONFLICT (username) DO UPDATE
                        SET run_id = EXCLUDED.run_id, owner = EXCLUDED.owner,
                            started_at = now(), heartbeat_at = now()
                        WHERE active_runs.heartbeat_at < now() - make_interval(secs => $4)
                    RETURNING run_id)
           SELECT live.ok, (SELECT run_id FROM claimed) AS run_id FROM live""",
        username, run_id, f"{socket.gethostname()}:{os.getpid()}", STALE, token_hash)
    assert row is not None  # `live` is one row, whatever the tables hold
    if not row["ok"]:
        return "session_ended"
    return "claimed" if row["run_id"] == run_id else "busy"


async def release(pool: Pool, username: str, run_id: str) -> None:
    await pool.execute("DELETE FROM active_runs WHERE username = $1 AND run_id = $2", username, run_id)


async def heartbeat(pool: Pool, run_ids: Iterable[str]) -> None:
    if run_ids:
        await pool.execute("UPDATE active_runs SET heartbeat_at = now() WHERE run_id = ANY($1::text[])",
                           list(run_ids))
