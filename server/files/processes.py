"""The store's operations, made in processes of the worker's own.

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

Every call has a deadline (FILE_DEADLINE, waiting for a process included):
a storage that hangs (an NFS/EFS mount in a network partition) leaves the
process asleep in the kernel, where even SIGKILL takes effect only once the
storage answers. Such a process is killed and abandoned, not waited on: the
caller gets `NotAnswering` (a 503 saying so) and a new process takes its
place, so other students' calls go to processes that answer. A new process
takes calls only once it has made its store, which touches the storage;
while the storage hangs it waits there, and calls wait for a process only until
their deadline, or not at all while every process is stuck or starting
with some stuck (the storage hangs: nothing can be done until it answers,
and a new process that has made its store is the sign that it does). At
most `count` abandoned processes are kept waiting for their exit; beyond
that no more are started until one exits, so a storage that stays hung
costs a bounded number of processes.

Each process runs child/ (python -m server.files.child); a call names
its operation by a protocol.Op, and the process makes only those in its
table (child/protocol.py).
"""
import asyncio
import json
import logging
import pickle
import socket
import sys
import time
from dataclasses import asdict
from typing import Any

from .. import timing
from ..errors import Refused
from ..executor import Busy
from . import child
from .child.protocol import Op, frame
from .faults import NotAnswering
from .store import Store

log = logging.getLogger(__name__)

RESPAWN_WAIT = 1.0  # seconds between attempts to replace a process that died


class _Process:
    def __init__(self, popen: asyncio.subprocess.Process, reader: asyncio.StreamReader,
             writer: asyncio.StreamWriter) -> None:
        self.popen, self.reader, self.writer = popen, reader, writer
        self.ready = False  # it has made its store and takes calls
        self.abandoned = False  # killed after missing a deadline: never given a call again

    async def call(self, request: bytes) -> bytes:
        """Send a framed request; the answer's pickle."""
        self.writer.write(request)
        return await self.answer()

    async def answer(self) -> bytes:
        size = int.from_bytes(await self.reader.readexactly(4), "big")
        return await self.reader.readexactly(size)

    def close(self) -> None:
        self.writer.close()


