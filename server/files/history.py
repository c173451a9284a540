"""Earlier versions of files, kept on STORAGE_ROOT beside the homes.

    .system/history/<area>/<sha256 of the path>/<time_ns>-<etag>[-deleted]

A version is the old file itself, hard-linked (no copy) before a save
replaces it or a delete removes it; its name says when that was, so a
version shows the file as it was then.

Autosave makes a version every few seconds of typing, so they are thinned
as they age, the way Time Machine does (`retained`): the last RECENT are
all kept, then the text as it was at each minute for ten minutes, at each
ten minutes for two hours, each hour for the day, each day for a month,
each month after that; at most `history_versions` per file. Thinning
looks only at the file's own versions, whenever one is added. Besides,
when a home needs room the oldest versions of the whole area go first
(`evict`), since versions count in its quota. Callers hold the area's lock
for every change.
"""
import builtins
import errno
import hashlib
import os
import stat
import time
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from ..errors import Refused
from . import paths
from .walk import FILE, Walk

if TYPE_CHECKING:  # the store imports this module
    from .area import Area
    from .paths import Parts
    from .store import Limits


def etag_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:20]


def etag_of_file(dir_fd: int, name: str) -> str:
    """The etag of a regular file, read in blocks (never a FIFO: NotAFile)."""
    digest = hashlib.sha256()
    with os.fdopen(paths.open_regular(dir_fd, name), "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()[:20]


MINUTE, HOUR, DAY = 60, 3600, 86400
RECENT = 10  # the last saves are all kept, however close together
TIERS = (  # then, by age: (younger than, one version per), in seconds
    (10 * MINUTE, MINUTE),
    (2 * HOUR, 10 * MINUTE),
    (DAY, HOUR),
    (30 * DAY, DAY),
)
OLDEST_SPACING = 30 * DAY  # older than the last tier
DELETED = "-deleted"  # ends the name of the version a delete kept (the trash puts it back)


def now_ns() -> int:
    """The clock versions are named and thinned by (tests replace it)."""
    return time.time_ns()


def _is_version(name: str) -> bool:
    return name[:1].isdigit()


def _made_ns(version: str) -> int:
    """When a version was kept, from its name (0 for a name not ours)."""
    head = version.split("-", 1)[0]
    return int(head) if head.isdigit() else 0


def _spacing(age: int) -> int:
    for younger_than, spacing in TIERS:
        if age < younger_than:
            return spacing
    return OLDEST_SPACING


def _bands() -> Iterator[tuple[int | None, int | None, int]]:
    """(older than, younger than, spacing) in seconds for each age of a
    moment, None where unbounded: a moment in the future is a recent one."""
    older_than = None
    for younger_than, spacing in TIERS:
        yield older_than, younger_than, spacing
        older_than = younger_than
    yield older_than, None, OLDEST_SPACING


BANDS = tuple(_bands())


def _holds_a_moment_kept(since: int | None, until: int, now: int) -> bool:
    """Does [since, until) (ns; since None: from the beginning) hold a
    moment thinning keeps the text of at `now`: a multiple of the spacing
    its age calls for (10:42:00 while minutes are kept, 10:40 once it is
    ten minutes ...)? Every spacing divides the next, so a moment kept at
    one age is kept at every older age too."""
    for older_than, younger_than, spacing in BANDS:
        low = since
        if younger_than is not None:
            earliest = now - younger_than * 10**9 + 1
            low = earliest if low is None else max(low, earliest)
        high = until - 1
        if older_than is not None:
            high = min(high, now - older_than * 10**9)
        if low is None:
            return True  # from the beginning: some moment of the oldest band
        step = spacing * 10**9
        if -(-low // step) * step <= high:
            return True
    return False


def retained(versions: Iterable[str], now: int, bound: int) -> list[str]:
    """Which of a file's versions to keep at `now` (ns), newest first, at
    most `bound` (the oldest go): the RECENT newest, and each that was the
    file's text at a moment thinning keeps (`_holds_a_moment_kept`). A
    version was the text from the replacing of the one before it until its
    own (the first one: since ever). Not the newest version of each minute:
    a text left alone for a minute, then replaced by a burst of autosaves,
    is named in the burst's minute and would go. The text of a kept moment
    is never dropped and kept moments only get sparser with age, so a span
    widened by thinned neighbours takes no kept moment from another version.
    A version a delete kept is also kept as the newest such of its period:
    saves of a new file of the same name never thin away the one the trash
    can put back."""
    newest_first = sorted(versions, key=_made_ns, reverse=True)
    keep, since = set(newest_first[:RECENT]), None
    for version in reversed(newest_first):
        made = _made_ns(version)
        if _holds_a_moment_kept(since, made, now):
            keep.add(version)
        since = made
    deleted_periods: set[tuple[int, int]] = set()
    for version in newest_first:
        if version.endswith(DELETED):
            made = _made_ns(version) // 10**9
            spacing = _spacing(max(0, now // 10**9 - made))
            if (spacing, made // spacing) not in deleted_periods:
                keep.add(version)
            deleted_periods.add((spacing, made // spacing))
    return [v for v in newest_first if v in keep][:bound]


class History:
    def __init__(self, history_fd: int, limits: "Limits") -> None:
        self.base_fd, self.limits = history_fd, limits  # .system/history, open for the worker's life

    def _area_parts(self, area: "Area") -> "Parts":
        return (area.slug,)

    def parts(self, area: "Area", parts: "Parts") -> "Parts":
        digest = hashlib.sha256("/".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:32]
        return self._area_parts(area) + (digest,)

    def keep(self, area: "Area", dir_fd: int, name: str, parts: "Parts", etag: str,
         deleted: bool = False) -> tuple[str, tuple[int, int]]:
        """Keep the regular file `name` in `dir_fd` (at `parts`) as a version
        (`deleted`: the last one, before a delete); returns its name and
        (bytes, files) freed by thinning the file's versions."""
        hfd = paths.open_dir(self.base_fd, self.parts(area, parts), create=True)
        try:
            now = now_ns()
            version = f"{now}-{etag}{DELETED if deleted else ''}"
            try:
                os.link(name, version, src_dir_fd=dir_fd, dst_dir_fd=hfd, follow_symlinks=False)
            except FileExistsError:
                pass  # the same text at the same instant (a clock the tests set)
            except OSError as e:
                if e.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                    raise
                self._copy(dir_fd, name, hfd, version)
            # Thinned now, a file at a time: the work is bounded by the
            # versions one file may keep, never a walk of the whole history.
            versions = [v for v in os.listdir(hfd) if _is_version(v)]
            keep = set(retained(versions, now, self.limits.history_versions))
            freed = _drop(hfd, [v for v in versions if v not in keep])
            os.fsync(hfd)
            return version, freed
        finally:
            os.close(hfd)

    @staticmethod
    def _copy(dir_fd: int, name: str, hfd: int, version: str) -> None:
        with os.fdopen(paths.open_regular(dir_fd, name), "rb") as src:
            vfd = paths.open_file(hfd, version, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            with os.fdopen(vfd, "wb") as dst:
                while block := src.read(1 << 20):
                    dst.write(block)
                dst.flush()
                st = os.fstat(src.fileno())
                os.utime(dst.fileno(), ns=(st.st_atime_ns, st.st_mtime_ns))  # when its text was written
                os.fsync(dst.fileno())

    def list(self, area: "Area", parts: "Parts") -> "builtins.list[dict[str, Any]]":
        """Earlier versions of a file, newest first: each the file's text
        from `since` (when it was written) until `saved` (when it was
        replaced), in seconds since 1970."""
        try:
            hfd = paths.open_dir(self.base_fd, self.parts(area, parts))
        except FileNotFoundError:
            return []
        try:
            out: builtins.list[dict[str, Any]] = []
            for v in sorted((v for v in os.listdir(hfd) if _is_version(v)), key=_made_ns):
                try:
                    st = os.stat(v, dir_fd=hfd, follow_symlinks=False)
                except FileNotFoundError:
                    continue  # evicted meanwhile
                # The inode's mtime is when its text was written (a program
                # may have set it: kept between the versions around it).
                saved = _made_ns(v)
                since = min(max(st.st_mtime_ns, _made_ns(out[-1]["version"]) if out else 0), saved)
                etag = (v.split("-") + [""])[1]
                # int / int: rounded once (int / 1e9 rounds the nanoseconds first, off by up to 0.5 µs).
                out.append({"version": v, "etag": etag, "size": st.st_size, "since": since / 10**9,
                            "saved": saved / 10**9, "deleted": v.endswith(DELETED)})
            return out[::-1]
        finally:
            os.close(hfd)

    def read(self, area: "Area", parts: "Parts", version: str, limit: int | None) -> bytes:
        """The bytes of a version (413 if it holds more than `limit`)."""
        if not version or "/" in version or not _is_version(version) or paths.name_problem(version):
            raise Refused(404, "no_such_version", "There is no such version.")
        try:
            hfd = paths.open_dir(self.base_fd, self.parts(area, parts))
            try:
                data, _ = paths.read_regular(hfd, version, limit)
            finally:
                os.close(hfd)
            if data is None:
                raise Refused(413, "file_too_large", "This version is too large to open here.")
            return data
        except FileNotFoundError:
            raise Refused(404, "no_such_version", "This version is no longer kept.") from None

    def kept(self, area: "Area", parts: "Parts", version: str) -> bool:
        """Is `version` of the file at `parts` still kept?"""
        try:
            hfd = paths.open_dir(self.base_fd, self.parts(area, parts))
        except FileNotFoundError:
            return False
        try:
            return paths.exists(hfd, version)
        finally:
            os.close(hfd)

    def move(self, area: "Area", src: "Parts", dst: "Parts") -> None:
        """History follows a moved file (a moved folder's files keep theirs
        under the old paths: they stay readable there)."""
        old, new = self.parts(area, src), self.parts(area, dst)
        try:
            hfd = paths.open_dir(self.base_fd, old[:-1])
        except FileNotFoundError:
            return
        try:
            os.rename(old[-1], new[-1], src_dir_fd=hfd, dst_dir_fd=hfd)
        except OSError:
            pass  # no history, or the new path has one already
        finally:
            os.close(hfd)

    # -- the area as a whole (quota) --------------------------------------------

    def measure(self, area: "Area", seen: set[tuple[int, int]], max_entries: int | None) -> tuple[int, int]:
        """(bytes, versions) of the area's history; inodes in `seen` (already
        counted in the home) are not counted twice, and are added to it."""
        total = count = 0
        try:
            afd = paths.open_dir(self.base_fd, self._area_parts(area))
        except FileNotFoundError:
            return 0, 0
        try:
            walk = Walk(afd, max_depth=2, max_entries=max_entries)
            for event, _, name, st in walk:
                if event == FILE and _is_version(name):
                    count += 1
                    total += counted_bytes(st, seen)
        finally:
            os.close(afd)
        return total, count

    def evict(self, area: "Area", bytes_needed: int, files_needed: int) -> tuple[int, int]:
        """Drop the area's oldest versions until (bytes, files) as large as
        asked are freed, or none are left; returns what was freed."""
        try:
            afd = paths.open_dir(self.base_fd, self._area_parts(area))
        except FileNotFoundError:
            return 0, 0
        try:
            versions: builtins.list[tuple[str, str]] = []
            for event, _, name, _st in (walk := Walk(afd, max_depth=2)):
                if event == FILE and _is_version(name) and walk.depth == 2:
                    versions.append((name, walk.path(name).split("/")[0]))
            versions.sort()
            freed_bytes = freed_files = 0
            for version, digest in versions:
                if freed_bytes >= bytes_needed and freed_files >= files_needed:
                    break
                hfd = paths.open_dir(afd, (digest,))
                try:
                    b, f = _drop(hfd, [version])
                finally:
                    os.close(hfd)
                freed_bytes, freed_files = freed_bytes + b, freed_files + f
                try:
                    os.rmdir(digest, dir_fd=afd)
                except OSError:
                    pass  # other versions left
            return freed_bytes, freed_files
        finally:
            os.close(afd)


def counted_bytes(st: os.stat_result | None, seen: set[tuple[int, int]]) -> int:
    """The bytes a regular file adds to a count: none if another name of
    the same inode was counted already."""
    if st is None or not stat.S_ISREG(st.st_mode):  # None: a walk's LEAVE
        return 0
    if st.st_nlink > 1:
        if (st.st_dev, st.st_ino) in seen:
            return 0
        seen.add((st.st_dev, st.st_ino))
    return st.st_size


def _drop(hfd: int, versions: Iterable[str]) -> tuple[int, int]:
    """Unlink versions; (bytes, files) freed (a version whose inode has
    another name frees no bytes)."""
    freed_bytes = freed_files = 0
    for v in versions:
        try:
            st = os.stat(v, dir_fd=hfd, follow_symlinks=False)
            os.unlink(v, dir_fd=hfd)
        except FileNotFoundError:
            continue
        freed_files += 1
        if st.st_nlink == 1:
            freed_bytes += st.st_size
    return freed_bytes, freed_files
