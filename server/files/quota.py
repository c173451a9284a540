"""How much a home holds, and whether a change still fits its quota.

Usage counts everything the area holds: every file and folder in the home,
whoever wrote it (the IDE or a program), and every earlier version kept in
its history. It lives in a record on STORAGE_ROOT,

    .system/usage/<area>      {"bytes": ..., "files": ..., "measured": unix time}

read and updated under the area's lock, so every worker, process and host
sees the same figure and two saves can never both take the last free
megabyte. Every change the store makes is added to the record (never less
than it takes), so only what programs write can be missing: a fresh
measurement (a walk of the home and its history) rewrites the record when
it is older than USAGE_TTL, or than NEAR_TTL when a change comes near a
limit, and whenever a caller asks (the run service, after a program ran). When a change does not fit, the oldest earlier versions are
dropped to make room before anything is refused.
"""
import time
from typing import TYPE_CHECKING, TypedDict

from ..errors import Refused
from . import paths, records
from .history import counted_bytes
from .walk import FILE, LEAVE, TooMany, Walk

if TYPE_CHECKING:  # the store imports this module
    from .area import Area
    from .history import History
    from .store import Limits

USAGE_TTL = 30.0  # seconds a record is trusted without a walk (programs write too)
NEAR = 0.9        # within this share of a limit, decide on a recent measurement:
NEAR_TTL = 2.0    # one at most this old (every change of the IDE is in the record already)
ROOM = 0.9        # making room frees versions down to this share of the quota


class Usage(TypedDict):
    """An area's usage record."""
    bytes: int
    files: int
    measured: float  # unix time of the last walk


