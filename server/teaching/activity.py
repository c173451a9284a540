"""What the live class view shows of each user that happens on this
worker: their open IDE sockets (presence) and their programs (running or
not, how the last run ended), written to PostgreSQL for every worker and
instance to read.

Runs call the hooks (`student_online`, `run_started`, `run_ended`: the
runs' RunEvents interface, runs/events.py). A hook only notes the event in memory (the newest per user)
and wakes the writer, which writes what gathered in one transaction a
batch: a run never waits for the database, and a slow or absent database
delays the view, never a run (the batch is written when it answers; newer
events replace older ones meanwhile). The tables' triggers announce every
change on the channel 'class_live' (migration 007).

A worker's presence rows are kept alive by its heartbeat; a worker that
dies leaves rows that go stale, and readers treat them as gone.
"""
import asyncio
import logging
import os
import socket
import time
import unicodedata
from dataclasses import dataclass, replace
from datetime import datetime, timezone

from .. import db

log = logging.getLogger(__name__)

BATCH_SECONDS = 0.05  # events arriving together are written together
RETRY_SECONDS = 2.0
HEARTBEAT_SECONDS = 15.0
STALE_SECONDS = 45  # a presence row older than this is a worker that died
PRUNE_SECONDS = 600
MAX_ERROR_LINE = 300  # characters of an error's line, message or file name
MAX_ERROR_KIND = 100
LIMITS = {"timeout", "cpu_limit", "memory_limit", "output_limit", "disk_limit"}


def outcome_of(reason: str) -> str:
    """What the teacher sees of an exit reason (docs/run-protocol.md):
    ok, error, limit (a limit stopped it) or stopped (Stop, Ctrl-C, ...)."""
    if reason in ("ok", "error"):
        return reason
    return "limit" if reason in LIMITS else "stopped"


