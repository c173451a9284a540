"""A run's write budget: how much it may write before its home is measured.

The home's quota is measured by walking it, which costs a stat per file, so
a run cannot be walked after every write; a program writing 20 MB files
in a loop wrote 2 GB between two walks three seconds apart. The kernel,
though, counts what each process writes to files as it writes it
(`write_bytes` in /proc/<pid>/io: the page-cache pages it dirties, or its
direct writes; tmpfs, pipes and the terminal are not counted; a reaped
child's count goes to its parent, which in a sandbox is the launcher). The
guard sums that count over the run's cgroup, which costs a few
microseconds, and

- gives the run a budget: what the home had left when the run started
  (as its usage record says);
- reads the count often enough that a run writing at WRITE_RATE cannot get
  far past the budget between two reads: the interval is the budget left
  divided by WRITE_RATE (never under MIN_INTERVAL, which a few MB cover);
- when the budget is spent, freezes the run (no write can race the
  measurement), has the home walked, and either gives a new budget of what
  is left (the program may have rewritten or deleted files) and thaws it,
  or reports it over its quota, still frozen, to be killed.

A process stops for a freeze between system calls, not within one: the
write in flight, up to a whole file's worth, lands first. So one process
writing ends at most about one RUN_FILE_MB past the quota. Several
processes writing at once (each has written HEAVY bytes) could each land
one, and a walk takes milliseconds they would write on in: they are
killed on the kernel's count as soon as it reaches the budget (SIGKILL
cuts a write short), without a walk; a program of several processes that
rewrites more than its home has left is stopped too. Either way the run also
gets past by what it writes while the server is late to look: the reads
come every budget-left / WRITE_RATE seconds (a run has one core, which
copied into the page cache at 0.8-4 GB/s on the machines this was
measured on), later on a busy server. Measured with the defaults (200 MB
quota, RUN_FILE_MB 20), local and docker, four runs each: 0-20 MB past
with one, four or sixteen writing processes (tests/test_run_disk.py
checks a smaller case). Empty and sparse files cost no writes:
the periodic walk (run.py) catches those, as it catches a files quota.

Everything here reads or writes the kernel's own files (procfs, cgroupfs),
which never wait for storage, and is done on the event loop: a freeze that
first waited for a thread would let the program write on meanwhile.
"""
import asyncio
import logging
import os
import signal
import time
from typing import Awaitable, Callable, Collection, Iterable, Protocol

from .cgroups import RunGroup

log = logging.getLogger(__name__)

WRITE_RATE = 8 << 30  # bytes a second a run is assumed to write at most
MIN_INTERVAL = 0.001  # seconds: reads of the count never come closer than this
MAX_INTERVAL = 0.25
FREEZE_WAIT = 1.0  # seconds a freeze waits for processes busy in the kernel
HEAVY = 1 << 20  # bytes a process has written to count as one of several writers (not a worker's result file)


def written_bytes(pids: Iterable[int], exclude: Collection[int] = ()) -> tuple[int, int]:
    """(What the processes `pids` (and the children they reaped) have
    written to files so far, as the kernel counts it; how many of those
    not in `exclude` have written HEAVY bytes or more)."""
    total = writers = 0
    for pid in pids:
        try:
            fd = os.open(f"/proc/{pid}/io", os.O_RDONLY)
        except OSError:
            continue  # gone: its count is in its parent's now
        try:
            text = os.read(fd, 1024)
        except OSError:
            continue
        finally:
            os.close(fd)
        at = text.find(b"\nwrite_bytes: ")
        if at >= 0:
            n = int(text[at + 14:text.index(b"\n", at + 1)])
            total += n
            writers += n >= HEAVY and pid not in exclude
    return total, writers


