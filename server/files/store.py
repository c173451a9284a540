"""Users' files on STORAGE_ROOT: safe paths, atomic saves, history, quotas.

Layout (all on the shared file system, so every worker and instance sees
the same thing):

    STORAGE_ROOT/home/<username>/     each user's files
    STORAGE_ROOT/course/              teachers write, students read
    STORAGE_ROOT/.system/history/     earlier versions, per area and file
    STORAGE_ROOT/.system/locks/       one lock file per area

Every method is blocking and runs in the file executor, never on the
IOLoop. Changes to one area are serialized by an fcntl lock on its lock
file (NFSv4 and EFS honour these across hosts), so "check the version,
then replace" is atomic across workers, processes and containers.

A save writes a temporary file in the target's folder, fsyncs it, keeps
the old file as a history version (a hard link: no copy), renames the new
one over the target and fsyncs the folder; only then is it acknowledged.
The file therefore always holds the old or the new content, whatever
happens mid-save.
"""
import errno
import fcntl
import hashlib
import os
import secrets
import shutil
import stat
import time
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass

from ..errors import Refused
from . import paths
from .paths import BadPath

TEMP_PREFIX = paths.RESERVED_PREFIX + "-tmp-"
STALE_TEMP_SECONDS = 600
USAGE_TTL = 30.0
TEXT_LIMIT = 2 << 20  # larger files are offered as downloads, not shown in the editor
TREE_LIMIT = 5000
WELCOME = '''# Welcome to PyClassroom!
# Press Run (or F5) to run this program. Your files are saved as you type.

name = input("What is your name? ")
print(f"Hello, {name}!")
'''


@dataclass(frozen=True)
class Area:
    """A tree of files that one lock and one quota cover."""
    key: str          # 'home/ada' or 'course'
    parts: tuple      # folders below STORAGE_ROOT
    quota: bool       # homes have quotas; the course area does not

    @staticmethod
    def home(username):
        return Area("home/" + username, ("home", username), True)

    @staticmethod
    def course():
        return Area("course", ("course",), False)


@dataclass
class Limits:
    quota_bytes: int
    quota_files: int
    max_file_bytes: int
    history_versions: int
    delay_ms: int = 0  # FS_DELAY_MS: a slow file system, rehearsed


def etag_of(data):
    return hashlib.sha256(data).hexdigest()[:20]


def _meta(name_or_path, st):
    kind = "folder" if stat.S_ISDIR(st.st_mode) else "file"
    return {"name": name_or_path, "kind": kind, "size": st.st_size if kind == "file" else 0,
            "modified": round(st.st_mtime, 3)}


