"""Client paths: validated as text first, then opened without following links.

A path from a client is a string like `lesson1/hello.py`. `parse` turns it
into a tuple of safe names or raises `BadPath` before any file system call.
`open_dir` then walks those names one at a time from an already-open root
folder with O_NOFOLLOW, so a symlink planted anywhere in the path — even one
swapped in by a running program between two checks — is refused rather
than followed. No code here builds a path string and hands it to `open()`.
"""
import errno
import os
import unicodedata

from ..errors import Refused

MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 1024
MAX_DEPTH = 32
# Names the storage layer uses for itself inside users' folders.
RESERVED_PREFIX = ".~pyc"


class BadPath(Refused):
    """The client path is not acceptable; `code` names why."""

    def __init__(self, code, message):
        super().__init__(400, code, message)


def name_problem(name):
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


def parse(path, allow_root=True):
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


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_root(path):
    return os.open(path, _DIR_FLAGS)


def open_dir(root_fd, parts, create=False, owner=None):
    """An fd of the folder `parts` below `root_fd`, never crossing a symlink.
    With `create`, missing folders are made (mode 0755, owned by `owner`,
    a (uid, gid), when given)."""
    fd = os.dup(root_fd)
    try:
        for name in parts:
            try:
                next_fd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(name, 0o755, dir_fd=fd)
                    if owner:
                        os.chown(name, *owner, dir_fd=fd, follow_symlinks=False)
                except FileExistsError:
                    pass
                next_fd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        return fd
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise BadPath("not_a_folder", "a part of the path is a link or a file, not a folder") from None
        raise


def open_file(dir_fd, name, flags=os.O_RDONLY):
    """Open `name` in `dir_fd`; a symlink there is refused, not followed."""
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise BadPath("symlink", "links are not followed") from None
        raise
