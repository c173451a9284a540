"""Client paths: validated as text first, then opened without following links.

A path from a client is a string like `lesson1/hello.py`. `parse` turns it
into a tuple of safe names or raises `BadPath` before any file system call.
`open_dir` then walks those names one at a time from an already-open root
folder with O_NOFOLLOW, so a symlink planted anywhere in the path — even one
swapped in by a running program between two looks — is refused rather
than followed. No code here builds a path string and hands it to `open()`.

What a student's program leaves in a home is never trusted either: a FIFO
or a device where a file was expected is refused by `open_regular` without
blocking, and a name that is not UTF-8 is shown escaped (`shown`).
"""
import errno
import os
import stat
import unicodedata
from contextlib import contextmanager
from typing import Iterable, Iterator

from ..errors import Refused

MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 1024
MAX_DEPTH = 32
# Names the storage layer uses for itself inside users' folders.
RESERVED_PREFIX = ".~pyc"

Parts = tuple[str, ...]  # a path as its names: ('a', 'b.py') for 'a/b.py'
Owner = tuple[int, int]  # (uid, gid)


class BadPath(Refused):
    """The client path is not acceptable; `code` names why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(400, code, message)


def name_problem(name: str) -> tuple[str, str] | None:
    """Why `name` cannot be one path segment, or None."""
    if name in ("", ".", ".."):
        return "path_segment", f"'{name}' is not a file or folder name"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return "name_too_long", f"a name may have at most {MAX_NAME_BYTES} bytes"
    for ch in name:
        if ch in "/\\" or ord(ch) < 0x20 or ord(ch) == 0x7F:
            return "bad_character", "names may not contain control characters, '/' or '\\'"
        category = unicodedata.category(ch)
        if category in ("Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            # bidi overrides, zero-width characters, surrogates, unassigned:
            # they make a name look like another one.
            return "bad_character", f"names may not contain the character U+{ord(ch):04X}"
    folded = unicodedata.normalize("NFKC", name)
    if folded in (".", "..") or "/" in folded or "\\" in folded:
        return "path_segment", f"'{name}' looks like a path, not a name"
    if name != name.strip():
        return "bad_character", "names may not start or end with a space"
    if name.startswith(RESERVED_PREFIX):
        return "reserved_name", f"names starting with '{RESERVED_PREFIX}' are reserved"
    return None


def parse(path: object, allow_root: bool = True) -> Parts:
    """('a', 'b.py') for 'a/b.py'. A trailing slash is allowed; '' is the root."""
    if not isinstance(path, str):
        raise BadPath("bad_path", "the path must be text")
    if "\x00" in path:
        raise BadPath("bad_character", "the path contains a NUL character")
    if path.startswith("/"):
        raise BadPath("absolute_path", "use a path relative to your folder, not an absolute one")
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise BadPath("path_too_long", f"a path may have at most {MAX_PATH_BYTES} bytes")
    parts = tuple(path[:-1].split("/") if path.endswith("/") else path.split("/")) if path else ()
    if len(parts) > MAX_DEPTH:
        raise BadPath("path_too_long", f"a path may have at most {MAX_DEPTH} levels")
    for name in parts:
        problem = name_problem(name)
        if problem:
            raise BadPath(*problem)
    if not parts and not allow_root:
        raise BadPath("bad_path", "name a file or folder")
    return parts


DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_root(path: str) -> int:
    return os.open(path, DIR_FLAGS)


def open_dir(root_fd: int, parts: Iterable[str], create: bool = False, owner: Owner | None = None) -> int:
    """An fd of the folder `parts` below `root_fd`, never crossing a symlink.
    With `create`, missing folders are made (mode 0755, owned by `owner`,
    a (uid, gid), when given)."""
    fd = os.dup(root_fd)
    try:
        for name in parts:
            try:
                next_fd = os.open(name, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(name, 0o755, dir_fd=fd)
                    if owner:
                        os.chown(name, *owner, dir_fd=fd, follow_symlinks=False)
                except FileExistsError:
                    pass
                next_fd = os.open(name, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        return fd
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise BadPath("not_a_folder", "a part of the path is a link or a file, not a folder") from None
        raise


@contextmanager
def opened(root_fd: int, parts: Iterable[str], create: bool = False,
           owner: Owner | None = None) -> Iterator[int]:
    """with opened(root_fd, ('a', 'b')) as fd: open_dir's fd, closed after."""
    fd = open_dir(root_fd, tuple(parts), create=create, owner=owner)
    try:
        yield fd
    finally:
        os.close(fd)


def exists(dir_fd: int, name: str) -> bool:
    """Is there anything (a link too) named `name` in `dir_fd`?"""
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False


def open_file(dir_fd: int, name: str, flags: int = os.O_RDONLY) -> int:
    """Open `name` in `dir_fd`; a symlink there is refused, not followed."""
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise BadPath("symlink", "links are not followed") from None
        raise


class NotAFile(Refused):
    """A FIFO, socket or device (or a folder) where a file was expected."""

    def __init__(self, name: str, status: int = 400) -> None:
        super().__init__(status, "not_a_file",
                         f"'{shown(name)}' is not a file (it is a folder, a pipe, a socket or a device) "
                         "and cannot be opened as one.")


def open_regular(dir_fd: int, name: str) -> int:
    """A read-only fd of the regular file `name` in `dir_fd`. Opening never
    blocks (O_NONBLOCK: a FIFO with no writer would wait forever) and
    anything but a regular file is refused with NotAFile after an fstat of
    what was actually opened, so a file swapped for a FIFO in between is
    caught too."""
    return _open_regular(dir_fd, name)[0]


def read_regular(dir_fd: int, name: str, limit: int | None = None) -> tuple[bytes | None, os.stat_result]:
    """(content, stat) of the regular file `name`, refused as open_regular
    refuses; content is None when the file is larger than `limit`. Read
    with os.read: a buffered file object costs five more system calls."""
    fd, st = _open_regular(dir_fd, name)
    try:
        if limit is not None and st.st_size > limit:
            return None, st
        chunks: list[bytes] = []
        while chunk := os.read(fd, max(st.st_size + 1, 1 << 16)):
            chunks.append(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def _open_regular(dir_fd: int, name: str) -> tuple[int, os.stat_result]:
    try:
        fd = open_file(dir_fd, name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as e:
        if e.errno in (errno.ENXIO, errno.EISDIR, errno.EOPNOTSUPP):  # a socket, a folder
            raise NotAFile(name) from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotAFile(name)
    return fd, st


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def shown(name: str) -> str:
    """`name` as text a client can display: bytes that are not UTF-8 (kept
    by Python as surrogates) appear as \\xNN escapes."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def is_plain(name: str) -> bool:
    """A name the API could address: UTF-8 and acceptable to `parse`."""
    return shown(name) == name and name_problem(name) is None