class Store:
    def __init__(self, root, limits):
        self.root = root
        self.limits = limits
        self._usage = {}  # area key -> (bytes, files, computed at); this worker's cache
        self._owners = {}  # home area key -> (uid, gid) that its files must belong to
        for sub in ("home", "course", ".system/history", ".system/locks"):
            os.makedirs(os.path.join(root, sub), exist_ok=True)
        self._root_fd = paths.open_root(root)

    def close(self):
        """Release the open STORAGE_ROOT (tools that make a Store, then
        remove its folder, call this)."""
        if self._root_fd is not None:
            os.close(self._root_fd)
            self._root_fd = None

    # -- opening ----------------------------------------------------------

    @contextmanager
    def _open(self, parts, create=False):
        """An fd of the folder `parts` below STORAGE_ROOT, closed on leaving."""
        fd = paths.open_dir(self._root_fd, tuple(parts), create=create)
        try:
            yield fd
        finally:
            os.close(fd)

    def _dir(self, area, parts, create=False):
        if create:
            return self._open_owned(area, parts)
        return self._open(area.parts + tuple(parts))

    @contextmanager
    def _open_owned(self, area, parts):
        fd = paths.open_dir(self._root_fd, area.parts + tuple(parts), create=True, owner=self._owner(area))
        try:
            yield fd
        finally:
            os.close(fd)

    def _owner(self, area):
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

    @contextmanager
    def _locked(self, area):
        name = area.key.replace("/", "--") + ".lock"
        with self._open((".system", "locks")) as locks:
            fd = paths.open_file(locks, name, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _lookup(self, area, parts, missing_ok=False):
        """(parent fd, name, stat or None) of an existing path; caller closes fd."""
        parent, name = parts[:-1], parts[-1]
        try:
            fd = paths.open_dir(self._root_fd, area.parts + tuple(parent))
        except FileNotFoundError:
            raise Refused(404, "not_found", "There is no such file or folder.") from None
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            if missing_ok:
                return fd, name, None
            os.close(fd)
            raise Refused(404, "not_found", "There is no such file or folder.") from None
        if stat.S_ISLNK(st.st_mode):
            os.close(fd)
            raise BadPath("symlink", "links are not followed")
        return fd, name, st

    # -- homes ------------------------------------------------------------

    def ensure_home(self, username, welcome, owner_uid=None):
        """Create a user's home at first use (with a welcome file for
        students); with `owner_uid` (as root), make everything in it theirs."""
        area = Area.home(username)
        home = os.path.join(self.root, *area.parts)
        existed = os.path.isdir(home)
        if not existed:
            os.makedirs(home, mode=0o700, exist_ok=True)
        if owner_uid is not None and os.stat(home).st_uid != owner_uid:
            self._give_away(home, owner_uid)
        if existed:
            return False
        if welcome:
            try:
                self.save(area, ("hello.py",), WELCOME.encode(), if_match=None)
            except Refused:
                pass  # another worker wrote it first
        return True

    def _give_away(self, home, uid):
        """chown -R without following links (a program may have planted some)."""
        fd = paths.open_root(home)
        try:
            os.chown(fd, uid, uid)
            for _, dirnames, filenames, dirfd in os.fwalk(dir_fd=fd, follow_symlinks=False):
                for name in dirnames + filenames:
                    os.chown(name, uid, uid, dir_fd=dirfd, follow_symlinks=False)
        finally:
            os.close(fd)
        self._owners.pop("home/" + os.path.basename(home), None)

    # -- reading ----------------------------------------------------------

    def home_path(self, username):
        return os.path.join(self.root, *Area.home(username).parts)

    def is_file(self, area, parts):
        fd, name, st = self._lookup(area, parts)
        os.close(fd)
        return stat.S_ISREG(st.st_mode)

    def is_dir(self, area, parts):
        fd, name, st = self._lookup(area, parts)
        os.close(fd)
        return stat.S_ISDIR(st.st_mode)

    def list(self, area, parts):
        with self._dir(area, parts) as fd:
            entries = []
            now = time.time()
            for entry in os.scandir(fd):
                if entry.name.startswith(paths.RESERVED_PREFIX):
                    self._clean_temp(fd, entry, now)
                    continue
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
                    entries.append(_meta(entry.name, st))
        return sorted(entries, key=lambda e: (e["kind"] != "folder", e["name"].lower()))

    def tree(self, area, parts=()):
        """Every file and folder below `parts`, as paths relative to it."""
        out = []
        with self._dir(area, parts) as fd:
            for dirpath, dirnames, filenames, dirfd in os.fwalk(dir_fd=fd, follow_symlinks=False):
                rel = "" if dirpath == "." else dirpath[2:] + "/"
                dirnames[:] = [d for d in dirnames if not d.startswith(paths.RESERVED_PREFIX)]
                for name in sorted(dirnames) + sorted(filenames):
                    if name.startswith(paths.RESERVED_PREFIX):
                        continue
                    st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
                        entry = _meta(rel + name, st)
                        entry["path"] = entry.pop("name")
                        out.append(entry)
                    if len(out) >= TREE_LIMIT:
                        return out, True
        return out, False

    def read(self, area, parts, limit=None):
        """(data, etag, meta) of a file; data is None when it exceeds `limit`."""
        self._slow_down()
        fd, name, st = self._lookup(area, parts)
        try:
            if not stat.S_ISREG(st.st_mode):
                raise Refused(400, "not_a_file", "This is a folder, not a file.")
            if limit is not None and st.st_size > limit:
                return None, None, _meta("/".join(parts), st)
            with os.fdopen(paths.open_file(fd, name), "rb") as f:
                data = f.read()
                st = os.fstat(f.fileno())
            return data, etag_of(data), _meta("/".join(parts), st)
        finally:
            os.close(fd)

    def open_download(self, area, parts):
        """A binary file object of a regular file, for streaming."""
        fd, name, st = self._lookup(area, parts)
        try:
            if not stat.S_ISREG(st.st_mode):
                raise Refused(400, "not_a_file", "This is a folder, not a file.")
            return os.fdopen(paths.open_file(fd, name), "rb")
        finally:
            os.close(fd)

    # -- saving -----------------------------------------------------------

    def save(self, area, parts, data, if_match):
        """Replace (if_match = the etag edited from, or '*') or create
        (if_match None) a file; return its new meta with 'etag'."""
        if not parts:
            raise BadPath("bad_path", "name a file")
        self._check_file_size(len(data))
        self._slow_down()
        with self._locked(area):
            fd, st = self._target(area, parts)
            try:
                current = self._current(fd, parts[-1], st)
                if if_match is None and current is not None:
                    raise Refused(409, "conflict", "A file with this name already exists.", current=current)
                if if_match not in (None, "*") and (current is None or current["etag"] != if_match):
                    raise Refused(409, "conflict", "The file changed since you opened it.", current=current)
                # Checked before any folder is made, so a refusal leaves nothing behind.
                self._charge(area, len(data) - (st.st_size if st else 0), 0 if st else 1)
                if fd is None:
                    fd = self._make_parent(area, parts)
                meta = self._write(area, fd, parts, data, current and current["etag"])
            finally:
                if fd is not None:
                    os.close(fd)
        meta["etag"] = etag_of(data)
        return meta

    def _target(self, area, parts):
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
            raise Refused(409, "not_a_file", "A folder with this name already exists.")
        return fd, st

    def _make_parent(self, area, parts):
        try:
            return paths.open_dir(self._root_fd, area.parts + tuple(parts[:-1]), create=True,
                                  owner=self._owner(area))
        except FileExistsError:
            raise Refused(409, "not_a_folder", "A part of the path is a file, not a folder.") from None

    def _current(self, fd, name, st):
        """The current version as a 409 answer shows it, or None."""
        if st is None:
            return None
        with os.fdopen(paths.open_file(fd, name), "rb") as f:
            data = f.read()
        current = {"etag": etag_of(data), "size": len(data), "modified": round(st.st_mtime, 3)}
        text = as_text(data)
        if text is not None and len(data) <= TEXT_LIMIT:
            current["content"] = text
        return current

    def _write(self, area, fd, parts, data, old_etag):
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
                view = memoryview(data)
                while view:
                    view = view[os.write(tfd, view):]
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
        return _meta("/".join(parts), os.stat(name, dir_fd=fd, follow_symlinks=False))

    def _check_file_size(self, size):
        if size > self.limits.max_file_bytes:
            raise Refused(413, "file_too_large",
                             f"A file may have at most {_mib(self.limits.max_file_bytes)}.")

    # -- quotas -----------------------------------------------------------

    def usage(self, area):
        """(bytes, files) of an area, from this worker's cache when fresh."""
        cached = self._usage.get(area.key)
        if cached and time.monotonic() - cached[2] < USAGE_TTL:
            return cached[0], cached[1]
        return self._measure(area)

    def _measure(self, area):
        total = files = 0
        try:
            with self._dir(area, ()) as fd:
                for _, dirnames, filenames, dirfd in os.fwalk(dir_fd=fd, follow_symlinks=False):
                    files += sum(1 for d in dirnames if not d.startswith(paths.RESERVED_PREFIX))
                    for name in filenames:
                        if name.startswith(paths.RESERVED_PREFIX):
                            continue
                        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                        if stat.S_ISREG(st.st_mode):
                            total += st.st_size
                            files += 1
        except FileNotFoundError:
            pass
        self._usage[area.key] = (total, files, time.monotonic())
        return total, files

    def _charge(self, area, added_bytes, added_files):
        """Refuse a change that would overfill a home; remember it otherwise.

        The cache may be stale (other workers, running programs write too),
        so a change that comes near a limit is checked against a fresh count."""
        if not area.quota:
            return
        lim = self.limits
        used, count = self.usage(area)
        near = used + added_bytes > 0.9 * lim.quota_bytes or count + added_files > 0.9 * lim.quota_files
        if near:
            used, count = self._measure(area)
        if added_bytes > 0 and used + added_bytes > lim.quota_bytes:
            raise Refused(507, "quota_exceeded",
                             f"Your folder is full ({_mib(used)} of {_mib(lim.quota_bytes)} used). "
                             "Delete something first.")
        if added_files > 0 and count + added_files > lim.quota_files:
            raise Refused(507, "quota_exceeded",
                             f"Your folder has the most files allowed ({lim.quota_files}). Delete some first.")
        self._usage[area.key] = (used + added_bytes, count + added_files,
                                 self._usage.get(area.key, (0, 0, time.monotonic()))[2])

    # -- history ----------------------------------------------------------

    def _history_parts(self, area, parts):
        digest = hashlib.sha256("/".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return (".system", "history", area.key.replace("/", "--"), digest)

    def _keep_version(self, area, fd, name, parts, etag):
        hist = self._history_parts(area, parts)
        hfd = paths.open_dir(self._root_fd, hist, create=True)
        try:
            version = f"{time.time_ns()}-{etag}"
            try:
                os.link(name, version, src_dir_fd=fd, dst_dir_fd=hfd, follow_symlinks=False)
            except OSError as e:
                if e.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                    raise
                with os.fdopen(paths.open_file(fd, name), "rb") as src:
                    data = src.read()
                vfd = paths.open_file(hfd, version, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
                with os.fdopen(vfd, "wb") as dst:
                    dst.write(data)
                    os.fsync(dst.fileno())
            versions = sorted(v for v in os.listdir(hfd) if v[0].isdigit())
            for old in versions[:-self.limits.history_versions]:
                _unlink_quietly(hfd, old)
            os.fsync(hfd)
        finally:
            os.close(hfd)

    def history(self, area, parts):
        """Earlier versions of a file, newest first."""
        try:
            hfd = paths.open_dir(self._root_fd, self._history_parts(area, parts))
        except FileNotFoundError:
            return []
        try:
            out = []
            for v in sorted((v for v in os.listdir(hfd) if v[0].isdigit()), reverse=True):
                st = os.stat(v, dir_fd=hfd, follow_symlinks=False)
                ns, etag = v.split("-", 1)
                out.append({"version": v, "etag": etag, "size": st.st_size, "saved": int(ns) / 1e9})
            return out
        finally:
            os.close(hfd)

    def read_version(self, area, parts, version):
        if not version or "/" in version or not version[0].isdigit() or paths.name_problem(version):
            raise Refused(404, "no_such_version", "There is no such version.")
        try:
            hfd = paths.open_dir(self._root_fd, self._history_parts(area, parts))
            try:
                with os.fdopen(paths.open_file(hfd, version), "rb") as f:
                    return f.read()
            finally:
                os.close(hfd)
        except FileNotFoundError:
            raise Refused(404, "no_such_version", "There is no such version.") from None

    def restore(self, area, parts, version):
        """Save an earlier version as the newest one (the current one becomes a version)."""
        return self.save(area, parts, self.read_version(area, parts, version), if_match="*")

    # -- folders, moves, deletes ------------------------------------------

    def mkdir(self, area, parts):
        if not parts:
            raise BadPath("bad_path", "name a folder")
        with self._locked(area):
            self._charge(area, 0, 1)
            with self._dir(area, parts[:-1], create=True) as fd:
                try:
                    os.mkdir(parts[-1], 0o755, dir_fd=fd)
                except FileExistsError:
                    raise Refused(409, "exists", "A file or folder with this name already exists.") from None
                owner = self._owner(area)
                if owner:
                    os.chown(parts[-1], *owner, dir_fd=fd, follow_symlinks=False)
                os.fsync(fd)

    def move(self, area, src, dst):
        if not src or not dst:
            raise BadPath("bad_path", "name what to move and where")
        if dst[:len(src)] == src:
            raise Refused(400, "bad_move", "A folder cannot be moved into itself.")
        with self._locked(area):
            sfd, sname, _ = self._lookup(area, src)
            try:
                with self._dir(area, dst[:-1], create=True) as dfd:
                    if _exists(dfd, dst[-1]):
                        raise Refused(409, "exists", "Something with that name is already there.")
                    os.rename(sname, dst[-1], src_dir_fd=sfd, dst_dir_fd=dfd)
                    os.fsync(dfd)
                os.fsync(sfd)
            finally:
                os.close(sfd)
            self._move_history(area, src, dst)

    def _move_history(self, area, src, dst):
        """History follows a moved file (a moved folder's files keep theirs
        under the old path: they stay readable there)."""
        old, new = self._history_parts(area, src), self._history_parts(area, dst)
        with self._open(old[:-1], create=True) as hfd:
            try:
                os.rename(old[-1], new[-1], src_dir_fd=hfd, dst_dir_fd=hfd)
            except OSError:
                pass

    def delete(self, area, parts):
        if not parts:
            raise BadPath("bad_path", "the top folder cannot be deleted")
        with self._locked(area):
            fd, name, st = self._lookup(area, parts)
            try:
                if stat.S_ISDIR(st.st_mode):
                    shutil.rmtree(name, dir_fd=fd)
                else:
                    with os.fdopen(paths.open_file(fd, name), "rb") as f:
                        etag = etag_of(f.read())
                    self._keep_version(area, fd, name, parts, etag)  # a deleted file can be restored
                    os.unlink(name, dir_fd=fd)
                os.fsync(fd)
            finally:
                os.close(fd)
            self._usage.pop(area.key, None)

    # -- zip --------------------------------------------------------------

    def zip_chunks(self, area, parts, chunk_size=256 << 10):
        """A generator of the bytes of a zip of a folder, made as it is read:
        memory stays at about one chunk whatever the folder's size. Each
        `next()` is blocking; the handler runs it in the executor."""
        sink = _ChunkSink()
        with self._dir(area, parts) as fd:
            zf = zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=5)
            for dirpath, dirnames, filenames, dirfd in os.fwalk(dir_fd=fd, follow_symlinks=False):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith(paths.RESERVED_PREFIX))
                rel = "" if dirpath == "." else dirpath[2:] + "/"
                for name in sorted(filenames):
                    if name.startswith(paths.RESERVED_PREFIX):
                        continue
                    try:
                        src = os.fdopen(paths.open_file(dirfd, name), "rb")
                    except (OSError, BadPath):
                        continue  # links and vanished files are left out
                    with src, zf.open(_zipinfo(rel + name, os.fstat(src.fileno())), "w") as dst:
                        while True:
                            block = src.read(chunk_size)
                            if not block:
                                break
                            dst.write(block)
                            if sink.size() >= chunk_size:
                                yield sink.take()
                    if sink.size():
                        yield sink.take()
            zf.close()
        if sink.size():
            yield sink.take()

    # -- teacher tools ----------------------------------------------------

    def push(self, src_parts, usernames):
        """Copy a file or folder of course/ into each user's home at the same
        path, never overwriting: ({username: [copied paths]}, {username: [skipped paths]})."""
        course = Area.course()
        fd, name, st = self._lookup(course, src_parts)
        os.close(fd)
        if stat.S_ISDIR(st.st_mode):
            listing, _ = self.tree(course, src_parts)
            files = [tuple(src_parts) + tuple(e["path"].split("/")) for e in listing if e["kind"] == "file"]
        else:
            files = [tuple(src_parts)]
        contents = {f: self.read(course, f)[0] for f in files}
        copied, skipped = {}, {}
        for username in usernames:
            for f, data in contents.items():
                try:
                    self.save(Area.home(username), f, data, if_match=None)
                    copied.setdefault(username, []).append("/".join(f))
                except Refused as e:
                    skipped.setdefault(username, []).append({"path": "/".join(f), "reason": e.code})
        return copied, skipped

    # -- housekeeping ------------------------------------------------------

    def _slow_down(self):
        if self.limits.delay_ms:
            time.sleep(self.limits.delay_ms / 1000)

    def _clean_temp(self, fd, entry, now):
        """Remove a temporary file a crashed save left behind."""
        try:
            if entry.name.startswith(TEMP_PREFIX) and now - entry.stat(follow_symlinks=False).st_mtime > STALE_TEMP_SECONDS:
                os.unlink(entry.name, dir_fd=fd)
        except OSError:
            pass


class _ChunkSink:
    """A write-only, unseekable stream that zipfile writes into and the
    generator empties chunk by chunk."""

    def __init__(self):
        self._parts = []
        self._size = 0
        self._written = 0

    def write(self, b):
        self._parts.append(bytes(b))
        self._size += len(b)
        self._written += len(b)
        return len(b)

    def tell(self):
        return self._written

    def flush(self):
        pass

    def size(self):
        return self._size

    def take(self):
        data = b"".join(self._parts)
        self._parts, self._size = [], 0
        return data


def _zipinfo(name, st):
    info = zipfile.ZipInfo(name, time.localtime(max(st.st_mtime, 315532800))[:6])
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    info.file_size = st.st_size
    return info


def as_text(data):
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _exists(fd, name):
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False


def _unlink_quietly(fd, name):
    try:
        os.unlink(name, dir_fd=fd)
    except OSError:
        pass


def _mib(n):
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n // 1024} KiB"
