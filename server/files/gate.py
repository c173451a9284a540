"""How many file calls one user's requests may run at once, per worker.

The file processes and threads are shared by the whole class. Without a
bound, one student's forty tabs (or a script) take every file process,
their changes waiting on their own area's lock, and everyone else's loads
and saves queue behind them. Here a user's calls take a place first: at most
PER_USER of them run (or wait for a process) at a time; the rest wait on the
IOLoop, where waiting costs nothing, and past MAX_WAITING they are refused
with a 503 the client retries. An entry lives only while it is in use.
"""
import asyncio
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from ..errors import Refused
from .faults import NotAnswering

PER_USER = 4
MAX_WAITING = 64

_places: dict[str, list[Any]] = {}  # username -> [asyncio.Semaphore, calls holding or waiting]


@asynccontextmanager
async def place(username: str, deadline: float | None = None) -> AsyncIterator[None]:
    """A place for one call of `username`'s, waited for until the loop time
    `deadline` at most (then the storage is not answering their calls)."""
    entry = _places.get(username)
    if entry is None:
        entry = _places[username] = [asyncio.Semaphore(PER_USER), 0]
    if entry[1] >= PER_USER + MAX_WAITING:
        raise Refused(503, "too_many_requests", "Too many of your file requests at once. Try again in a moment.",
                      retry_after=1)
    entry[1] += 1
    try:
        if deadline is None:
            await entry[0].acquire()
        else:
            try:
                await asyncio.wait_for(entry[0].acquire(), max(0, deadline - asyncio.get_running_loop().time()))
            except asyncio.TimeoutError:
                raise NotAnswering() from None
        try:
            yield
        finally:
            entry[0].release()
    finally:
        entry[1] -= 1
        if not entry[1]:
            del _places[username]
