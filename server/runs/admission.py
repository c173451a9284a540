"""Admission: how many programs run at once, and the line for the others.

The host's limit (RUN_MAX_CONCURRENT) and queue (RUN_QUEUE_MAX) are shared
out evenly among the workers, so the host total holds without the workers
talking to each other. Within a worker the line is first come, first
served, and everyone in it is told their position whenever it changes.
"""
import asyncio


class QueueFull(Exception):
    pass


class Admission:
    def __init__(self, slots, queue_max):
        self.slots = max(1, slots)
        self.queue_max = queue_max
        self.running = 0
        self.waiting = []  # [(future, notify(position))], first in line first

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
        future = asyncio.get_running_loop().create_future()
        entry = (future, notify)
        self.waiting.append(entry)
        await notify(len(self.waiting))
        try:
            await future
        except asyncio.CancelledError:
            if entry in self.waiting:
                self.waiting.remove(entry)
                self._announce()
            elif future.done() and not future.cancelled():
                self.leave()  # admitted just as it gave up: pass the place on
            raise

    def leave(self):
        """A run ended: its place goes to the first in line."""
        while self.waiting:
            future, _ = self.waiting.pop(0)
            if not future.done():
                future.set_result(None)  # the place passes on; `running` stays
                self._announce()
                return
        self.running -= 1

    def _announce(self):
        for position, (_, notify) in enumerate(self.waiting, start=1):
            asyncio.ensure_future(notify(position))
