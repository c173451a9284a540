"""A sandbox with a throwaway home, for runs that must not reach the
student's own files: an attempt's runs of the student's program.

An attempt runs the student's code on inputs the student must not learn
(hidden checks). In the student's ready sandbox (warm.py) a program could
write them into its home and read them back through the files API; here
its home is an empty scratch folder of its own (DATA_DIR/sandbox/scratch,
0700, the student's uid), and the program runs a copy of the graded files
that the launcher writes afresh for each run (Job: RunSpec.files). A
attempt has one such sandbox (grader.py: started ahead of time, its shown
checks run before its hidden ones) and `close`s it when it is over: the
sandbox is killed as a whole and its folder removed, so nothing an attempt's
run wrote survives it.

It is taken and given back by a job as the student's ready sandbox is
(`take`, `used`, `give_back`), and serves the attempt's runs one after
another while its launcher clears up after each; one that cannot serve
again is replaced by a fresh one on the same scratch folder. The checker
sandboxes (checkers.py) make and remove their folders with the same two
functions (`make_folder`, `remove_folder`).
"""
import asyncio
import logging
import os
import tempfile
from typing import Any

from ..files.walk import remove_tree
from ..config import Config
from .admission import Notify, Place
from .cgroups import tag_alive, worker_tag
from .starts import Sandboxed, Starts, discard, ready

log = logging.getLogger(__name__)


class ScratchSandbox:
    """One attempt's sandbox (see the module docstring)."""

    holds_home = False  # its programs never see the student's home: no quota, no change to announce
    copies_home = False

    def __init__(self, starts: Starts, uid: int | None):
        self.starts, self.cfg, self.uid = starts, starts.cfg, uid
        self.folder: str | None = None  # the scratch home, once made
        self.idle: Sandboxed | None = None  # ready for the attempt's next run
        self.starting: asyncio.Future[Sandboxed | None] | None = None
        self.place: Place | None = None  # the starting sandbox's place in the starts' line
        self.closed = False

    def warm_up(self, ahead: bool = False) -> None:
        """Start the sandbox now, so that it is ready by the time a run needs
        it (`ahead`: before anyone waits for it, so after those who do)."""
        if self.starting is None and self.idle is None and not self.closed:
            self.place = Place(ahead=ahead)
            self.starting = asyncio.ensure_future(self._new(self.place))

    async def take(self, user: dict[str, Any], notify: Notify) -> Sandboxed | None:
        """The ready sandbox (started if need be); None if none could start.
        `notify(position)` hears where its start is in line, if it waits."""
        if self.closed:
            return None
        if self.idle is not None:
            sandboxed, self.idle = self.idle, None
            return sandboxed
        self.warm_up()
        starting, self.starting = self.starting, None
        assert starting is not None and self.place is not None  # warm_up made them
        if self.place.ahead and not starting.done():
            self.starts.hurry(self.place, notify)
        return await starting

    def used(self, user: dict[str, Any], sandboxed: Sandboxed) -> None:
        sandboxed.runs_left -= 1

    async def give_back(self, user: dict[str, Any], sandboxed: Sandboxed, ran: bool, reusable: bool) -> None:
        """Kept for the attempt's next run if its launcher cleared up after
        this one (the scratch folder stays, with what the runs wrote)."""
        keep = not ran or (reusable and sandboxed.runs_left > 0)
        if keep and not self.closed and self.idle is None:
            if not ran or await ready(sandboxed.sandbox):
                self.idle = sandboxed
                return
        await discard(sandboxed.sandbox)

    async def close(self) -> None:
        """The attempt is over: the sandbox goes, and its folder with all it holds."""
        self.closed = True
        idle, self.idle = self.idle, None
        starting, self.starting = self.starting, None
        if starting is not None:
            idle = idle or await starting
        if idle is not None:
            await discard(idle.sandbox)
        if self.folder is not None:
            await asyncio.get_running_loop().run_in_executor(None, remove_folder, self.folder)

    async def _new(self, place: Place) -> Sandboxed | None:
        loop = asyncio.get_running_loop()
        folder = self.folder
        if folder is None:
            try:
                # Named after its worker, for remove_leftovers.
                self.folder = folder = await loop.run_in_executor(None, make_folder, scratch_folder(self.cfg),
                                                         worker_tag() + ".", self.uid)
            except OSError:
                log.exception("could not make a check's scratch folder")
                return None
        return await self.starts.start(folder, self.uid, "check ", place)



def make_folder(parent: str, prefix: str, uid: int | None) -> str:
    """A new empty folder in `parent` (made 0711 if need be), 0700 and owned
    by `uid`: a sandbox's home. Blocking: call it in a thread."""
    os.makedirs(parent, mode=0o711, exist_ok=True)
    folder = tempfile.mkdtemp(prefix=prefix, dir=parent)
    if uid is not None:
        os.chown(folder, uid, uid)
    return folder


def remove_folder(folder: str) -> None:
    """Remove a sandbox's home whatever its programs made of it (deep trees,
    links: files.walk.remove_tree); they are gone. Blocking: call it in a thread."""
    try:
        remove_tree(folder)
    except Exception:  # OSError, or walk.Changed: left for the log, never the caller's failure
        log.exception("could not remove the sandbox folder %s", folder)


def scratch_folder(cfg: Config) -> str:
    return os.path.join(cfg.DATA_DIR, "sandbox", "scratch")


def remove_leftovers(cfg: Config) -> int:
    """Remove the scratch folders of workers that are gone (a crash, kill -9
    in the middle of an attempt): how many. Blocking: call it in a thread."""
    return remove_orphans(scratch_folder(cfg))


def remove_orphans(parent: str) -> int:
    """Remove the folders in `parent` that make_folder named after a
    process that is gone (worker_tag() + "."): how many. Blocking."""
    try:
        names = os.listdir(parent)
    except FileNotFoundError:
        return 0
    gone = [name for name in names if not tag_alive(name.split(".", 1)[0])]
    for name in gone:
        remove_folder(os.path.join(parent, name))
    return len(gone)
