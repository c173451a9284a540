"""A runner's copy of a student's home: the files the web tier sends before
a run, and what the run changed, read back after it.

A runner never reaches the storage. Each of its sandboxes has a private
folder made here (removed with the sandbox) into which the web tier `put`s
the home's files; `changes` then says what a run wrote, made or deleted
since, compared with what the web tier knows the copy holds (`known`).
Between runs the folder is the program's work: links, FIFOs, deep trees
and files swapped for folders may wait in it. So every step goes by file
descriptor and never follows a link, a put replaces whatever is in its
way, and only regular files are ever read back. The runner may run as
root: what it makes here belongs to the sandbox's uid.

All of it blocks: the service calls it in a thread.
"""
import errno
import os
import stat
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

from ..files import paths
from ..files.history import etag_of, etag_of_file
from ..files.paths import BadPath
from ..files.walk import FILE, Changed, TooMany, Walk, remove_at

MAX_ENTRIES = 5000  # as the web tier's tree lists (store.TREE_LIMIT)
FILE_MODE, FOLDER_MODE = 0o644, 0o755

Signature = tuple[int, int, int]  # (size, mtime_ns, inode): the file has not changed while these have not


@dataclass
class Changes:
    """What a run changed in the copy: regular files written or made
    (path, etag), those skipped (path, why), those gone; `partial` when the
    folder held too much to look at all of it (then nothing counts as gone)."""
    written: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    partial: bool = False


class HomeCopy:
    def __init__(self, folder: str, uid: int | None) -> None:
        self.folder, self.uid = folder, uid
        self.known: dict[str, tuple[str, Signature]] = {}  # path -> (etag, signature) as the web tier has it

    def put(self, path: str, data: bytes, at: int, etag: str | None) -> None:
        """Write `data` at offset `at` of the file `path` (at 0: a new file in
        place of whatever has that name); `etag`, with a file's last piece,
        is the whole file's, as the web tier has it."""
        parts = paths.parse(path, allow_root=False)
        owner = None if self.uid is None else (self.uid, self.uid)
        with self._root() as root, _folder(root, parts[:-1], owner) as folder:
            name = parts[-1]
            if at == 0:
                remove_at(folder, name)
                fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                             FILE_MODE, dir_fd=folder)
                if owner:
                    os.fchown(fd, *owner)
            else:
                fd = paths.open_file(folder, name, os.O_WRONLY | os.O_NONBLOCK)
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or st.st_size != at:
                    raise BadPath("bad_piece", "a piece of a file that does not follow the one before")
                os.pwrite(fd, data, at)
                if etag is not None:
                    self.known[path] = (etag, _signature(os.fstat(fd)))
            finally:
                os.close(fd)

    def delete(self, path: str) -> None:
        """Whatever has the name `path` goes (a folder with all it holds)."""
        parts = paths.parse(path, allow_root=False)
        self.known.pop(path, None)
        try:
            with self._root() as root, paths.opened(root, parts[:-1]) as folder:
                remove_at(folder, parts[-1])
        except (FileNotFoundError, BadPath):
            pass  # nothing there, or a link or file on the way: nothing of that name to remove

    def size(self) -> int | None:
        """Bytes of the regular files in it; None when it holds too many
        names to count (more than MAX_ENTRIES: over any quota)."""
        total = 0
        with self._root() as root:
            try:
                for event, _, _, st in Walk(root, max_entries=MAX_ENTRIES, skip_deep=False):
                    if event == FILE and st is not None and stat.S_ISREG(st.st_mode):
                        total += st.st_size
            except (TooMany, Changed):
                return None
        return total

    def clear(self) -> None:
        """Nothing in the folder any more."""
        self.known.clear()
        with self._root() as root:
            for name in os.listdir(root):
                remove_at(root, name)

    def changes(self, room: int, max_file: int) -> Changes:
        """What differs from `known`: files to read back (at most `room`
        bytes in all, `max_file` each), the rest skipped with the reason.
        `known` becomes what it will be once the web tier has them."""
        changes, seen = Changes(), set()
        with self._root() as root:
            walk = Walk(root, max_depth=paths.MAX_DEPTH, max_entries=MAX_ENTRIES, skip_deep=True,
                        skip=lambda name: name.startswith(paths.RESERVED_PREFIX))
            try:
                for event, folder, name, st in walk:
                    if event != FILE or st is None or not stat.S_ISREG(st.st_mode) or not paths.is_plain(name):
                        continue
                    path = walk.path(name)
                    seen.add(path)
                    etag, signature = self.known.get(path, ("", (-1, -1, -1)))
                    if signature == _signature(st):
                        continue
                    now = etag_of_file(folder, name)
                    if now == etag:
                        self.known[path] = (etag, _signature(st))
                    elif st.st_size > max_file:
                        changes.skipped.append((path, "too_big"))
                    elif st.st_size > room:
                        changes.skipped.append((path, "no_room"))
                    else:
                        room -= st.st_size
                        changes.written.append((path, now))
                        self.known[path] = (now, _signature(st))
            except (TooMany, Changed):
                changes.partial = True
        changes.partial = changes.partial or walk.truncated
        if not changes.partial:
            changes.deleted = sorted(set(self.known) - seen)
            for path in changes.deleted:
                del self.known[path]
        return changes

    def take(self, kept: "HomeCopy") -> None:
        """Become `kept`, a copy a sandbox of the same home left (its files
        move here: nothing is copied), less whatever changed in it since the
        web tier last knew it (a run it never took back, a file touched)."""
        with self._root() as root, kept._root() as old:
            for name in os.listdir(old):
                remove_at(root, name)
                os.rename(name, name, src_dir_fd=old, dst_dir_fd=root)
        self.known = kept.known
        changes = self.changes(0, 0)  # (nothing counts as room: whatever changed is only listed)
        if changes.partial:
            self.clear()
        for path in [path for path, _ in changes.written + changes.skipped]:
            self.delete(path)

    def read(self, path: str, etag: str, limit: int) -> bytes | None:
        """The file `path` as `changes` found it; None if it is not that any more."""
        parts = paths.parse(path, allow_root=False)
        try:
            with self._root() as root, paths.opened(root, parts[:-1]) as folder:
                data, _ = paths.read_regular(folder, parts[-1], limit)
        except (OSError, BadPath, paths.NotAFile):
            return None
        return data if data is not None and etag_of(data) == etag else None

    @contextmanager
    def _root(self) -> Iterator[int]:
        fd = paths.open_root(self.folder)
        try:
            yield fd
        finally:
            os.close(fd)


@contextmanager
def _folder(root: int, parts: tuple[str, ...], owner: tuple[int, int] | None) -> Iterator[int]:
    """The folder `parts` below `root`, made if need be, in place of
    whatever (a file, a link, a FIFO) had one of its names."""
    fd = os.dup(root)
    try:
        for name in parts:
            try:
                next_fd = os.open(name, paths.DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                if e.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                    raise
                remove_at(fd, name)
                os.mkdir(name, FOLDER_MODE, dir_fd=fd)
                if owner:
                    os.chown(name, *owner, dir_fd=fd, follow_symlinks=False)
                next_fd = os.open(name, paths.DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        yield fd
    finally:
        os.close(fd)


def _signature(st: os.stat_result) -> Signature:
    return st.st_size, st.st_mtime_ns, st.st_ino


