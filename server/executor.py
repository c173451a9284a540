"""A thread pool with a bounded backlog, for work that must stay off the IOLoop.

`concurrent.futures.ThreadPoolExecutor` queues without limit; under a burst
that turns into unbounded memory and unbounded waiting. Here at most
`max_pending` calls may be waiting or running; one more is refused with
`Busy` at once, which handlers turn into a 503 the client can retry.
"""
import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

from . import timing

T = TypeVar("T")


class Busy(Exception):
    """The executor's backlog is full."""

    def __init__(self, name: str) -> None:
        super().__init__(f"the {name} queue is full")
        self.name = name


class BoundedExecutor:
    def __init__(self, name: str, threads: int, max_pending: int) -> None:
        self.name = name
        self.threads = threads
        self.max_pending = max_pending
        self.pending = 0
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)

    async def call(self, fn: Callable[..., T], *args: object) -> T:
        """Run `fn(*args)` in a thread; the seconds spent waiting for a thread
        and running count as the request's `<name>_wait` and `<name>`."""
        if self.pending >= self.max_pending:
            raise Busy(self.name)
        self.pending += 1
        queued = time.perf_counter()
        started: float | None = None

        def call() -> T:
            nonlocal started
            started = time.perf_counter()
            return fn(*args)

        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, call)
        finally:
            self.pending -= 1
            if started is not None:
                timing.add(self.name + "_wait", started - queued)
                timing.add(self.name, time.perf_counter() - started)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
