"""A gate that lets at most `size` holders through at once and makes the
rest wait in the order they came, at most `max_waiting` of them.

Under overload, who is served next decides the tail: a queue that lets a
newcomer take a place freed for someone who has waited (asyncpg's pool
does: its waiters wake, find the connection taken, and go to the back of
the line) serves some students in milliseconds while others wait seconds.
Here a place that is given back goes to the longest waiter, never to a
newcomer (asyncio.Semaphore hands it over: a newcomer waits whenever anyone
waits), and a request beyond `max_waiting` is refused at once with `Full`
rather than queued without bound.
"""
import asyncio
from contextlib import asynccontextmanager


class Full(Exception):
    """Every place is taken and the waiting line is full."""

    def __init__(self, name):
        super().__init__(f"the {name} line is full")
        self.name = name


class FifoGate:
    def __init__(self, name: str, size: int, max_waiting: int | None = None):
        self.name = name
        self.size = size
        self.max_waiting = max_waiting  # None: no bound (the callers are bounded elsewhere)
        self.waiting = 0
        self.holding = 0
        self._places = asyncio.Semaphore(size)

    async def acquire(self):
        """Take a place, waiting in line for it; `Full` when the line is full.
        A waiter that is cancelled leaves the line (and gives back a place it
        was just handed)."""
        if self._places.locked():
            if self.max_waiting is not None and self.waiting >= self.max_waiting:
                raise Full(self.name)
            self.waiting += 1
            try:
                await self._places.acquire()
            finally:
                self.waiting -= 1
        else:
            await self._places.acquire()
        self.holding += 1

    def release(self):
        self.holding -= 1
        self._places.release()

    @asynccontextmanager
    async def place(self):
        await self.acquire()
        try:
            yield
        finally:
            self.release()