class GroupWrites:
    """The write count and the freezer of one run's cgroup (a RunGroup of
    cgroups.py, or a container's cgroup folders)."""

    def __init__(self, version: int, dirs: dict[str, str]) -> None:
        self.version = version  # 1 or 2
        self.dirs = dirs  # v1: {controller: folder}, needing "freezer"; v2: {"": folder}
        procs_dir = dirs.get("memory") or dirs.get("freezer") or dirs[""]
        self._procs = os.path.join(procs_dir, "cgroup.procs")
        self._last = 0

    @classmethod
    def of(cls, group: RunGroup | None) -> "GroupWrites | None":
        if group is None or (group.version == 1 and "freezer" not in group.dirs):
            return None
        return cls(group.version, group.dirs)

    def written(self) -> int:
        """Bytes the run's processes wrote to files, never less than the last
        reading (a child reaped between the reads moves its count to a parent
        read before it)."""
        return self.read()[0]

    def read(self, exclude: Collection[int] = ()) -> tuple[int, int]:
        """(written(), how many processes not in `exclude` write heavily)."""
        pids = self.pids()
        if not pids:
            return self._last, 0  # the group is gone: the run is over
        written, writers = written_bytes(pids, exclude)
        self._last = max(self._last, written)
        return self._last, writers

    def freeze(self) -> None:
        """Ask the kernel to stop every process of the group where it is: a
        process in the middle of a system call stops as it returns. Only
        asks (a write of a flag, on the event loop: every millisecond spent
        reaching a thread lets a program write another megabyte); `frozen`
        tells when it is done."""
        if self.version == 1:
            _write(os.path.join(self.dirs["freezer"], "freezer.state"), "FROZEN")
        else:
            _write(os.path.join(self.dirs[""], "cgroup.freeze"), "1")

    def frozen(self) -> bool:
        if self.version == 1:
            return _read(os.path.join(self.dirs["freezer"], "freezer.state")).strip() == "FROZEN"
        return "frozen 1" in _read(os.path.join(self.dirs[""], "cgroup.events"))

    def thaw(self) -> None:
        if self.version == 1:
            _write(os.path.join(self.dirs["freezer"], "freezer.state"), "THAWED")
        else:
            _write(os.path.join(self.dirs[""], "cgroup.freeze"), "0")

    def kill(self) -> None:
        """SIGKILL every process while the group is frozen, then thaw it: the
        kills are delivered before any of them writes again."""
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.thaw()

    def pids(self) -> list[int]:
        try:
            fd = os.open(self._procs, os.O_RDONLY)
            try:
                return [int(p) for p in os.read(fd, 1 << 16).split()]
            finally:
                os.close(fd)
        except OSError:
            return []


class WriteGuard(Protocol):
    """A run's write budget as run.py watches it: DiskGuard, or a runner's
    (sandbox/remote.py RemoteGuard, which a DiskGuard on the runner drives)."""

    walks: int  # measurements of the home it made, for the log

    def wrote(self) -> int:
        """Bytes the run has written to files so far."""

    async def over_quota(self) -> bool:
        """Return (the run frozen, or already killed) once the run has written
        past its budget; until then, keep watching."""

    def kill(self) -> None:
        """Kill what the run is running, frozen, before it writes again."""


class DiskGuard:
    """Watches one run's writes against what its home has left."""

    def __init__(self, writes: GroupWrites, measure: Callable[[], Awaitable[int | None]], room: int,
                 file_bytes: int) -> None:
        self.writes = writes  # GroupWrites
        self.measure = measure  # async () -> bytes the home has left now, or None when over its quota
        self.room = room  # bytes the home had left as the run started
        # A budget is never smaller: a run near its quota is not walked at every read.
        self.slack = max(1 << 20, file_bytes // 4)
        self.min_interval = max(MIN_INTERVAL, file_bytes / 2 / WRITE_RATE)
        self.walks = 0  # measurements the budget asked for, for the log
        self._first: int | None = None  # the count as the run started
        self._own = set(writes.pids())  # the sandbox's own processes (launcher, bubblewrap): no program yet

    def wrote(self) -> int:
        """Bytes the run has written to files (0 before it started)."""
        return 0 if self._first is None else self.writes.written() - self._first

    def kill(self) -> None:
        self.writes.kill()

    async def over_quota(self) -> bool:
        """Return (the run frozen) once the run has written its home past its
        quota; until then, keep watching."""
        base, _ = self.writes.read()
        self._first = base
        budget = max(self.room, self.slack)
        while True:
            written, writers = self.writes.read(self._own)
            written -= base
            if written < budget:
                await asyncio.sleep(min(MAX_INTERVAL, max(self.min_interval, (budget - written) / WRITE_RATE)))
                continue
            self.writes.freeze()
            thaw = True  # whatever happens (the run ending meanwhile too), a sandbox is not left frozen
            try:
                if writers > 1:
                    # Several processes writing at once: each may be in the
                    # middle of a long write, which a freeze lets finish (only
                    # SIGKILL cuts one short), and a measurement takes
                    # milliseconds they would write on in. They are stopped
                    # on the kernel's count (see the module docstring).
                    thaw = False
                    return True
                deadline = time.monotonic() + FREEZE_WAIT
                while not self.writes.frozen() and time.monotonic() < deadline:
                    await asyncio.sleep(0.001)
                if not self.writes.frozen():
                    log.info("a run's processes did not all freeze within %.1f s; measuring its home anyway",
                             FREEZE_WAIT)
                self.walks += 1
                room = await self.measure()
                if room is None:
                    thaw = False
                    return True
                base, _ = self.writes.read()
                budget = max(room, self.slack)
            finally:
                if thaw:
                    self.writes.thaw()


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()