def size_text(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    if n >= 1 << 10:
        return f"{n // 1024} KiB"
    return f"{n} bytes"


class Quota:
    def __init__(self, root_fd: int, usage_fd: int, limits: "Limits", history: "History") -> None:
        self.root_fd, self.usage_fd, self.limits, self.history = root_fd, usage_fd, limits, history

    # -- the record ----------------------------------------------------------------

    def usage(self, area: "Area", fresh: bool = False, max_age: float = USAGE_TTL) -> tuple[int, int]:
        """(bytes, files) of the area; the caller holds its lock."""
        record = self._record(area, fresh, max_age)
        return record["bytes"], record["files"]

    def _record(self, area: "Area", fresh: bool = False, max_age: float = USAGE_TTL) -> Usage:
        record = None if fresh else self._read(area)
        if record is None or time.time() - record["measured"] > max_age:
            record = self.measure(area)
        return record

    def measure(self, area: "Area") -> Usage:
        """Walk the home and its history now, and rewrite the record."""
        cap = self.walk_cap()
        total = files = 0
        seen: set[tuple[int, int]] = set()  # inodes with several names, counted once
        try:
            with paths.opened(self.root_fd, area.parts) as fd:
                try:
                    for event, _, _, st in Walk(fd, max_entries=cap):
                        if event == FILE:
                            total += counted_bytes(st, seen)
                        files += event != LEAVE
                except TooMany:
                    files = cap + 1  # more than can be counted: over any files quota
        except FileNotFoundError:
            pass
        try:
            h_bytes, h_files = self.history.measure(area, seen, cap)
        except TooMany:
            h_bytes, h_files = 0, cap + 1
        record = Usage(bytes=total + h_bytes, files=files + h_files, measured=time.time())
        old = self._read(area)
        # After most runs nothing changed: keep the record unless it is going
        # stale (rewriting it is a rename on the shared file system).
        if not old or (old["bytes"], old["files"]) != (record["bytes"], record["files"]) \
                or record["measured"] - old["measured"] > USAGE_TTL / 2:
            self._write(area, record)
        return record

    def add(self, area: "Area", added_bytes: int, added_files: int, record: Usage | None = None) -> None:
        """Count a change already made (and vetted) into the record
        (`record`: as the caller, holding the lock, has just read it)."""
        if not (added_bytes or added_files):
            return
        record = record or self._read(area)
        if record:
            self._write(area, Usage(bytes=max(0, record["bytes"] + added_bytes),
                                    files=max(0, record["files"] + added_files), measured=record["measured"]))

    def walk_cap(self) -> int:
        """Entries a measurement counts at most: far past any files quota,
        so a program's million files cost a bounded walk, not a million stats."""
        return max(10 * self.limits.quota_files, 10_000)

    # -- decisions -----------------------------------------------------------------

    def charge(self, area: "Area", added_bytes: int, added_files: int, shrinks: bool = False) -> None:
        """Refuse (507) a change that would put a home over its quota, after
        dropping old versions to make room; count it otherwise. A change
        that `shrinks` a file is let through even then, so that a student
        over quota can still cut a file down."""
        if not area.quota:
            return
        record = self._record(area)
        if self._near(record["bytes"] + added_bytes, record["files"] + added_files):
            record = self._record(area, max_age=NEAR_TTL)
        used, files = record["bytes"], record["files"]
        current: Usage | None = record
        if not self._fits(used + added_bytes, files + added_files):
            used, files = self._make_room(area, used, files, added_bytes, added_files)
            if not self._fits(used + added_bytes, files + added_files) and not shrinks:
                raise Refused(507, "quota_exceeded", self._sentence(used, files, added_bytes, added_files))
            current = None  # making room rewrote it
        self.add(area, added_bytes, added_files, current)

    def problem(self, area: "Area", fresh: bool = False) -> str | None:
        """None when the home is within its quota (after making room), else
        the sentence that tells the student what to do."""
        if not area.quota:
            return None
        used, files = self.usage(area, fresh)
        if not self._fits(used, files):
            used, files = self._make_room(area, used, files)
        return None if self._fits(used, files) else self._sentence(used, files)

    def _make_room(self, area: "Area", used: int, files: int, added_bytes: int = 0,
               added_files: int = 0) -> tuple[int, int]:
        """Drop the oldest versions until the change would fit with some room
        to spare; returns the usage that leaves (without the change)."""
        lim = self.limits
        want_bytes = max(0, used + added_bytes - int(ROOM * lim.quota_bytes))
        want_files = max(0, files + added_files - int(ROOM * lim.quota_files))
        freed_bytes, freed_files = self.history.evict(area, want_bytes, want_files)
        self.add(area, -freed_bytes, -freed_files)
        return used - freed_bytes, files - freed_files

    def _fits(self, used: int, files: int) -> bool:
        return used <= self.limits.quota_bytes and files <= self.limits.quota_files

    def _near(self, used: int, files: int) -> bool:
        return used > NEAR * self.limits.quota_bytes or files > NEAR * self.limits.quota_files

    def _sentence(self, used: int, files: int, added_bytes: int = 0, added_files: int = 0) -> str:
        """What the student reads: how much is used, of what, and how much to
        delete; `added_*` is the change that would not fit."""
        lim = self.limits
        over = not self._fits(used, files)
        if not over:
            used, files = used + added_bytes, files + added_files
        if used > lim.quota_bytes:
            state = f"{size_text(used)} used of {size_text(lim.quota_bytes)}"
            excess = size_text(used - lim.quota_bytes)
        else:
            state = f"{files} files and folders of the {lim.quota_files} allowed"
            excess = f"{files - lim.quota_files} of them"
        if over:
            return (f"Your folder is over its quota: {state} (earlier versions included). "
                    f"Delete at least {excess} to save or run again.")
        return (f"This would put your folder over its quota: {state} (earlier versions included). "
                f"Delete at least {excess} first.")

    # -- record I/O ------------------------------------------------------------------

    def _name(self, area: "Area") -> str:
        return area.slug

    def _read(self, area: "Area") -> Usage | None:
        record = records.read(self.usage_fd, self._name(area))
        if isinstance(record, dict) and all(isinstance(record.get(k), (int, float))
                                            for k in ("bytes", "files", "measured")):
            return Usage(bytes=record["bytes"], files=record["files"], measured=record["measured"])
        return None

    def _write(self, area: "Area", record: Usage) -> None:
        records.write(self.usage_fd, self._name(area), record)
