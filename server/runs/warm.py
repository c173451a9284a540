"""The sandbox kept started for each student who has an IDE open on this
worker, so that Run starts a program at once instead of a sandbox.

A student is `wanted` while they have a socket open here (the run manager
says so); their ready sandbox is started then, and again after each run.
A job `take`s it (or a fresh one, for a student with no IDE open here or
whose ready one failed) and `give_back`s it when its run ends: a sandbox
that may serve another run becomes the ready one again, any other is
killed as a whole and its cgroup removed. A sandbox serves
RUN_SANDBOX_RUNS runs at most (less up to a fifth at random, so that a
class does not replace all its sandboxes at the same run).
"""
import asyncio
import logging
from typing import Any, Awaitable, Callable

from .. import metrics
from ..errors import Refused
from .admission import Notify, Place
from .starts import Sandboxed, Starts, discard, ready

log = logging.getLogger(__name__)


class WarmSandboxes:
    holds_home = True  # a sandbox here is the student's home: their programs write it

    def __init__(self, starts: Starts, home_of: Callable[[dict[str, Any]], Awaitable[str]],
                 uid_of: Callable[[dict[str, Any]], int | None], draining: Callable[[], bool]):
        self.starts = starts  # every sandbox start of the worker goes through its line
        self.kind = starts.kind
        self.copies_home = self.kind.copies_home
        self.home_of = home_of  # async (user) -> the path of their home, made if need be
        self.uid_of = uid_of  # (user) -> the uid their programs run as
        self.draining = draining  # () -> True once the worker shuts down: no new sandboxes
        self.wanted: dict[int, dict[str, Any]] = {}  # user id -> the user, while they have an IDE open here
        self.ready: dict[int, asyncio.Future[Sandboxed | None]] = {}  # user id -> its sandbox (None: it failed)
        self.places: dict[int, Place] = {}  # user id -> the Place of their ready sandbox's start while it waits in line
        self.discarding: set[asyncio.Task[None]] = set()  # tasks killing sandboxes nobody wants: awaited by close

    def want(self, user: dict[str, Any]) -> None:
        """`user` has an IDE open here: keep a sandbox ready for them."""
        self.wanted[user["id"]] = user
        self.warm_up(user)

    def unwant(self, user: dict[str, Any]) -> None:
        """Their last IDE here closed: the ready sandbox goes (a running one
        goes when its run ends)."""
        self.wanted.pop(user["id"], None)
        self.places.pop(user["id"], None)
        ready = self.ready.pop(user["id"], None)
        if ready is not None:
            task = asyncio.ensure_future(self._discard_when_ready(ready))
            self.discarding.add(task)
            task.add_done_callback(self.discarding.discard)

    def warm_up(self, user: dict[str, Any]) -> None:
        """Start `user`'s ready sandbox, unless they have one or are not wanted."""
        if user["id"] in self.wanted and user["id"] not in self.ready and not self.draining():
            place = self.places[user["id"]] = Place(ahead=True)
            self.ready[user["id"]] = asyncio.ensure_future(self.new(user, place))

    async def take(self, user: dict[str, Any], notify: Notify) -> Sandboxed | None:
        """The user's ready sandbox, or a fresh one; None if none could start.
        `notify(position)` hears where its start is in line, if it waits."""
        ready = self.ready.pop(user["id"], None)
        place = self.places.pop(user["id"], None)
        if ready is not None and place is not None and not ready.done():
            self.starts.hurry(place, notify)  # they wait for it now
        sandboxed = await ready if ready else None
        return sandboxed or await self.new(user, Place(notify))

    async def give_back(self, user: dict[str, Any], sandboxed: Sandboxed, ran: bool, reusable: bool) -> None:
        """A job is done with `sandboxed` (`ran`: a program ran in it;
        `reusable`: its launcher cleared up after it). It is kept ready
        for the student's next run if it may serve one and nothing else is;
        else it goes, and a new one is started for a student still here."""
        keep = not ran or (reusable and sandboxed.runs_left > 0)
        if keep and user["id"] in self.wanted and user["id"] not in self.ready and not self.draining():
            self.ready[user["id"]] = asyncio.ensure_future(self._reuse(sandboxed, fresh=not ran))
            return
        await discard(sandboxed.sandbox)
        self.warm_up(user)

    def used(self, user: dict[str, Any], sandboxed: Sandboxed) -> None:
        """A run starts in `sandboxed`. If it is the sandbox's last, its
        successor starts now, ready for the next run. (One that serves one
        run only is replaced after it, not during it: that would double
        the sandboxes of a class.)"""
        sandboxed.runs_left -= 1
        if sandboxed.runs_left == 0 and self.kind.reusable:
            self.warm_up(user)

    async def new(self, user: dict[str, Any], place: Place) -> Sandboxed | None:
        """Start a sandbox for `user` (its `place` in the starts' line) and
        wait until its launcher is ready."""
        try:
            try:
                home = await self.home_of(user)
            except Refused as e:  # the storage's answer (failing, hung): logged once per episode by files/faults.py
                log.info("no %s sandbox for %s now: %s", self.kind.name, user["username"], e.message)
                return None
            return await self.starts.start(home, self.uid_of(user), place=place)
        finally:
            if self.places.get(user["id"]) is place:
                del self.places[user["id"]]

    async def _reuse(self, sandboxed: Sandboxed, fresh: bool) -> Sandboxed | None:
        """A sandbox back from a run (or one that never ran), once ready again."""
        if fresh or await ready(sandboxed.sandbox):
            if not fresh:
                metrics.SANDBOX_REUSED.inc()
            return sandboxed
        await discard(sandboxed.sandbox)
        return None

    async def _discard_when_ready(self, ready: asyncio.Future[Sandboxed | None]) -> None:
        sandboxed = await ready
        if sandboxed:
            await discard(sandboxed.sandbox)

    async def close(self) -> None:
        """At shutdown: every ready sandbox goes."""
        self.wanted.clear()
        ready, self.ready = list(self.ready.values()), {}
        await asyncio.gather(*(self._discard_when_ready(r) for r in ready), *self.discarding, return_exceptions=True)
