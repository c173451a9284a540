"""What each home holds, as the teacher's roster shows it (users.disk_bytes,
disk_files) and as a student's next save or run counts it, walked again
after runs (a program may have written anything).

A student running again and again has their home walked at most every
MEASURE_EVERY seconds: the walk after the last of those runs is put off
until then (what a run writes meanwhile is bounded by its limits and its
disk guard). A run that wrote files has it walked at once (`now`): the next
run's write budget starts from the record. Most runs write nothing, and
then nothing is written to the database either.
"""
import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Coroutine

from ..db import Pool
from ..errors import Refused

log = logging.getLogger(__name__)

MEASURE_EVERY = 1.0  # seconds between walks of one home after runs


@dataclass
class _Home:
    recorded: tuple[int, int] | None = None  # (bytes, files) as last written to the roster
    measured_at: float = -MEASURE_EVERY  # monotonic time of the last walk
    due: "asyncio.Future[None] | None" = None  # a walk put off to keep to MEASURE_EVERY


@dataclass
class HomeUsage:
    pool: Pool
    # async (username) -> (bytes, files, problem or None)
    measure: Callable[[str], Awaitable[tuple[int, int, str | None]]]
    # Runs a walk put off as a task the worker waits for.
    track: Callable[[Coroutine[Any, Any, None]], "asyncio.Future[None]"] = asyncio.ensure_future
    homes: dict[int, _Home] = field(default_factory=dict)  # user id -> _Home (bounded by the worker's students)

    async def after_run(self, user: dict[str, Any], tell: Callable[[str], Awaitable[None]], now: bool = False) -> None:
        """A run of `user` ended: walk their home (now, or once MEASURE_EVERY
        allows) and record it; `tell(sentence)` the student when it is over
        its quota."""
        home = self.homes.setdefault(user["id"], _Home())
        if home.due is not None and not now:
            return  # a walk is due, and will see what this run wrote
        wait = home.measured_at + MEASURE_EVERY - time.monotonic()
        if wait <= 0 or now:
            await self._walk(user, home, tell)
            return

        async def later() -> None:
            try:
                await asyncio.sleep(wait)
                await self._walk(user, home, tell)
            finally:
                home.due = None
        home.due = self.track(later())

    def forget(self, user: dict[str, Any]) -> None:
        """`user` left this worker: their record goes (a walk still due ends
        on its own), and their next run here walks their home at once."""
        self.homes.pop(user["id"], None)

    async def _walk(self, user: dict[str, Any], home: _Home, tell: Callable[[str], Awaitable[None]]) -> None:
        home.measured_at = time.monotonic()
        try:
            used, files, problem = await self.measure(user["username"])
            if home.recorded != (used, files):
                await self.pool.execute(
                    "UPDATE users SET disk_bytes = $2, disk_files = $3, disk_measured_at = now() WHERE id = $1",
                    user["id"], used, files)
                home.recorded = (used, files)
        except Refused as e:  # busy, or the database away: the next run measures again
            log.info("could not measure the home of %s after a run: %s", user["username"], e.message)
            return
        if problem:
            await tell(problem)
