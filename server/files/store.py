"""Users' files on STORAGE_ROOT: safe paths, atomic saves, history, quotas.

Layout (all on the shared file system, so every worker and instance sees
the same thing):

    STORAGE_ROOT/home/<username>/     each user's files (mode 0700)
    STORAGE_ROOT/course/              the default class's course folder: its teachers write, students read
    STORAGE_ROOT/classes/<id>/        each other class's course folder
    STORAGE_ROOT/checks/<id>/         each class's exercises and their checks (0700: its teachers' only)
    STORAGE_ROOT/.system/history/     earlier versions, per area and file (history.py)
    STORAGE_ROOT/.system/trash/       what each delete removed (trash.py)
    STORAGE_ROOT/.system/usage/       each area's usage record (quota.py)
    STORAGE_ROOT/.system/locks/       one lock file per area (lock.py)
    STORAGE_ROOT/.system/welcomed/    students who were given the welcome file

Every method is blocking and runs in the file executor, never on the
IOLoop. Every change to an area holds the area's lock, which excludes the
worker's other threads, other processes and other hosts, so "compare the
version, then replace" and "read the quota, then write" are atomic.

A save writes a temporary file in the target's folder, fsyncs it, keeps
the old file as a history version (a hard link: no copy), renames the new
one over the target and fsyncs the folder; only then is it acknowledged.
The file therefore always holds the old or the new content, whatever
happens mid-save.

A home holds whatever its student's programs made: FIFOs, links, folders
thousands deep, names that are not UTF-8. Files are opened with
`paths.open_regular` (never blocks, refuses anything but a file) and
trees are walked with `walk.Walk` (no recursion, bounded).
"""
import builtins
import errno
import logging
import os
import secrets
import stat
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any, Generator, Iterator

from ..errors import Refused
from . import lock, paths, run_copy, zipstream
from .area import Area
from .history import History, etag_of, etag_of_file
from .paths import BadPath, NotAFile, Owner, Parts
from .quota import Quota, size_text
from .trash import Trash
from .walk import ENTER, LEAVE, Changed, TooMany, Walk

log = logging.getLogger(__name__)

__all__ = ["Area", "Limits", "Store", "etag_of", "as_text", "TEXT_LIMIT", "WELCOME"]

TEMP_PREFIX = paths.RESERVED_PREFIX + "-tmp-"
STALE_TEMP_SECONDS = 600
TEXT_LIMIT = 2 << 20  # larger files are offered as downloads, not shown in the editor
TREE_LIMIT = 5000
WELCOME = '''# Welcome to PyClassroom!
# Press Run (or Ctrl+Enter) to run this program. Your files are saved as you type.

name = input("What is your name? ")
print(f"Hello, {name}!")
'''
_SYSTEM = ("home", "course", "classes", "exams", ".system/history", ".system/locks", ".system/usage", ".system/trash",
           ".system/welcomed")


# What the API says of a file or folder (_meta), or of a change made.
Meta = dict[str, Any]


@dataclass
class Limits:
    quota_bytes: int
    quota_files: int
    max_file_bytes: int
    history_versions: int
    delay_ms: int = 0  # FS_DELAY_MS: a slow file system, rehearsed


def _kind(name: str, st: os.stat_result) -> str:
    """'folder', 'file', or 'other': what the API cannot open (a FIFO, a
    socket, a device, a name that is not UTF-8)."""
    if not paths.is_plain(name):
        return "other"
    if stat.S_ISDIR(st.st_mode):
        return "folder"
    return "file" if stat.S_ISREG(st.st_mode) else "other"


def _meta(name: str, st: os.stat_result, kind: str | None = None, key: str = "name") -> Meta:
    """What the API says of an entry: under `key` its name (in a listing)
    or its path (a file read or saved, a tree)."""
    kind = kind or _kind(name.rsplit("/", 1)[-1], st)
    return {key: paths.shown(name), "kind": kind, "size": st.st_size if kind == "file" else 0,
            "modified": round(st.st_mtime, 3)}


