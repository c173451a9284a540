"""A folder as a zip, made while it is sent.

Memory stays at about one chunk whatever the folder holds. What can be
known before the first byte is sent is tested first, with a metadata-only
walk: depth, number of entries and total size, so a folder the zip cannot
carry is refused with a clear error while the answer can still be one.
Only regular files go in (never a FIFO, socket or device: they are left
out); names that are not UTF-8 go in escaped. If anything still fails
while the zip is being sent, the generator raises, and the handler breaks
the connection so the browser reports a failed download.
"""
import os
import stat
import time
import zipfile
from typing import Iterator

from ..errors import Refused
from . import paths
from .walk import FILE, Walk

MAX_ENTRIES = 20_000
MAX_BYTES = 4 << 30
CHUNK = 256 << 10


def _reserved(name: str) -> bool:
    return name.startswith(paths.RESERVED_PREFIX)


def refuse_unzippable(dir_fd: int) -> None:
    """Refuse (before any byte is sent) a folder too deep, too full or too
    large to zip."""
    total = 0
    for event, _, _, st in Walk(dir_fd, max_depth=paths.MAX_DEPTH, max_entries=MAX_ENTRIES, skip=_reserved):
        if st is not None and event == FILE and stat.S_ISREG(st.st_mode):
            total += st.st_size
            if total > MAX_BYTES:
                raise Refused(409, "too_large", f"This folder holds more than {MAX_BYTES >> 30} GiB: "
                                                "download smaller folders one at a time.")


def chunks(dir_fd: int) -> Iterator[bytes]:
    """The bytes of a zip of the folder `dir_fd`, in chunks; each `next()`
    blocks (the handler runs it in the file executor)."""
    sink = _ChunkSink()
    sent = 0
    zf = zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=5)
    walk = Walk(dir_fd, max_depth=paths.MAX_DEPTH, max_entries=MAX_ENTRIES, skip=_reserved)
    for event, cur, name, st in walk:
        if st is None or event != FILE or not stat.S_ISREG(st.st_mode):
            continue
        try:
            src = paths.open_regular(cur, name)
        except (OSError, paths.BadPath):
            continue  # vanished or swapped for something else meanwhile
        with open(src, "rb") as f:
            st = os.fstat(f.fileno())
            sent += st.st_size
            if sent > MAX_BYTES:
                raise Refused(409, "too_large", "The folder grew while it was being zipped.")
            left = st.st_size  # what the file held when opened: a growing file cannot stretch the zip
            with zf.open(_zipinfo(paths.shown(walk.path(name)), st), "w") as dst:
                while left > 0:
                    block = f.read(min(CHUNK, left))
                    if not block:
                        break
                    left -= len(block)
                    dst.write(block)
                    if sink.size() >= CHUNK:
                        yield sink.take()
        if sink.size():
            yield sink.take()
    zf.close()
    if sink.size():
        yield sink.take()


class _ChunkSink:
    """A write-only, unseekable stream that zipfile writes into and the
    generator empties chunk by chunk."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._size = 0
        self._written = 0

    def write(self, b: bytes) -> int:
        self._parts.append(bytes(b))
        self._size += len(b)
        self._written += len(b)
        return len(b)

    def tell(self) -> int:
        return self._written

    def flush(self) -> None:
        pass

    def close(self) -> None:
        """Nothing to close (zipfile closes only what it opened; its stubs ask for it)."""

    def size(self) -> int:
        return self._size

    def take(self) -> bytes:
        data = b"".join(self._parts)
        self._parts, self._size = [], 0
        return data


def _zipinfo(name: str, st: os.stat_result) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, time.localtime(max(st.st_mtime, 315532800))[:6])
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    info.file_size = st.st_size
    return info
