"""What a failing storage tells the student, the operator and the log.

A file call can fail because of the storage rather than the request: the
file system turned read-only, an I/O error, the disk full, or no answer at
all (an NFS/EFS mount in a network partition). Each is answered as a
refusal with a plain sentence (`refusal`), never a 500 with a traceback.

`StorageHealth` keeps the storage's condition for /readyz and /api/status:
ok, slow, failing, read_only or full. Failed calls set it at once; a probe
(a small write, fsync and read in a thread of its own, under the same
deadline) sets and clears it. The log gets one line when a condition
begins and one when the storage works again, not one per request.
"""
import asyncio
import errno
import logging
import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..errors import Refused

log = logging.getLogger(__name__)

OK, SLOW, FAILING, READ_ONLY, FULL = "ok", "slow", "failing", "read_only", "full"

# What each condition means, in words for the admin page and the operator.
MESSAGES = {
    OK: "The file storage answers normally.",
    SLOW: "The file storage is slow: a small write and read took over {slow:g} s.",
    FAILING: "The file storage is failing: {detail}.",
    READ_ONLY: "The file storage is read-only: files can be read, nothing can be saved.",
    FULL: "The file storage is full: files can be read, nothing new can be saved.",
}

_IO_ERRORS = {errno.EIO, errno.ESTALE, errno.ENOTCONN, errno.ETIMEDOUT, errno.EHOSTDOWN, errno.EHOSTUNREACH,
              errno.ECONNABORTED, errno.ECONNRESET, errno.EREMOTEIO}


class NotAnswering(Refused):
    """A file call that did not finish within FILE_DEADLINE; `stuck`: refused
    at once because every file process is still stuck in an earlier call
    (that says nothing new of the storage: it may answer again already)."""

    def __init__(self, stuck: bool = False):
        self.stuck = stuck
        super().__init__(503, "storage_not_answering",
                         "The file server is not answering; your text is kept in this browser. "
                         "Wait a minute, then save again.", retry_after=10)


def condition_of(e: OSError) -> str | None:
    """The condition an error of the storage shows, or None (the request's own: ENOENT, EEXIST ...)."""
    if e.errno == errno.EROFS:
        return READ_ONLY
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return FULL
    if e.errno in _IO_ERRORS:
        return FAILING
    return None


def refusal(e: OSError) -> Refused | None:
    """The answer a student gets for a storage error, or None if `e` is not one."""
    condition = condition_of(e)
    if condition == READ_ONLY:
        return Refused(503, "storage_read_only",
                       "The file server can only be read right now, so your change was not saved. Your text is "
                       "kept in this browser; try again in a few minutes.", retry_after=60)
    if condition == FULL:
        # Waiting does not make room: no Retry-After. The code is the one clients know.
        return Refused(507, "storage_full",
                       "The file server is full, so nothing was changed. Your text is kept in this browser; "
                       "tell your teacher.")
    if condition == FAILING:
        return Refused(503, "storage_error",
                       "The file server had an error, so this did not work. Your text is kept in this browser; "
                       "try again in a minute.", retry_after=30)
    return None


class StorageHealth:
    """The storage's condition in this worker, and the probe that measures it."""

    FRESH = 2.0  # seconds a probe's finding stands before the next call probes again

    def __init__(self, root: str, deadline: float):
        self.root = root
        self.deadline = deadline
        self.slow_after = max(1.0, deadline / 5)
        self.condition, self.detail, self.since = OK, "", time.time()
        self._probe: asyncio.Future[float] | None = None  # the probe in flight or last finished
        self._probe_started = 0.0
        # One thread, so a probe stuck in the kernel holds one thread, and the
        # next call sees it still running instead of starting another.
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="storage-probe")
        self._probe_path = os.path.join(root, ".system", "probe", f"{socket.gethostname()}-{os.getpid()}")

    # -- what the calls say ---------------------------------------------------

    def failed(self, condition: str, detail: str, began: float | None = None) -> None:
        """A call or probe met `condition`; logged when it begins. `began`:
        when the call started; one that started before the last change of
        condition is older news than that change, and is not heard (calls
        in flight as the storage changed finished in any order, and the
        condition flipped back and forth, logged each time)."""
        if began is not None and began < self.since:
            return
        if condition != self.condition:
            log.error("file storage %s: %s (logged once until it changes)", condition.replace("_", "-"), detail)
            self.condition, self.detail, self.since = condition, detail, time.time()

    def worked(self, changed: bool, began: float | None = None) -> None:
        """A call or probe was answered: the storage answers again. Only a
        change (a save, the probe's write) shows it is no longer read-only or
        full. `began`: as for `failed`."""
        if self.condition == OK or (self.condition in (READ_ONLY, FULL) and not changed):
            return
        if began is not None and began < self.since:
            return
        log.warning("file storage works again after %.0f s of being %s", time.time() - self.since,
                    self.condition.replace("_", "-"))
        self.condition, self.detail, self.since = OK, "", time.time()

    def slow(self, seconds: float) -> None:
        if self.condition == OK:
            log.warning("file storage slow: a small write and read took %.1f s", seconds)
            self.condition, self.detail, self.since = SLOW, f"{seconds:.1f} s", time.time()

    # -- the probe --------------------------------------------------------------

    async def condition_now(self, budget: float) -> dict[str, Any]:
        """The condition, probed again if the last finding is older than
        FRESH; waits at most `budget` seconds (the probe runs on in its thread)."""
        loop = asyncio.get_running_loop()
        if self._probe is None or (self._probe.done() and loop.time() - self._probe_started > self.FRESH):
            self._probe_started = loop.time()
            self._probe = loop.run_in_executor(self._thread, self._probe_once)
            self._probe.add_done_callback(self._probed)
        if not self._probe.done():
            await asyncio.wait({self._probe}, timeout=budget)  # its outcome is read by _probed
        if not self._probe.done():
            waited = loop.time() - self._probe_started
            if waited > self.deadline:
                self.failed(FAILING, f"a small write and read has not finished in {waited:.0f} s "
                                     "(the file server is not answering)")
            elif waited > self.slow_after:
                self.slow(waited)
        return self.report()

    def _probed(self, probe: "asyncio.Future[float]") -> None:
        try:
            seconds = probe.result()
        except OSError as e:
            self.failed(condition_of(e) or FAILING, f"the probe's write and read failed: {e.strerror or e}")
            return
        except Exception as e:  # anything else: say so rather than lose it
            self.failed(FAILING, f"the probe failed: {e!r}")
            return
        if seconds > self.slow_after and self.condition == OK:
            self.slow(seconds)
        elif seconds <= self.slow_after or self.condition != SLOW:
            # Answered: a probe that was held by a hang finishes late, but it finished.
            self.worked(changed=True)

    def _probe_once(self) -> float:
        """Write, fsync and read back a small file of this worker's own: what a save needs."""
        started = time.monotonic()
        os.makedirs(os.path.dirname(self._probe_path), exist_ok=True)
        data = f"{time.time()}\n".encode()
        fd = os.open(self._probe_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        fd = os.open(self._probe_path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            if os.read(fd, 64) != data:
                raise OSError(errno.EIO, "the probe read back something else than it wrote")
        finally:
            os.close(fd)
        return time.monotonic() - started

    def report(self) -> dict[str, Any]:
        return {"state": self.condition,
                "message": MESSAGES[self.condition].format(slow=self.slow_after, detail=self.detail),
                "since": round(self.since, 3)}

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)
