"""The store's calls, run in processes of the worker's own.

A file call is a chain of short system calls (a save makes about 55), and a
Python thread hands the interpreter lock over at each of them. In the file
threads of a busy worker those hand-overs to and from the IOLoop were most
of a save's cost: perf found over half of the worker's CPU in futex waits
and wake-ups. A file process has an interpreter of its own: the worker sends
it one message per call and reads one answer.

Each process makes one call at a time, so a worker has FILE_PROCESSES calls
running at once (on EFS, where every call waits milliseconds, raise it).
Calls wait for a free process in arrival order; at most `max_pending` wait
or run, and one more is refused at once with `Busy` (a 503 to retry). The
processes run at a lower priority than the worker, so a busy machine
answers the requests it has before it takes more work in.

A process that dies mid-call (killed, out of memory) fails that call with a
503; the call may or may not have taken effect, as when a connection drops,
and a save is atomic either way. A new process takes its place. A process
exits when the worker closes its socket, or dies.

Each process runs child.py.
"""
import asyncio
import json
import logging
import pickle
import socket
import sys
import time
from dataclasses import asdict

from .. import timing
from ..errors import Refused
from ..executor import Busy
from . import child
from .child import frame
from .store import Store

log = logging.getLogger(__name__)

RESPAWN_WAIT = 1.0  # seconds between attempts to replace a process that died


class _Process:
    def __init__(self, popen, reader, writer):
        self.popen, self.reader, self.writer = popen, reader, writer

    async def call(self, request):
        """Send a framed request; the answer's pickle."""
        self.writer.write(request)
        size = int.from_bytes(await self.reader.readexactly(4), "big")
        return await self.reader.readexactly(size)

    def close(self):
        self.writer.close()


class FileProcesses:
    def __init__(self, store: Store, count: int, max_pending: int):
        self.store = store  # the worker's own: its root and limits are the processes'
        self.count = count
        self.max_pending = max_pending
        self.pending = 0
        self._idle = asyncio.Queue()  # processes waiting for a call; callers wait on it in order
        self._watching = {}  # process -> the task that replaces it when it exits
        self._closed = False

    async def start(self) -> None:
        for process in await asyncio.gather(*(self._spawn() for _ in range(self.count))):
            self._idle.put_nowait(process)

    async def _spawn(self):
        ours, theirs = socket.socketpair()
        settings = json.dumps({"root": self.store.root, "limits": asdict(self.store.limits)})
        try:
            popen = await asyncio.create_subprocess_exec(
                sys.executable, "-m", child.__name__, str(theirs.fileno()), settings,
                pass_fds=(theirs.fileno(),), stdin=asyncio.subprocess.DEVNULL)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        reader, writer = await asyncio.open_unix_connection(sock=ours)
        process = _Process(popen, reader, writer)
        self._watching[process] = asyncio.ensure_future(self._watch(process))
        return process

    async def _watch(self, process):
        """Replace the process once it exits (killed, out of memory)."""
        await process.popen.wait()
        process.close()
        del self._watching[process]
        if self._closed:
            return
        log.error("a file process exited (status %s); starting another", process.popen.returncode)
        while not self._closed:
            try:
                self._idle.put_nowait(await self._spawn())
                return
            except Exception:
                log.exception("could not start a file process; trying again")
                await asyncio.sleep(RESPAWN_WAIT)

    async def run(self, method: str, *args):
        """store.<method>(*args) in a file process; the seconds spent waiting
        for one and in the call count as the request's `fs_wait` and `fs`."""
        if self.pending >= self.max_pending:
            raise Busy("fs")
        request = frame((method, args))
        self.pending += 1
        queued = time.perf_counter()
        try:
            process = await self._idle.get()
            while process.popen.returncode is not None or process.reader.at_eof():  # it died idle: replaced
                process = await self._idle.get()
            started = time.perf_counter()
            timing.add("fs_wait", started - queued)
            # Shielded: a caller that gives up must not leave an answer
            # unread, for the process's next call to take as its own.
            call = asyncio.ensure_future(self._call(process, request))
            call.add_done_callback(_retrieved)
            answer = await asyncio.shield(call)
            timing.add("fs", time.perf_counter() - started)
        finally:
            self.pending -= 1
        ok, result = pickle.loads(answer)
        if not ok:
            raise result
        return result

    async def _call(self, process, request):
        try:
            answer = await process.call(request)
        except (asyncio.IncompleteReadError, ConnectionError):
            if process.popen.returncode is None:
                process.popen.kill()  # it broke off mid-answer: never trust it again
            raise Refused(503, "file_process_lost", "The server lost track of this file operation. Try again.",
                          retry_after=1) from None
        self._idle.put_nowait(process)
        return answer

    async def close(self) -> None:
        """Close every socket: each process ends its call, then exits."""
        self._closed = True
        processes = list(self._watching)
        for process in processes:
            process.close()
        for process in processes:
            try:
                await asyncio.wait_for(process.popen.wait(), timeout=5)
            except asyncio.TimeoutError:
                process.popen.kill()
                await process.popen.wait()


def _retrieved(task):
    if not task.cancelled():
        task.exception()  # read, so that a call whose caller gave up is not reported as lost