class FileProcesses:
    def __init__(self, store: Store, count: int, max_pending: int):
        self.store = store  # the worker's own: its root and limits are the processes'
        self.count = count
        self.max_pending = max_pending
        self.pending = 0
        # Ready processes waiting for a call; callers wait on it in order.
        self._idle: asyncio.Queue[_Process] = asyncio.Queue()
        self._live: set[_Process] = set()  # processes starting, idle or in a call (at most `count`)
        self._stuck: set[_Process] = set()  # abandoned processes not yet exited (at most `count`)
        self._starting: set[asyncio.Task[None]] = set()  # tasks starting a process
        self._spawning = 0  # of those, the ones whose process is not yet in _live
        self._watching: dict[_Process, asyncio.Future[None]] = {}  # process -> the task that notices its exit
        self._closed = False

    async def start(self) -> None:
        processes = await asyncio.gather(*(self._spawn() for _ in range(self.count)))
        for process in processes:
            await process.answer()  # "ready"
            process.ready = True
            self._idle.put_nowait(process)

    async def _spawn(self) -> _Process:
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
        self._live.add(process)
        self._watching[process] = asyncio.ensure_future(self._watch(process))
        return process

    async def _watch(self, process: _Process) -> None:
        """Notice the process's exit (killed, out of memory, abandoned) and fill its place."""
        await process.popen.wait()
        process.close()
        del self._watching[process]
        if process.abandoned:
            self._stuck.discard(process)
        elif process in self._live:
            self._live.discard(process)
            if not self._closed and process.ready:  # one that failed to start is reported by _start_one
                log.error("a file process exited (status %s); starting another", process.popen.returncode)
        self._fill()

    def _fill(self) -> None:
        """Start processes until `count` are live, unless `count` are stuck."""
        while self._wanted():
            self._spawning += 1
            task = asyncio.ensure_future(self._start_one())
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    def _wanted(self) -> bool:
        return (not self._closed and len(self._live) + self._spawning < self.count
                and len(self._stuck) < self.count)

    async def _start_one(self) -> None:
        """One process, given calls once it is ready; tried again until it is
        (or no longer wanted). Counted in `_spawning` until it is in `_live`."""
        quiet = False
        while True:
            process = None
            try:
                try:
                    process = await self._spawn()
                finally:
                    self._spawning -= 1
                await process.answer()  # "ready": waits while the storage hangs
            except Exception as e:
                if process is not None:
                    self._live.discard(process)
                    if process.popen.returncode is None:
                        process.popen.kill()
                if not quiet:  # once per streak: the storage may be failing for minutes
                    log.error("could not start a file process (%r); trying again every %g s quietly", e,
                              RESPAWN_WAIT)
                    quiet = True
                await asyncio.sleep(RESPAWN_WAIT)
                if not self._wanted():
                    return
                self._spawning += 1
                continue
            process.ready = True
            self._idle.put_nowait(process)
            return

    def _abandon(self, process: _Process) -> None:
        """Kill a process that missed a deadline; it leaves when the kernel lets it."""
        if process.abandoned:
            return
        if not self._stuck:
            log.warning("a file call missed its deadline; its file process is replaced (further ones quietly "
                        "while any is stuck)")
        process.abandoned = True
        self._live.discard(process)
        self._stuck.add(process)
        if process.popen.returncode is None:
            process.popen.kill()
        process.close()
        self._fill()

    async def call(self, op: Op, *args: object, deadline: float | None = None) -> Any:
        """The operation `op` with `args` in a file process (its result: what
        the store's method returns), answered by the loop time
        `deadline` or refused with NotAnswering; the seconds spent waiting for
        a process and in the call count as the request's `fs_wait` and `fs`."""
        if self.pending >= self.max_pending:
            raise Busy("fs")
        loop = asyncio.get_running_loop()
        request = frame((op, args))
        self.pending += 1
        queued = time.perf_counter()
        try:
            process = await self._take(deadline)
            started = time.perf_counter()
            timing.add("fs_wait", started - queued)
            # Shielded: a caller that gives up must not leave an answer
            # unread, for the process's next call to take as its own.
            call = asyncio.ensure_future(self._call(process, request))
            call.add_done_callback(_retrieved)
            try:
                answer = await asyncio.wait_for(asyncio.shield(call), None if deadline is None
                                                else max(0, deadline - loop.time()))
            except asyncio.TimeoutError:
                if not call.done():
                    self._abandon(process)
                    raise NotAnswering() from None
                answer = call.result()
            timing.add("fs", time.perf_counter() - started)
        finally:
            self.pending -= 1
        ok, result = pickle.loads(answer)
        if not ok:
            raise result
        return result

    async def _take(self, deadline: float | None) -> _Process:
        """A ready process, or NotAnswering at the deadline (every process busy or stuck)."""
        loop = asyncio.get_running_loop()
        while True:
            if self._stuck and not any(p.ready for p in self._live):
                # Every process is stuck in the storage or waiting for it to
                # start: no call can be made until it answers, so say so now
                # rather than at the deadline (and hold no request meanwhile).
                raise NotAnswering(stuck=True)
            try:
                process = await asyncio.wait_for(self._idle.get(), None if deadline is None
                                                 else max(0, deadline - loop.time()))
            except asyncio.TimeoutError:
                raise NotAnswering() from None
            if process.abandoned or process.popen.returncode is not None or process.reader.at_eof():
                continue  # it died idle: replaced
            return process

    async def _call(self, process: _Process, request: bytes) -> bytes:
        try:
            answer = await process.call(request)
        except (asyncio.IncompleteReadError, ConnectionError):
            if process.popen.returncode is None:
                process.popen.kill()  # it broke off mid-answer: never trust it again
            raise Refused(503, "file_process_lost", "The server lost track of this file operation. Try again.",
                          retry_after=1) from None
        if not process.abandoned:
            self._idle.put_nowait(process)
        return answer

    async def close(self) -> None:
        """Close every socket: each process ends its call, then exits."""
        self._closed = True
        for task in list(self._starting):
            task.cancel()
        processes = list(self._watching)
        for process in processes:
            process.close()
        for process in processes:
            try:
                await asyncio.wait_for(process.popen.wait(), timeout=5)
            except asyncio.TimeoutError:
                process.popen.kill()
                try:  # a process asleep in a hung storage's call leaves only when it answers
                    await asyncio.wait_for(process.popen.wait(), timeout=5)
                except asyncio.TimeoutError:
                    log.warning("file process %d is stuck in the kernel; leaving it", process.popen.pid)


def _retrieved(task: "asyncio.Future[bytes]") -> None:
    if not task.cancelled():
        task.exception()  # read, so that a call whose caller gave up is not reported as lost
