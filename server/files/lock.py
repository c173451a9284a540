"""The lock of one area, which every change to it holds.

It must exclude every other writer: the other threads of this worker and
other processes and hosts. An fcntl lock alone does not do the first part:
it belongs to the process, so the worker's threads never exclude each
other, and closing any descriptor of the lock file in one thread drops the
lock another thread still relies on. So each area has a lock in memory as
well, taken first; only its holder opens the lock file, takes the fcntl
lock on it (NFSv4 and EFS honour these across hosts) and closes it when
done. An entry of the table lives only while someone holds or waits for
it, so the table stays as small as the number of areas being changed.
"""
import fcntl
import os
import threading
from contextlib import contextmanager
from typing import Any, Iterator

from . import paths

_table_guard = threading.Lock()
_table: dict[str, list[Any]] = {}  # lock file (absolute path) -> [threading.Lock, holders and waiters]


@contextmanager
def area_lock(locks_fd: int, name: str, key: str) -> Iterator[None]:
    """Hold the lock file `name` in the folder `locks_fd`; `key` names that
    file uniquely in this process (its absolute path)."""
    with _table_guard:
        entry = _table.setdefault(key, [threading.Lock(), 0])
        entry[1] += 1
    try:
        with entry[0]:
            fd = paths.open_file(locks_fd, name, os.O_RDWR | os.O_CREAT)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # releases the fcntl lock; no other thread has this file open
    finally:
        with _table_guard:
            entry[1] -= 1
            if not entry[1]:
                del _table[key]


def held() -> int:
    """How many areas are locked or waited for in this process (for tests)."""
    with _table_guard:
        return len(_table)
