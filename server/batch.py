"""Database writes that may wait a moment, written together.

Bookkeeping that no request has to wait for (when a student last saved,
how long a session lives on) must not cost each request a commit and its
WAL flush. A `Batch` gathers such writes by key, the newest value of a key
winning, and `flush` hands all that is pending to one `write(items)`
statement; the worker flushes every batch twice a second and once more as
it drains (worker.py), so nothing acknowledged is lost at a shutdown.

What is pending is bounded by the number of keys (users, sessions), never
by the number of requests. A write that fails keeps its items for the next
flush; a value added meanwhile stays the newer one.
"""
import logging
from typing import Any, Awaitable, Callable

log = logging.getLogger(__name__)


class Batch:
    def __init__(self, name: str, write: Callable[[dict], Awaitable[None]]):
        self.name = name
        self._write = write
        self.pending: dict[Any, Any] = {}

    def add(self, key: Any, value: Any = None) -> None:
        self.pending[key] = value

    async def flush(self):
        """Write everything pending in one call; on failure keep it and raise."""
        if not self.pending:
            return
        items, self.pending = self.pending, {}
        try:
            await self._write(items)
        except BaseException:
            for key, value in items.items():
                self.pending.setdefault(key, value)
            raise
