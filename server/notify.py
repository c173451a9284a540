"""PostgreSQL LISTEN/NOTIFY for the whole server: a change committed by any
worker, instance or `python -m server.manage` reaches every worker at once.

Sending is a statement in the transaction that makes the change, so the
notification goes out when (and only if) the change commits:

    async with pool.transaction() as conn:
        await conn.execute("DELETE FROM sessions WHERE ...")
        await notify.send(conn, "session_revoked", "u:42")

Each worker holds one `Listener`: a connection of its own, outside the
pool, that LISTENs to every channel a service asked for and calls its
callbacks on the IOLoop:

    ctx.notify.listen("session_revoked", on_revoked)   # on_revoked(payload)
    ctx.notify.on_gap(forget_everything)               # notifications may have been missed

A notification sent while the connection is down is lost for good, so the
listener reconnects by itself and calls the `on_gap` callbacks when it
loses the connection and again once it is back: whatever a service keeps
because "I would have been told otherwise" (the session cache) must be
dropped then. `live` says whether notifications are arriving now; the
connection is probed every PROBE_SECONDS, so one that died silently (a
frozen database, a broken network) counts as down within two probes.

Payloads are text of at most 8000 bytes (PostgreSQL's limit): send keys
(ids, hashes), not records.
"""
import asyncio
import logging
import time
from typing import Any, Callable

import asyncpg

log = logging.getLogger(__name__)

PROBE_SECONDS = 1.0  # how often the connection is asked whether it is alive
RETRY_SECONDS = (0.1, 0.5, 1.0, 2.0)  # waits between reconnection attempts (the last repeats)
APPLICATION_NAME = "pyclassroom-listen"  # how its connection is named in pg_stat_activity
MAX_PAYLOAD = 7999


async def send(conn: Any, channel: str, payload: str) -> None:
    """Notify `channel` with `payload` (text) when `conn`'s transaction
    commits (at once, outside a transaction). `conn` may be a pooled
    connection or the `db.Pool` itself."""
    if len(payload.encode()) > MAX_PAYLOAD:
        raise ValueError(f"a notification payload is at most {MAX_PAYLOAD} bytes")
    await conn.execute("SELECT pg_notify($1, $2)", channel, payload)


class Listener:
    """One worker's LISTEN connection and the callbacks of each channel."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._callbacks: dict[str, list[Callable[[str], None]]] = {}  # channel -> [callback(payload)]
        self._gap_callbacks: list[Callable[[], None]] = []
        self._conn = None
        self._task = None
        self._lost = None  # asyncio.Event, set when the connection terminates
        self.live = False  # connected and listening: notifications arrive now
        self.connects = 0  # connections made so far (1 after the first)

    def listen(self, channel: str, callback: Callable[[str], None]) -> None:
        """Call `callback(payload)` for every notification on `channel`.
        Register before `start`."""
        self._callbacks.setdefault(channel, []).append(callback)

    def on_gap(self, callback: Callable[[], None]) -> None:
        """Call `callback()` whenever notifications may have been missed:
        when the connection is lost, and again when it is back."""
        self._gap_callbacks.append(callback)

    async def start(self, timeout=30.0):
        """Connect (waiting up to `timeout` seconds for the first connection),
        then keep the connection up in the background until `close`."""
        deadline = time.monotonic() + timeout
        while not await self._connect():
            if time.monotonic() > deadline:
                raise RuntimeError("cannot open the LISTEN connection to the database")
            await asyncio.sleep(RETRY_SECONDS[-1])
        self._task = asyncio.create_task(self._keep_up())

    async def close(self):
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.live = False
        if self._conn is not None:
            self._conn.terminate()
            self._conn = None

    # -- the connection ---------------------------------------------------------

    async def _connect(self):
        """Open the connection and LISTEN; True when done."""
        conn = None
        try:
            conn = await asyncpg.connect(self.dsn, timeout=5, command_timeout=5,
                                         server_settings={"application_name": APPLICATION_NAME})
            lost = asyncio.Event()  # this connection's own: an old one ending later must not set a new one's
            conn.add_termination_listener(lambda _conn: lost.set())
            for channel in self._callbacks:
                await conn.add_listener(channel, self._deliver)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncio.TimeoutError) as e:
            if conn is not None:
                conn.terminate()
            log.debug("LISTEN connection not open: %r", e)
            return False
        self._conn, self._lost, self.live = conn, lost, True
        self.connects += 1
        if self.connects > 1:
            log.warning("notifications arrive again (LISTEN connection reopened)")
            self._gap()  # what was sent while we were away is lost
        return True

    async def _keep_up(self):
        while True:
            await self._until_lost()
            self.live = False
            self._gap()
            log.warning("LISTEN connection lost; until it is back, nothing is cached on the strength of "
                        "notifications")
            if self._conn is not None:
                self._conn.terminate()
                self._conn = None
            attempt = 0
            while not await self._connect():
                await asyncio.sleep(RETRY_SECONDS[min(attempt, len(RETRY_SECONDS) - 1)])
                attempt += 1

    async def _until_lost(self):
        """Return once the connection has terminated or stops answering."""
        while not self._lost.is_set():
            try:
                await asyncio.wait_for(self._lost.wait(), PROBE_SECONDS)
                return
            except asyncio.TimeoutError:
                pass
            try:
                await self._conn.fetchval("SELECT 1", timeout=PROBE_SECONDS)
            except Exception as e:  # timed out, closed, or anything else: not live
                log.debug("LISTEN connection probe failed: %r", e)
                return

    def _deliver(self, _conn, _pid, channel, payload):
        for callback in self._callbacks.get(channel, ()):
            try:
                callback(payload)
            except Exception:
                log.exception("a %s notification callback failed", channel)

    def _gap(self):
        for callback in self._gap_callbacks:
            try:
                callback()
            except Exception:
                log.exception("a notification gap callback failed")
