"""Small JSON records the store keeps for itself on STORAGE_ROOT (usage,
trash), each replaced atomically: a reader sees the old or the new one."""
import json
import os
import secrets
from typing import Any

from . import paths


def read(dir_fd: int, name: str) -> Any:
    """The record `name` in `dir_fd`, or None if missing or unreadable."""
    try:
        return json.loads(paths.read_regular(dir_fd, name)[0] or b"")  # no limit: never None
    except (FileNotFoundError, ValueError):
        return None


def write(dir_fd: int, name: str, value: object) -> None:
    temp = f"{paths.RESERVED_PREFIX}-{secrets.token_hex(6)}"
    fd = paths.open_file(dir_fd, temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        try:
            paths.write_all(fd, json.dumps(value).encode())
        finally:
            os.close(fd)
        os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        # A full disk fails the write: the half-written temporary goes, or
        # every failed write would leave one more behind.
        try:
            os.unlink(temp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
