"""Admission: how many programs run at once, and the line for the others.

The host's limit (RUN_MAX_CONCURRENT) and queue (RUN_QUEUE_MAX) are shared
out evenly among the workers, so the host total holds without the workers
talking to each other. Within a worker the line is first come, first
served, and everyone in it is told their position when it has changed,
at most every ANNOUNCE_SECONDS: each admission moves the whole line, and
telling everyone at once cost 14 messages per run at 30 students.
"""
import asyncio

ANNOUNCE_SECONDS = 0.2


class QueueFull(Exception):
    pass


class Admission:
    def __init__(self, slots, queue_max):
        self.slots = max(1, slots)
        self.queue_max = queue_max
        self.running = 0
        self.waiting = []  # [_Waiter], first in line first
        self._announcing = None  # the timer of the next announcement

    @classmethod
    def share(cls, cfg, processes):
        return cls(cfg.RUN_MAX_CONCURRENT // processes, cfg.RUN_QUEUE_MAX // processes)

    async def enter(self, notify):
        """Return once this run may start. `notify(position)` is called
        (and awaited) when queued and each time the position changes."""
        if self.running < self.slots and not self.waiting:
            self.running += 1
            return
        if len(self.waiting) >= self.queue_max:
            raise QueueFull()
        entry = _Waiter(asyncio.get_running_loop().create_future(), notify, len(self.waiting) + 1)
        self.waiting.append(entry)
        await notify(entry.told)
        try:
            await entry.future
        except asyncio.CancelledError:
            if entry in self.waiting:
                self.waiting.remove(entry)
                self._announce()
            elif entry.future.done() and not entry.future.cancelled():
                self.leave()  # admitted just as it gave up: pass the place on
            raise

    def leave(self):
        """A run ended: its place goes to the first in line."""
        while self.waiting:
            entry = self.waiting.pop(0)
            if not entry.future.done():
                entry.future.set_result(None)  # the place passes on; `running` stays
                self._announce()
                return
        self.running -= 1

    def _announce(self):
        if self._announcing is None:
            self._announcing = asyncio.get_running_loop().call_later(ANNOUNCE_SECONDS, self._tell_positions)

    def _tell_positions(self):
        self._announcing = None
        for position, entry in enumerate(self.waiting, start=1):
            if position != entry.told:
                entry.told = position
                asyncio.ensure_future(entry.notify(position))


class _Waiter:
    """A run in the line: admitted when `future` is done; `told` is the
    position it was last told."""

    __slots__ = ("future", "notify", "told")

    def __init__(self, future, notify, told):
        self.future, self.notify, self.told = future, notify, told
