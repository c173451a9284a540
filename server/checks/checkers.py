"""Sandboxes for the teachers' checks, which must never share one with a
student's program: the checks and the values a student's code returned
meet only here, out of that code's reach.

A checker sandbox is a sandbox of the worker's kind whose home is a
scratch folder of its own (DATA_DIR/sandbox/checkers/<n>, 0700; on a
runner, a folder there: `fill` replaces what it holds), holding
only what an attempt puts there (the teacher's tests) and run as CHECKER_UID
(the uid of user id 0, which no account has; the server's own where it is
not root). After each attempt its folder is emptied; a sandbox that may
serve another run waits for the next attempt (at most `keep` of them wait),
any other is killed as a whole and its folder removed.

An attempt's checker run is a job like any other (runs/job.py): its sandbox
comes from a `CheckerPlace`, which takes a checker sandbox, puts the
attempt's files in it and gives it back.
"""
import asyncio
import logging
import os
import shutil
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from ..accounts.uids import run_uid
from ..files.history import etag_of
from ..runs.shipping import as_pieces
from ..runs.sandbox import SandboxError
from ..runs.scratch import make_folder, remove_folder
from ..runs.starts import Sandboxed, Starts, discard, ready

log = logging.getLogger(__name__)

CHECKER_USER_ID = 0  # user ids start at 1: this uid is no student's


@dataclass
class Checker:
    """A ready checker sandbox and its scratch folder."""
    sandboxed: Sandboxed
    home: str


class CheckerSandboxes:
    def __init__(self, starts: Starts, keep: int = 2):
        self.starts = starts
        cfg = self.cfg = starts.cfg
        self.keep = keep
        self.uid: int | None = run_uid(cfg, CHECKER_USER_ID)
        self.folder = os.path.join(cfg.DATA_DIR, "sandbox", "checkers")
        self.idle: list[Checker] = []

    async def take(self) -> Checker | None:
        """A ready checker sandbox with an empty home; None if none could start."""
        while self.idle:
            checker = self.idle.pop()
            if await ready(checker.sandboxed.sandbox):
                return checker
            await self._drop(checker)
        return await self._new()

    async def fill(self, checker: Checker, files: dict[str, bytes]) -> None:
        """Put `files` (name -> bytes, names without folders) into its
        home, theirs to read: the folder, or a runner's copy of it."""
        for name in files:
            if os.sep in name or name in ("", ".", ".."):
                raise ValueError(f"not a plain file name: {name!r}")
        copy = checker.sandboxed.sandbox.copy
        if copy is None:
            await asyncio.get_running_loop().run_in_executor(None, self._write, checker.home, files)
            return
        await copy.put([piece for name, data in files.items() for piece in as_pieces(name, data, etag_of(data))],
                       [], clear=True)

    def _write(self, home: str, files: dict[str, bytes]) -> None:
        for name, data in files.items():
            path = os.path.join(home, name)
            with open(path, "xb") as f:
                f.write(data)
            if self.uid is not None:
                os.chown(path, self.uid, self.uid)

    async def give_back(self, checker: Checker, reusable: bool) -> None:
        """The attempt is over: its folder is emptied, and the sandbox kept for
        the next attempt if it may serve one."""
        checker.sandboxed.runs_left -= 1
        await asyncio.get_running_loop().run_in_executor(None, _empty, checker.home)
        if reusable and checker.sandboxed.runs_left > 0 and len(self.idle) < self.keep:
            self.idle.append(checker)
        else:
            await self._drop(checker)

    async def close(self) -> None:
        idle, self.idle = self.idle, []
        await asyncio.gather(*(self._drop(c) for c in idle), return_exceptions=True)

    async def _new(self) -> Checker | None:
        loop = asyncio.get_running_loop()
        try:
            home = await loop.run_in_executor(None, make_folder, self.folder, "checker-", self.uid)
        except OSError:
            log.exception("could not make a checker sandbox's folder")
            return None
        sandboxed = await self.starts.start(home, self.uid, "checker ")
        if sandboxed is None:
            await loop.run_in_executor(None, remove_folder, home)
            return None
        return Checker(sandboxed, home)

    async def _drop(self, checker: Checker) -> None:
        await discard(checker.sandboxed.sandbox)
        await asyncio.get_running_loop().run_in_executor(None, remove_folder, checker.home)


class CheckerPlace:
    """Where a checker run's job takes its sandbox from (job.SandboxSource):
    a checker sandbox holding `files` (the teacher's tests), given back
    emptied once the run is over."""

    holds_home = False  # a folder of its own: no student's home
    copies_home = False

    def __init__(self, checkers: CheckerSandboxes, files: dict[str, bytes]) -> None:
        self.checkers = checkers
        self.files = files
        self.checker: Checker | None = None

    async def take(self, user: dict[str, Any], notify: Callable[[int], Awaitable[None]]) -> Sandboxed | None:
        checker = await self.checkers.take()
        if checker is None:
            return None
        try:
            await self.checkers.fill(checker, self.files)
        except SandboxError as e:  # its runner is lost
            log.warning("could not fill a checker sandbox: %s", e)
            await self.checkers.give_back(checker, False)
            return None
        except BaseException:
            await self.checkers.give_back(checker, False)
            raise
        self.checker = checker
        return checker.sandboxed

    def used(self, user: dict[str, Any], sandboxed: Sandboxed) -> None:
        pass  # (nothing to count: a checker sandbox is nobody's)

    async def give_back(self, user: dict[str, Any], sandboxed: Sandboxed, ran: bool, reusable: bool) -> None:
        checker, self.checker = self.checker, None
        if checker is not None:
            await self.checkers.give_back(checker, reusable)


def _empty(folder: str) -> None:
    """Remove everything in `folder`, whatever the attempts made there."""
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
