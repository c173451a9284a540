"""PostgreSQL LISTEN/NOTIFY for one worker: a minimal private copy of the
API that server/notify.py (branch files-perf) provides, so the live class
view can be built and tested before it lands. At merge, server/notify.py
replaces this module; its users need only `send` and `Notify.listen`.

One connection of its own per worker (LISTEN cannot share the request
pool's connections), opened again with a growing pause when it is lost.
Notifications sent while it was away are lost: listeners that must not
miss a change re-read their state now and then.
"""
import asyncio
import logging

import asyncpg

log = logging.getLogger(__name__)

RETRY_MAX = 10.0
PING_SECONDS = 30.0


async def send(conn, channel: str, payload: str) -> None:
    """Notify `channel` when the transaction of `conn` commits (at once outside one)."""
    await conn.execute("SELECT pg_notify($1, $2)", channel, payload)


class Notify:
    def __init__(self, dsn: str):
        self.dsn = dsn
        self.callbacks = {}  # channel -> [callback(payload)]
        self.task = None
        self.closing = False

    def listen(self, channel: str, callback) -> None:
        """Call `callback(payload)` on the IOLoop for every notification on `channel`."""
        self.callbacks.setdefault(channel, []).append(callback)
        if self.task is None:
            self.task = asyncio.ensure_future(self._connected())

    def _deliver(self, conn, pid, channel, payload):
        for callback in self.callbacks.get(channel, ()):
            try:
                callback(payload)
            except Exception:
                log.exception("a listener of %s failed", channel)

    async def _connected(self):
        """Keep a listening connection open until close()."""
        delay, failing = 0.2, False
        while not self.closing:
            lost = asyncio.Event()
            conn = None
            try:
                conn = await asyncpg.connect(self.dsn, timeout=10)
                conn.add_termination_listener(lambda _: lost.set())
                for channel in list(self.callbacks):
                    await conn.add_listener(channel, self._deliver)
                if failing:
                    log.warning("listening for notifications again")
                delay, failing = 0.2, False
                while not lost.is_set():
                    try:
                        await asyncio.wait_for(lost.wait(), PING_SECONDS)
                    except asyncio.TimeoutError:
                        await conn.execute("SELECT 1", timeout=PING_SECONDS)  # a silent network drop
            except asyncio.CancelledError:
                raise
            except Exception as e:  # said once per outage, as the pool does
                if not failing:
                    log.warning("listening for notifications failed (%s); trying again until it works", e)
                failing = True
            finally:
                if conn is not None and not conn.is_closed():
                    conn.terminate()
            if not self.closing:
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)

    async def close(self) -> None:
        self.closing = True
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