def _shown(line: str | None, limit: int = MAX_ERROR_LINE) -> str | None:
    """An error line as a teacher may be shown it: one line, bounded, without
    the control and bidi characters a program could use to disguise it."""
    lines = line.strip().splitlines() if isinstance(line, str) else None
    if not lines:
        return None
    kept = "".join(ch for ch in lines[0] if unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Zl", "Zp"))
    return kept[:limit] or None


def _shown_error(error: dict | None) -> dict | None:
    """A run's error (runs/events.py `run_error`) as a teacher may be shown
    it: each part shown as `_shown` does, the line a positive number."""
    if not error:
        return None
    text = _shown(error.get("text"))
    if text is None:
        return None
    line = error.get("line")
    return {"text": text, "kind": _shown(error.get("kind"), MAX_ERROR_KIND), "message": _shown(error.get("message")),
            "file": _shown(error.get("file")),
            "line": line if isinstance(line, int) and 0 < line < 2 ** 31 else None}


def worker_name() -> str:
    """This worker, unique across hosts and restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{time.time_ns() // 1000:x}"


@dataclass
class RunEvent:
    """The newest run event of a user not yet written."""
    running: bool
    at: datetime
    started_at: datetime | None = None
    ended_at: datetime | None = None
    outcome: str | None = None  # None: the run started; the last result stays
    reason: str | None = None
    error: dict | None = None  # _shown_error's


UPSERT_RUNS = """
INSERT INTO run_activity AS a (user_id, running, worker, started_at, ended_at, outcome, reason, error_line, changed_at,
                               error_kind, error_message, error_file, error_lineno)
SELECT * FROM unnest($1::bigint[], $2::boolean[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::text[],
                     $7::text[], $8::text[], $9::timestamptz[], $10::text[], $11::text[], $12::text[], $13::integer[])
ON CONFLICT (user_id) DO UPDATE SET
    running = EXCLUDED.running,
    worker = EXCLUDED.worker,
    started_at = coalesce(EXCLUDED.started_at, a.started_at),
    ended_at = CASE WHEN EXCLUDED.outcome IS NULL THEN a.ended_at ELSE EXCLUDED.ended_at END,
    outcome = coalesce(EXCLUDED.outcome, a.outcome),
    reason = CASE WHEN EXCLUDED.outcome IS NULL THEN a.reason ELSE EXCLUDED.reason END,
    error_line = CASE WHEN EXCLUDED.outcome IS NULL THEN a.error_line ELSE EXCLUDED.error_line END,
    error_kind = CASE WHEN EXCLUDED.outcome IS NULL THEN a.error_kind ELSE EXCLUDED.error_kind END,
    error_message = CASE WHEN EXCLUDED.outcome IS NULL THEN a.error_message ELSE EXCLUDED.error_message END,
    error_file = CASE WHEN EXCLUDED.outcome IS NULL THEN a.error_file ELSE EXCLUDED.error_file END,
    error_lineno = CASE WHEN EXCLUDED.outcome IS NULL THEN a.error_lineno ELSE EXCLUDED.error_lineno END,
    changed_at = EXCLUDED.changed_at
WHERE a.changed_at <= EXCLUDED.changed_at
"""
# This worker's sockets as they are now: rows written, rows of users gone deleted.
UPSERT_PRESENCE = """
INSERT INTO presence (user_id, worker, sockets, heartbeat_at)
SELECT unnest($2::bigint[]), $1, unnest($3::integer[]), now()
ON CONFLICT (user_id, worker) DO UPDATE SET sockets = EXCLUDED.sockets, heartbeat_at = now()
"""
DELETE_PRESENCE = "DELETE FROM presence WHERE worker = $1 AND user_id = ANY($2::bigint[])"


def _now():
    return datetime.now(timezone.utc)


class Activity:
    def __init__(self, pool: db.Pool, worker: str | None = None):
        self.pool = pool
        self.worker = worker or worker_name()
        self.sockets: dict[int, int] = {}  # user id -> IDE sockets open on this worker
        self.presence_changed: set[int] = set()  # user ids whose count here is not written yet
        self.runs: dict[int, RunEvent] = {}  # user id -> RunEvent not written yet
        self.wake = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []
        self.failing = False

    # -- the hooks (runs call them: RunEvents) -----------------------------------

    def student_online(self, user: dict, online: bool) -> None:
        """An IDE socket of `user` opened (True) or closed (False) on this worker."""
        count = self.sockets.get(user["id"], 0) + (1 if online else -1)
        if count > 0:
            self.sockets[user["id"]] = count
        else:
            self.sockets.pop(user["id"], None)
        self.presence_changed.add(user["id"])
        self.wake.set()

    def run_started(self, user: dict) -> None:
        now = _now()
        self.runs[user["id"]] = RunEvent(True, now, started_at=now)
        self.wake.set()

    def run_ended(self, user: dict, exit_message: dict, error: dict | None = None) -> None:
        """A run ended: `exit_message` is its `exit` message (docs/run-protocol.md),
        `error` what went wrong (runs/events.py `run_error`), if it failed."""
        reason = str(exit_message.get("reason", "error"))
        earlier = self.runs.get(user["id"])
        self.runs[user["id"]] = RunEvent(False, _now(), started_at=earlier.started_at if earlier else None,
                                         ended_at=_now(), outcome=outcome_of(reason), reason=reason,
                                         error=_shown_error(error) if reason == "error" else None)
        self.wake.set()

    # -- writing ----------------------------------------------------------------

    def start(self) -> None:
        self.tasks = [asyncio.ensure_future(self._write_forever()), asyncio.ensure_future(self._heartbeat_forever())]

    async def close(self) -> None:
        """Write what is pending, then take this worker's sockets out."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        try:
            await self._write_pending()
            await self.pool.execute("DELETE FROM presence WHERE worker = $1", self.worker)
        except Exception as e:
            log.warning("could not record the end of this worker's IDE sockets (%s); they go stale", e)

    async def _write_forever(self):
        while True:
            await self.wake.wait()
            await asyncio.sleep(BATCH_SECONDS)
            self.wake.clear()
            if not await self._write_pending():
                await asyncio.sleep(RETRY_SECONDS)
                self.wake.set()

    async def _write_pending(self):
        """Write the pending events; False if the database could not take
        them now (they stay pending, behind any newer ones)."""
        runs, self.runs = self.runs, {}
        changed, self.presence_changed = self.presence_changed, set()
        if not runs and not changed:
            return True
        try:
            async with self.pool.transaction() as conn:
                if runs:
                    await self._write_runs(conn, runs)
                if changed:
                    await self._write_presence(conn, changed)
        except Exception as e:
            if not db.unavailable(e):
                log.exception("could not record run and socket activity; dropped it")
                return True  # a fault of the batch itself: retrying would not mend it
            if not self.failing:
                self.failing = True
                log.warning("run and socket activity waits for the database (%s)", type(e).__name__)
            for user_id, event in runs.items():
                newer = self.runs.get(user_id)
                if newer is None:
                    self.runs[user_id] = event
                elif newer.started_at is None:
                    self.runs[user_id] = replace(newer, started_at=event.started_at)
            self.presence_changed |= changed
            return False
        self.failing = False
        return True

    async def _write_runs(self, conn, runs):
        ids = list(runs)
        events = [runs[i] for i in ids]
        errors = [e.error or {} for e in events]
        await conn.execute(UPSERT_RUNS, ids, [e.running for e in events], [self.worker] * len(ids),
                           [e.started_at for e in events], [e.ended_at for e in events],
                           [e.outcome for e in events], [e.reason for e in events],
                           [x.get("text") for x in errors], [e.at for e in events], [x.get("kind") for x in errors],
                           [x.get("message") for x in errors], [x.get("file") for x in errors],
                           [x.get("line") for x in errors])

    async def _write_presence(self, conn, user_ids):
        here = [i for i in user_ids if i in self.sockets]
        gone = [i for i in user_ids if i not in self.sockets]
        if here:
            await conn.execute(UPSERT_PRESENCE, self.worker, here, [self.sockets[i] for i in here])
        if gone:
            await conn.execute(DELETE_PRESENCE, self.worker, gone)

    async def _heartbeat_forever(self):
        """Keep this worker's presence rows fresh (written again whole, so
        rows lost with a database restart come back), and now and then
        remove the rows of workers that died."""
        next_prune = time.monotonic()
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            try:
                async with self.pool.transaction() as conn:
                    ids = list(self.sockets)
                    await conn.execute(UPSERT_PRESENCE, self.worker, ids, [self.sockets[i] for i in ids])
                    await conn.execute("DELETE FROM presence WHERE worker = $1 AND NOT user_id = ANY($2::bigint[])",
                                       self.worker, ids)
                    if time.monotonic() > next_prune:
                        next_prune = time.monotonic() + PRUNE_SECONDS
                        await conn.execute("DELETE FROM presence WHERE heartbeat_at < now() - $1 * interval '1 second'",
                                           float(PRUNE_SECONDS))
            except Exception as e:
                if not db.unavailable(e):
                    log.exception("the presence heartbeat failed")