def _hidden(name: str) -> bool:
    return name.startswith(paths.RESERVED_PREFIX)


class Store:
    def __init__(self, root: str, limits: Limits) -> None:
        self.root = os.path.realpath(root)
        self.limits = limits
        self._owners: dict[str, Owner] = {}  # home area key -> (uid, gid) that its files must belong to
        for sub in _SYSTEM:
            os.makedirs(os.path.join(self.root, sub), exist_ok=True)
        # No sandboxed program, whatever its uid, may even look into the checks.
        os.makedirs(os.path.join(self.root, "checks"), mode=0o700, exist_ok=True)
        os.chmod(os.path.join(self.root, "checks"), 0o700)
        self._root_fd = paths.open_root(self.root)
        # The folders of the store's own records stay open for the worker's
        # life: a save would otherwise open each again, name by name.
        self._locks_fd = paths.open_dir(self._root_fd, (".system", "locks"))
        self._usage_fd = paths.open_dir(self._root_fd, (".system", "usage"))
        self._history_fd = paths.open_dir(self._root_fd, (".system", "history"))
        self.versions = History(self._history_fd, limits)
        self.quota = Quota(self._root_fd, self._usage_fd, limits, self.versions)
        self.trash = Trash(self._root_fd)

    def close(self) -> None:
        """Release the open STORAGE_ROOT (tools that make a Store, then
        remove its folder, call this)."""
        if self._root_fd >= 0:
            for fd in (self._root_fd, self._locks_fd, self._usage_fd, self._history_fd):
                os.close(fd)
            self._root_fd = -1

    # -- opening ----------------------------------------------------------

    @contextmanager
    def _dir(self, area: Area, parts: Parts) -> Iterator[int]:
        """with self._dir(area, parts) as fd: an existing folder of the area."""
        try:
            fd = paths.open_dir(self._root_fd, area.parts + tuple(parts))
        except FileNotFoundError:
            raise Refused(404, "not_found", "There is no such folder.") from None
        try:
            yield fd
        finally:
            os.close(fd)

    @contextmanager
    def _locked(self, area: Area) -> Iterator[None]:
        name = area.slug + ".lock"
        with lock.area_lock(self._locks_fd, name, os.path.join(self.root, ".system", "locks", name)):
            yield

    def _owner(self, area: Area) -> Owner | None:
        """(uid, gid) new files of a home get: its owner's, so that the
        student's sandboxed programs (running as that uid) may change them.
        None when the server cannot give files away (not root)."""
        if os.geteuid() != 0 or not area.quota:
            return None
        if area.key not in self._owners:
            try:
                st = os.stat(os.path.join(self.root, *area.parts), follow_symlinks=False)
            except FileNotFoundError:
                return None  # made now by root; ensure_home gives it away at first login
            self._owners[area.key] = (st.st_uid, st.st_gid)
        return self._owners[area.key]

    def _lookup(self, area: Area, parts: Parts) -> tuple[int, str, os.stat_result]:
        """(parent fd, name, stat) of an existing path; the caller closes fd."""
        if not parts:
            raise NotAFile(area.key.split("/")[-1])  # the area's own folder
        parent, name = parts[:-1], parts[-1]
        try:
            fd = paths.open_dir(self._root_fd, area.parts + tuple(parent))
        except FileNotFoundError:
            raise Refused(404, "not_found", "There is no such file or folder.") from None
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            os.close(fd)
            raise Refused(404, "not_found", "There is no such file or folder.") from None
        if stat.S_ISLNK(st.st_mode):
            os.close(fd)
            raise BadPath("symlink", "links are not followed")
        return fd, name, st

    def _make_area_root(self, area: Area) -> bool:
        """Make the area's own folder if missing (a home: 0700, whoever makes
        it: login, a push, a run); True if it was made now."""
        with paths.opened(self._root_fd, area.parts[:-1], create=area.exam_id is not None) as fd:  # (exams/<id>/)
            try:
                os.mkdir(area.parts[-1], 0o700 if area.quota else 0o755, dir_fd=fd)
                return True
            except FileExistsError:
                return False

    def ensure_area(self, area: Area) -> bool:
        """Make the area's own folder if it is missing (a new class's).
        mkdir is atomic: no lock (nor its file) is needed."""
        return self._make_area_root(area)

    def _make_folder(self, area: Area, parts: Parts) -> int:
        """An fd of the folder `parts`, made (with its parents) if missing."""
        self._make_area_root(area)
        try:
            return paths.open_dir(self._root_fd, area.parts + tuple(parts), create=True, owner=self._owner(area))
        except (FileExistsError, NotADirectoryError):
            raise Refused(409, "not_a_folder", "A part of the path is a file, not a folder.") from None

    def _missing(self, area: Area, folder: Parts) -> int:
        """How many folders saving into `folder` would make."""
        try:
            fd = paths.open_dir(self._root_fd, area.parts)
        except FileNotFoundError:
            return len(folder)
        try:
            for i, name in enumerate(folder):
                try:
                    next_fd = os.open(name, paths.DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    return len(folder) - i
                except OSError:
                    return 0  # not a folder: _make_folder refuses
                os.close(fd)
                fd = next_fd
            return 0
        finally:
            os.close(fd)

    # -- homes ------------------------------------------------------------

    def ensure_home(self, username: str, welcome: bool, owner_uid: int | None = None) -> bool:
        """Make a user's home at first use (0700), give students the welcome
        file once (even if a push made the home before they signed in) and,
        with `owner_uid` (as root), make everything in it theirs."""
        area = Area.home(username)
        if self._home_ready(area, username, welcome, owner_uid):
            return False  # nothing to change: no lock file opened, so a read-only storage still shows it
        with self._locked(area):
            made = self._make_area_root(area)
            with self._dir(area, ()) as fd:
                st = os.fstat(fd)
                if stat.S_IMODE(st.st_mode) != 0o700:
                    os.fchmod(fd, 0o700)
                if owner_uid is not None and st.st_uid != owner_uid:
                    self._give_away(area, fd, owner_uid)
            if welcome and not self._welcomed(username, mark=False):
                try:
                    self._save(area, ("hello.py",), WELCOME.encode(), if_match=None)
                except Refused:
                    pass  # a hello.py is there already (pushed?), or no room: theirs stays
                self._welcomed(username, mark=True)
        return made

    def _home_ready(self, area: Area, username: str, welcome: bool, owner_uid: int | None) -> bool:
        """Whether ensure_home has nothing to do: the home is there, 0700,
        its owner's, and a student has had the welcome file."""
        try:
            with paths.opened(self._root_fd, area.parts[:-1]) as fd:
                st = os.stat(area.parts[-1], dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return (stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
                and (owner_uid is None or st.st_uid == owner_uid)
                and (not welcome or self._welcomed(username, mark=False)))

    def _welcomed(self, username: str, mark: bool) -> bool:
        with paths.opened(self._root_fd, (".system", "welcomed")) as fd:
            if mark:
                os.close(paths.open_file(fd, username, os.O_WRONLY | os.O_CREAT))
            return paths.exists(fd, username)

    def _give_away(self, area: Area, fd: int, uid: int) -> None:
        """chown -R without following links (a program may have planted some)."""
        os.fchown(fd, uid, uid)
        for event, cur, name, _ in Walk(fd):
            if event != LEAVE:
                os.chown(name, uid, uid, dir_fd=cur, follow_symlinks=False)
        self._owners.pop(area.key, None)

    def home_path(self, username: str) -> str:
        return os.path.join(self.root, *Area.home(username).parts)

    # -- reading ----------------------------------------------------------

    def is_file(self, area: Area, parts: Parts) -> bool:
        fd, _, st = self._lookup(area, parts)
        os.close(fd)
        return stat.S_ISREG(st.st_mode)

    def is_dir(self, area: Area, parts: Parts) -> bool:
        fd, _, st = self._lookup(area, parts)
        os.close(fd)
        return stat.S_ISDIR(st.st_mode)

    def list(self, area: Area, parts: Parts) -> "builtins.list[Meta]":
        with self._dir(area, parts) as fd:
            entries: builtins.list[Meta] = []
            now = time.time()
            with os.scandir(fd) as found:
                for entry in found:
                    if _hidden(entry.name):
                        self._clean_temp(fd, entry, now)
                        continue
                    if len(entries) >= TREE_LIMIT:
                        break
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    if not stat.S_ISLNK(st.st_mode):
                        entries.append(_meta(entry.name, st))
        return sorted(entries, key=lambda e: (e["kind"] != "folder", e["name"].lower()))

    def tree(self, area: Area, parts: Parts = ()) -> "tuple[builtins.list[Meta], bool]":
        """Every file and folder below `parts` the API can reach, as paths
        relative to it, and whether some were left out (too many, too deep)."""
        out: builtins.list[Meta] = []
        with self._dir(area, parts) as fd:
            walk = Walk(fd, max_depth=paths.MAX_DEPTH - len(parts), max_entries=TREE_LIMIT,
                        skip_deep=True, skip=_hidden)
            try:
                for event, _, name, st in walk:
                    if st is None or stat.S_ISLNK(st.st_mode):  # None: LEAVE
                        continue
                    entry = _meta(walk.path(name), st, _kind(name, st), key="path")
                    out.append(entry)
                    if event == ENTER and entry["kind"] != "folder":
                        walk.prune()  # a folder whose name cannot be opened
            except TooMany:
                return out, True
        return out, walk.truncated

    def read(self, area: Area, parts: Parts, limit: int | None = None) -> tuple[bytes | None, str | None, Meta]:
        """(data, etag, meta) of a file; data is None when it exceeds `limit`."""
        self._slow_down()
        fd, name, st = self._lookup(area, parts)
        try:
            if not stat.S_ISREG(st.st_mode):
                raise NotAFile(name)
            data, st = paths.read_regular(fd, name, limit)
            return data, None if data is None else etag_of(data), _meta("/".join(parts), st, key="path")
        finally:
            os.close(fd)

    def open_download(self, area: Area, parts: Parts) -> IO[bytes]:
        """A binary file object of a regular file, for streaming."""
        fd, name, st = self._lookup(area, parts)
        try:
            if not stat.S_ISREG(st.st_mode):
                raise NotAFile(name)
            return os.fdopen(paths.open_regular(fd, name), "rb")
        finally:
            os.close(fd)

    # -- saving -----------------------------------------------------------

    def save(self, area: Area, parts: Parts, data: bytes, if_match: str | None, keep_required: bool = False) -> Meta:
        """Replace (if_match = the etag edited from, or '*') or create
        (if_match None) a file; return its new meta with 'etag'. With
        `keep_required`, the old content must become a version (a push
        that replaces a student's own): refused when there is no room."""
        if not parts:
            raise BadPath("bad_path", "name a file")
        self._refuse_oversized(len(data))
        self._slow_down()
        with self._locked(area):
            return self._save(area, parts, data, if_match, keep_required)

    def _save(self, area: Area, parts: Parts, data: bytes, if_match: str | None, keep_required: bool = False) -> Meta:
        """save() for a caller that holds the area's lock."""
        self._refuse_oversized(len(data))
        fd, st = self._target(area, parts)
        try:
            current = self._current(fd, parts[-1], st)
            if if_match is None and current is not None:
                raise Refused(409, "conflict", "A file with this name already exists.", current=current)
            if if_match not in (None, "*") and (current is None or current["etag"] != if_match):
                raise Refused(409, "conflict", "The file changed since you opened it.", current=current)
            # Checked before any folder is made, so a refusal leaves nothing
            # behind. The old content stays (a version), so the new one adds.
            made = 0 if fd is not None else self._missing(area, parts[:-1])
            shrinks, keep = st is not None and len(data) < st.st_size, current is not None
            try:
                self.quota.charge(area, len(data), 1 + made, shrinks=shrinks)
            except Refused:
                if current is None or st is None or keep_required:
                    raise
                # An edit is not refused for the version it would keep: without
                # one it adds only its growth (and no file) to the home.
                self.quota.charge(area, len(data) - st.st_size, 0, shrinks=shrinks)
                keep = False
            if fd is None:
                fd = self._make_folder(area, parts[:-1])
            meta = self._write(area, fd, parts, data, current["etag"] if keep and current else None)
        finally:
            if fd is not None:
                os.close(fd)
        meta["etag"] = etag_of(data)
        return meta

    def _target(self, area: Area, parts: Parts) -> tuple[int | None, os.stat_result | None]:
        """(fd of the parent folder or None if it does not exist yet, stat of
        the file or None)."""
        try:
            fd = paths.open_dir(self._root_fd, area.parts + tuple(parts[:-1]))
        except FileNotFoundError:
            return None, None
        try:
            st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return fd, None
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            if stat.S_ISLNK(st.st_mode):
                raise BadPath("symlink", "links are not followed")
            what = "A folder" if stat.S_ISDIR(st.st_mode) else "Something that is not a file (a pipe?)"
            raise Refused(409, "not_a_file", f"{what} with this name is already there.")
        return fd, st

    def _current(self, fd: int | None, name: str, st: os.stat_result | None) -> Meta | None:
        """The current version as a 409 answer shows it, or None."""
        if st is None or fd is None:
            return None
        if st.st_size > TEXT_LIMIT:
            return {"etag": etag_of_file(fd, name), "size": st.st_size, "modified": round(st.st_mtime, 3)}
        data = paths.read_regular(fd, name)[0] or b""  # no limit: never None
        current: Meta = {"etag": etag_of(data), "size": len(data), "modified": round(st.st_mtime, 3)}
        text = as_text(data)
        if text is not None:
            current["content"] = text
        return current

    def _write(self, area: Area, fd: int, parts: Parts, data: bytes, old_etag: str | None) -> Meta:
        """Write `data` over parts[-1] in `fd` atomically; the old content, if
        any (with `old_etag`), becomes a history version."""
        name = parts[-1]
        temp = f"{TEMP_PREFIX}{secrets.token_hex(6)}"
        try:
            # Creating the temporary file can fail for want of space too
            # (no free inode, or a folder that must grow), so it is inside.
            tfd = paths.open_file(fd, temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            try:
                owner = self._owner(area)
                if owner:
                    os.fchown(tfd, *owner)
                paths.write_all(tfd, data)
                os.fsync(tfd)
            finally:
                os.close(tfd)
            if old_etag:
                self._keep_version(area, fd, name, parts, old_etag)
            os.rename(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except OSError:
            _unlink_quietly(fd, temp)
            raise  # ENOSPC and EDQUOT become 507 in the handlers, like every other call's
        os.fsync(fd)
        return _meta("/".join(parts), os.stat(name, dir_fd=fd, follow_symlinks=False), key="path")

    def _keep_version(self, area: Area, fd: int, name: str, parts: Parts, etag: str, deleted: bool = False) -> str:
        version, (freed_bytes, freed_files) = self.versions.keep(area, fd, name, parts, etag, deleted)
        self.quota.add(area, -freed_bytes, -freed_files)
        return version

    def _refuse_oversized(self, size: int) -> None:
        if size > self.limits.max_file_bytes:
            raise Refused(413, "file_too_large", f"A file may have at most {size_text(self.limits.max_file_bytes)}.")

    # -- quotas -----------------------------------------------------------

    def usage(self, area: Area, fresh: bool = False) -> tuple[int, int]:
        """(bytes, files) an area holds: everything in it (whatever wrote it)
        and its earlier versions; `fresh` walks now and updates the record."""
        with self._locked(area):
            return self.quota.usage(area, fresh)

    def measure(self, area: Area) -> tuple[int, int, str | None]:
        """After something outside the store wrote the area (a program): walk
        it now; (bytes, files, the quota sentence or None), the usage as it
        is once old versions made room."""
        with self._locked(area):
            self.quota.usage(area, True)
            problem = self.quota.problem(area)
            used, files = self.quota.usage(area)
            return used, files, problem

    def runnable_size(self, area: Area, parts: Parts) -> int:
        """Refused unless `parts` is a file its student may run now: a file,
        in a home within its quota. Returns the bytes the home holds (the
        run's write budget is what the quota leaves)."""
        if not self.is_file(area, parts):
            raise Refused(400, "not_a_file", "Only a file can be run.")
        return self.room_to_run(area)

    def runnable_listed(self, area: Area, parts: Parts) -> "tuple[int, tuple[builtins.list[Meta], bool]]":
        """runnable_size, and the home's tree (as `tree`): what a run on a
        copy of the home needs before it starts (runs/shipping.py), in one call."""
        return self.runnable_size(area, parts), self.tree(area)

    def course_copy(self, course: Area, parts: Parts, home: Area) -> tuple[int, dict[str, bytes]]:
        """What running the course file `parts` from the home `home` is
        given: (bytes the home holds, {name: bytes}) (run_copy.py)."""
        return run_copy.course_copy(self, course, parts, home)

    def room_to_run(self, area: Area) -> int:
        """The bytes the home `area` holds, for a run whose program may write
        it; Refused when it is over its quota."""
        with self._locked(area):
            problem = self.quota.problem(area)
            used = self.quota.usage(area)[0]
        if problem:
            raise Refused(507, "quota_exceeded", problem)
        return used

    def quota_problem(self, area: Area, fresh: bool = False) -> str | None:
        """None when the area is within its quota, else the sentence for the
        student (how much is used, the quota, how much to delete). Old
        versions are dropped first when that is enough to make room."""
        with self._locked(area):
            return self.quota.problem(area, fresh)

    # -- history ----------------------------------------------------------

    def history(self, area: Area, parts: Parts) -> "builtins.list[Meta]":
        """Earlier versions of a file, newest first."""
        return self.versions.list(area, parts)

    def read_version(self, area: Area, parts: Parts, version: str) -> bytes:
        return self.versions.read(area, parts, version, self.limits.max_file_bytes)

    def restore(self, area: Area, parts: Parts, version: str) -> Meta:
        """Save an earlier version as the newest one (the current one becomes a version)."""
        return self.save(area, parts, self.read_version(area, parts, version), if_match="*")

    # -- folders, moves, deletes ------------------------------------------

    def mkdir(self, area: Area, parts: Parts) -> None:
        if not parts:
            raise BadPath("bad_path", "name a folder")
        with self._locked(area):
            self.quota.charge(area, 0, 1 + self._missing(area, parts[:-1]))
            fd = self._make_folder(area, parts[:-1])
            try:
                try:
                    os.mkdir(parts[-1], 0o755, dir_fd=fd)
                except FileExistsError:
                    raise Refused(409, "exists", "A file or folder with this name already exists.") from None
                owner = self._owner(area)
                if owner:
                    os.chown(parts[-1], *owner, dir_fd=fd, follow_symlinks=False)
                os.fsync(fd)
            finally:
                os.close(fd)

    def move(self, area: Area, src: Parts, dst: Parts) -> None:
        if not src or not dst:
            raise BadPath("bad_path", "name what to move and where")
        if dst[:len(src)] == src:
            raise Refused(400, "bad_move", "A folder cannot be moved into itself.")
        with self._locked(area):
            sfd, sname, _ = self._lookup(area, src)
            try:
                self.quota.charge(area, 0, self._missing(area, dst[:-1]))
                dfd = self._make_folder(area, dst[:-1])
                try:
                    if paths.exists(dfd, dst[-1]):
                        raise Refused(409, "exists", "Something with that name is already there.")
                    os.rename(sname, dst[-1], src_dir_fd=sfd, dst_dir_fd=dfd)
                    os.fsync(dfd)
                finally:
                    os.close(dfd)
                os.fsync(sfd)
            finally:
                os.close(sfd)
            self.versions.move(area, src, dst)

    def delete(self, area: Area, parts: Parts) -> Meta:
        """Delete a file or a folder. Every file's last version is kept (the
        trash lists them and puts them back); FIFOs, sockets and devices are
        removed without being read. Returns how many files were kept."""
        if not parts:
            raise BadPath("bad_path", "the top folder cannot be deleted")
        path = "/".join(parts)
        with self._locked(area):
            fd, name, st = self._lookup(area, parts)
            try:
                if stat.S_ISDIR(st.st_mode):
                    kept, folders, dropped = self._delete_folder(area, fd, name, parts)
                elif self._worth_keeping(st):
                    kept, dropped = [self._keep_deleted(area, fd, name, parts, st)], 0
                    os.unlink(name, dir_fd=fd)
                    self.trash.add(area, "file", path, kept)
                else:
                    # A FIFO, socket or device, or a file too large to open
                    # again (a program's, maybe sparse): removed unread.
                    os.unlink(name, dir_fd=fd)
                    kept, dropped = [], 1
                    self.quota.add(area, -(st.st_size if stat.S_ISREG(st.st_mode) and st.st_nlink == 1 else 0), -1)
                os.fsync(fd)
            finally:
                os.close(fd)
        return {"deleted": path, "kept": len(kept), "not_kept": dropped}

    def _worth_keeping(self, st: os.stat_result) -> bool:
        """A version of a deleted file is kept if it could be restored: a
        regular file no larger than a save may be (its etag reads it all)."""
        return stat.S_ISREG(st.st_mode) and st.st_size <= self.limits.max_file_bytes

    def _keep_deleted(self, area: Area, fd: int, name: str, parts: Parts, st: os.stat_result) -> Meta:
        version = self._keep_version(area, fd, name, parts, etag_of_file(fd, name), deleted=True)
        return {"path": "/".join(parts), "version": version, "size": st.st_size}

    def _delete_folder(self, area: Area, parent_fd: int, name: str,
                   parts: Parts) -> "tuple[builtins.list[Meta], builtins.list[str], int]":
        """Empty and remove a folder however deep; the last version of each
        file the API could open is kept (at most the files quota of them:
        a program's mass output is not worth a version each) and the trash
        remembers them, even if a program's changes stop this half-way.
        Returns the kept files, the folders and how many files were removed
        without a version."""
        kept: builtins.list[Meta] = []
        folders, dropped = ["/".join(parts)], 0
        freed_bytes = freed_files = 0
        top = os.open(name, paths.DIR_FLAGS, dir_fd=parent_fd)
        try:
            walk = Walk(top)
            for event, cur, entry, st in walk:
                # Only what the API could open is worth keeping (and cheap to name).
                full = (parts + tuple(walk.path(entry).split("/"))
                        if len(parts) + walk.depth <= paths.MAX_DEPTH else None)
                reachable = full if full and all(paths.is_plain(p) for p in full[len(parts):]) else None
                if event == ENTER:
                    if reachable:
                        folders.append("/".join(reachable))
                elif event == LEAVE:
                    _rmdir(cur, entry)
                    freed_files += 1
                elif st is not None:  # FILE: always stat'ed
                    if self._worth_keeping(st) and reachable and len(kept) < self.limits.quota_files:
                        kept.append(self._keep_deleted(area, cur, entry, reachable, st))
                    else:
                        dropped += 1
                        freed_files += 1
                        if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                            freed_bytes += st.st_size
                    os.unlink(entry, dir_fd=cur)
            _rmdir(parent_fd, name)
            freed_files += 1
        finally:
            os.close(top)
            self.trash.add(area, "folder", "/".join(parts), kept, folders)
            self.quota.add(area, -freed_bytes, -freed_files)
        return kept, folders, dropped

    # -- trash ------------------------------------------------------------

    def trash_list(self, area: Area) -> "builtins.list[Meta]":
        """What was deleted and can still be restored, newest first."""
        return self.trash.list(area, lambda path, version: self.versions.kept(area, tuple(path.split("/")), version))

    def trash_restore(self, area: Area, record_id: str, path: str | None = None) -> Meta:
        """Put back what one delete removed (or only the file `path` of it),
        never over something there now: {"restored": [...], "skipped": [...]}."""
        with self._locked(area):
            record = self.trash.load(area, record_id)
            chosen = [f for f in record["files"] if path is None or f["path"] == path]
            if path is not None and not chosen:
                raise Refused(404, "not_in_trash", "That file is not in this part of the trash.")
            restored: builtins.list[str] = []
            skipped: builtins.list[Meta] = []
            if path is None:
                for folder in record["folders"]:
                    self._restore_folder(area, tuple(folder.split("/")), skipped)
            for f in chosen:
                parts = tuple(f["path"].split("/"))
                try:
                    self._save(area, parts, self.read_version(area, parts, f["version"]), if_match=None)
                    restored.append(f["path"])
                except Refused as e:
                    skipped.append({"path": f["path"], "error": e.code, "message": e.message})
            record["files"] = [f for f in record["files"] if f["path"] not in restored]
            if path is None:
                record["folders"] = []
            self.trash.update(area, record_id, record)
        return {"restored": restored, "skipped": skipped}

    def _restore_folder(self, area: Area, parts: Parts, skipped: "builtins.list[Meta]") -> None:
        try:
            made = self._missing(area, parts)
            if made:
                self.quota.charge(area, 0, made)
                os.close(self._make_folder(area, parts))
        except Refused as e:
            skipped.append({"path": "/".join(parts), "error": e.code, "message": e.message})

    # -- zip --------------------------------------------------------------

    def zip_chunks(self, area: Area, parts: Parts) -> Generator[bytes, None, None]:
        """A generator of the bytes of a zip of a folder, made as it is read.
        The first `next()` refuses what can be refused before anything is
        sent (and raises Refused); a later one may still raise, and then
        the zip is incomplete. Each `next()` is blocking."""
        with self._dir(area, parts) as fd:
            zipstream.refuse_unzippable(fd)
            yield from zipstream.chunks(fd)

    # -- housekeeping ------------------------------------------------------

    def _slow_down(self) -> None:
        if self.limits.delay_ms:
            time.sleep(self.limits.delay_ms / 1000)

    def _clean_temp(self, fd: int, entry: os.DirEntry[str], now: float) -> None:
        """Remove a temporary file a crashed save left behind."""
        try:
            if entry.name.startswith(TEMP_PREFIX) and now - entry.stat(follow_symlinks=False).st_mtime > STALE_TEMP_SECONDS:
                os.unlink(entry.name, dir_fd=fd)
        except OSError:
            pass


def as_text(data: bytes) -> str | None:
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _rmdir(fd: int, name: str) -> None:
    try:
        os.rmdir(name, dir_fd=fd)
    except OSError as e:
        if e.errno in (errno.ENOTEMPTY, errno.EEXIST):
            raise Changed() from None  # a program added something meanwhile
        raise


def _unlink_quietly(fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=fd)
    except OSError:
        pass
