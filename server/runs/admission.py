"""Admission: how many programs run at once, and the line for the others.

The host's limit (RUN_MAX_CONCURRENT) and queue (RUN_QUEUE_MAX) are shared
out evenly among the workers, so the host total holds without the workers
talking to each other. Within a worker the line is first come, first
served, and everyone in it is told their position when it has changed,
at most every ANNOUNCE_SECONDS: each admission moves the whole line, and
telling everyone at once cost 14 messages per run at 30 students.

A place may be asked for ahead of need (a sandbox started for a student
who has not pressed Run yet: starts.py): it goes after every place that
somebody waits for, until it is `hurry`-ed because somebody now does.
"""
import asyncio
from typing import Awaitable, Callable

from ..config import Config

ANNOUNCE_SECONDS = 0.2
Notify = Callable[[int], Awaitable[None]]  # hears a place's position in the line (1 = next)


class QueueFull(Exception):
    pass


class Admission:
    def __init__(self, slots: int, queue_max: int) -> None:
        self.slots = max(1, slots)
        self.queue_max = queue_max
        self.running = 0
        self.waiting: list[Place] = []  # first in line first
        self._announcing: asyncio.TimerHandle | None = None  # the timer of the next announcement

    @classmethod
    def share(cls, cfg: Config, processes: int) -> "Admission":
        return cls(cfg.RUN_MAX_CONCURRENT // processes, cfg.RUN_QUEUE_MAX // processes)

    async def enter(self, notify: Notify | None, place: "Place | None" = None) -> None:
        """Return once this run may start. `notify(position)` is called
        (and awaited) when queued and each time the position changes.
        `place`: the caller's own Place (one asked for ahead of need, to
        `hurry` later), else one is made with `notify`."""
        if self.running < self.slots and not self.waiting:
            self.running += 1
            return
        if len(self.waiting) >= self.queue_max:
            raise QueueFull()
        entry = place or Place(notify)
        entry.future = asyncio.get_running_loop().create_future()
        self._line_up(entry)
        if entry.notify is not None:
            await entry.notify(entry.told)
        try:
            await entry.future
        except asyncio.CancelledError:
            if entry in self.waiting:
                self.waiting.remove(entry)
                self._announce()
            elif entry.future.done() and not entry.future.cancelled():
                self.leave()  # admitted just as it gave up: pass the place on
            raise

    def hurry(self, place: "Place", notify: Notify) -> None:
        """Somebody now waits for `place` (asked for ahead of need): it goes
        before every place still ahead of need, and `notify` hears of it."""
        place.ahead, place.notify = False, notify
        if place in self.waiting:
            self.waiting.remove(place)
            self._line_up(place)  # (which tells those it passed)
            asyncio.ensure_future(notify(place.told))

    def position(self, place: "Place") -> int | None:
        """Where `place` stands in the line (1 = next); None once admitted."""
        return self.waiting.index(place) + 1 if place in self.waiting else None

    def _line_up(self, entry: "Place") -> None:
        """Into the line: at its end, or, when somebody waits for it, before
        the first place asked for ahead of need."""
        at = len(self.waiting)
        if not entry.ahead:
            at = next((i for i, e in enumerate(self.waiting) if e.ahead), at)
        self.waiting.insert(at, entry)
        entry.told = at + 1
        if at + 1 < len(self.waiting):
            self._announce()  # those behind it moved back

    def leave(self) -> None:
        """A run ended: its place goes to the first in line."""
        while self.waiting:
            entry = self.waiting.pop(0)
            assert entry.future is not None  # (set as it lined up)
            if not entry.future.done():
                entry.future.set_result(None)  # the place passes on; `running` stays
                self._announce()
                return
        self.running -= 1

    def _announce(self) -> None:
        if self._announcing is None:
            self._announcing = asyncio.get_running_loop().call_later(ANNOUNCE_SECONDS, self._tell_positions)

    def _tell_positions(self) -> None:
        self._announcing = None
        for position, entry in enumerate(self.waiting, start=1):
            if position != entry.told:
                entry.told = position
                if entry.notify is not None:
                    asyncio.ensure_future(entry.notify(position))


class Place:
    """A place asked for in the line: admitted when `future` is done;
    `notify(position)` hears where it stands (None: nobody to tell yet),
    `told` is the position it was last told; `ahead`: asked for ahead of
    need, so it goes after every place somebody waits for."""

    __slots__ = ("future", "notify", "told", "ahead")

    def __init__(self, notify: Notify | None = None, ahead: bool = False) -> None:
        self.future: asyncio.Future[None] | None = None
        self.notify, self.told, self.ahead = notify, 0, ahead
