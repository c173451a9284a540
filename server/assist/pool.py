"""A bounded pool of assist processes (child/) and the line of requests
waiting for one.

Each request has a key (a student and what they ask for). A student has at
most one request per key waiting: a newer one takes the older one's place
in the line, and the older one is answered `superseded` at once, so a
student typing fast costs one computation, not one per keystroke. A
student has at most one request computed at a time: the next process takes
the oldest request of a student it is not already working for, so one
student's slow texts hold one process, never the class's. The line
holds at most `queue_max` requests; a request that waited longer than
`timeout` is answered `busy` without being computed (its student has long
typed on), and one that takes longer than `timeout` in a process gets that
process killed (its process group: jedi's subprocess too) and replaced.
Nothing here blocks the IOLoop: the processes are asyncio subprocesses
spoken to in JSON lines. With a jail (jail.py) each process and its
children go into a cgroup of their own once warm, before any student's
text reaches them, and the cgroup goes with the process.
"""
import asyncio
import json
import logging
import os
import signal
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import psutil

from ..errors import Refused

log = logging.getLogger(__name__)

START_TIMEOUT = 120.0  # seconds a new process may take to start and warm up
IDLE_GROUP_NICE = 19  # the scheduling group of an assist process warming up
ANSWER_GROUP_NICE = 0  # ... and of one that answers: as any session's (its own nice ranks it inside)
ANSWER_BYTES = 4 << 20  # the longest answer line read from a process
RESTART_DELAYS = (0.5, 1, 2, 5, 10, 30)  # after processes that fail in a row
KILL_WAIT = 10.0  # seconds a killed process's end is waited for


class Superseded(Refused):
    def __init__(self):
        super().__init__(409, "superseded", "A newer request of yours took this one's place.")


def busy():
    return Refused(503, "assist_busy", "Editing help is busy: it will come back in a moment.", retry_after=1)


@dataclass
class Job:
    request: dict
    future: asyncio.Future
    queued: float = field(default_factory=time.monotonic)


class Process:
    """One assist process, spoken to one request at a time."""

    def __init__(self, proc):
        self.proc = proc
        self.asked = 0
        self.group = None  # its cgroup, given by the jail

    @classmethod
    async def start(cls, command, env, user, jail=None):
        proc = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env,
            user=user, group=user, extra_groups=[] if user is not None else None,
            start_new_session=True, limit=ANSWER_BYTES)
        process = cls(proc)
        _schedule(proc.pid, os.SCHED_IDLE)
        try:
            ready = await asyncio.wait_for(proc.stdout.readline(), START_TIMEOUT)
            if json.loads(ready or b"null") != {"ready": True}:
                raise RuntimeError(f"it said {ready[:200]!r} instead of being ready")
            _schedule(proc.pid, os.SCHED_OTHER)
            if jail is not None:
                process.group = await asyncio.to_thread(jail.contain, _family(proc.pid))
        except BaseException:
            await process.kill(jail)
            raise
        return process

    async def ask(self, request):
        self.asked += 1
        self.proc.stdin.write(json.dumps({**request, "id": self.asked}).encode() + b"\n")
        await self.proc.stdin.drain()
        line = await self.proc.stdout.readline()
        if not line:
            raise ConnectionError("the assist process ended")
        answer = json.loads(line)
        if answer.get("id") != self.asked:
            raise ConnectionError("the assist process answered out of turn")
        return answer

    async def kill(self, jail=None):
        """Kill it and everything it started, and reap it (once: a reaped
        pid may be another process's by now); its cgroup too. asyncio's
        wait() also waits for its pipes to close, which a process that left
        its group could hold open: the pool waits KILL_WAIT at most, and the
        cgroup's end kills such a process."""
        if self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                await asyncio.wait_for(self.proc.wait(), KILL_WAIT)
            except asyncio.TimeoutError:
                log.error("assist process %d: its pipes were still open %s s after it was killed",
                          self.proc.pid, KILL_WAIT)
        if self.group is not None:
            group, self.group = self.group, None
            await asyncio.to_thread(jail.release, group)


def _family(pid):
    """A process and all its descendants now."""
    try:
        root = psutil.Process(pid)
        return {pid, *(p.pid for p in root.children(recursive=True))}
    except psutil.Error:
        return {pid}


def _schedule(pid, policy):
    """Warming up costs a process seconds of CPU (jedi loads numpy and
    matplotlib), right when a restarted server's class logs in again: it
    warms at SCHED_IDLE and answers at the normal policy (still niced). Its
    session is a scheduling group of its own (autogroup), which the kernel
    weighs against the server's by the group's nice alone: without lowering
    the group too, SCHED_IDLE inside it took a full group's share and the
    warm-up slowed a class's logins and saves. Only root may take a process
    back out of SCHED_IDLE or raise a group again, so elsewhere it is left
    alone."""
    if os.geteuid() != 0:
        return
    for member in _family(pid):  # jedi's own subprocess too
        try:
            os.sched_setscheduler(member, policy, os.sched_param(0))
        except OSError:
            pass  # gone meanwhile
    try:
        with open(f"/proc/{pid}/autogroup", "w") as f:
            f.write(str(IDLE_GROUP_NICE if policy == os.SCHED_IDLE else ANSWER_GROUP_NICE))
    except OSError:
        pass  # no autogroup scheduling here (or the process is gone)


class Pool:
    def __init__(self, size, queue_max, timeout, command, env=None, user=None, jail=None):
        """command(n): the command line of the n-th process; keys are
        (student, what they ask)."""
        self.size, self.queue_max, self.timeout = size, queue_max, timeout
        self.command, self.env, self.user, self.jail = command, env, user, jail
        self.waiting = OrderedDict()  # key -> Job, in the order they came
        self.working_for = set()  # students whose request a process is computing
        self.work = asyncio.Event()
        self.ready = 0  # processes started and warm
        self.tasks = []

    def start(self):
        self.tasks = [asyncio.create_task(self._serve(n)) for n in range(self.size)]

    async def ask(self, key, request):
        """The process's answer to `request` ({"result": ...} or {"error": ...});
        Refused when it was superseded, waited or took too long, or the line is full."""
        older = self.waiting.get(key)
        if older is None and len(self.waiting) >= self.queue_max:
            raise busy()
        job = Job(request, asyncio.get_running_loop().create_future())
        if older is not None and not older.future.done():
            older.future.set_exception(Superseded())
        self.waiting[key] = job  # an older one's place in the line, if it had one
        self.work.set()
        return await job.future

    async def _next(self):
        """The oldest waiting job of a student no process works for; stale
        and settled jobs leave the line on the way."""
        while True:
            now = time.monotonic()
            for key, job in list(self.waiting.items()):
                if job.future.done() or now - job.queued > self.timeout:
                    del self.waiting[key]
                    _settle(job, busy())
                elif key[0] not in self.working_for:
                    del self.waiting[key]
                    return key, job
            self.work.clear()
            await self.work.wait()

    async def _serve(self, n):
        """One process's life: start it (again), answer jobs with it."""
        failures = 0
        while True:
            try:
                process = await Process.start(self.command(n), self.env, self.user, self.jail)
            except Exception as e:
                delay = RESTART_DELAYS[min(failures, len(RESTART_DELAYS) - 1)]
                failures += 1
                log.error("assist process %d could not start (%s); trying again in %s s", n, e, delay)
                await asyncio.sleep(delay)
                continue
            self.ready += 1
            try:
                failures = 0 if await self._answer(process) else failures + 1
            finally:
                self.ready -= 1
                await process.kill(self.jail)

    async def _answer(self, process):
        """Answer jobs until the process must go; whether it served well."""
        while True:
            (student, _), job = await self._next()
            self.working_for.add(student)
            try:
                answer = await asyncio.wait_for(process.ask(job.request), self.timeout)
            except asyncio.CancelledError:  # the server stops
                _settle(job, busy())
                raise
            except asyncio.TimeoutError:
                log.warning("an assist request took over %s s: its process is replaced", self.timeout)
                await process.kill(self.jail)
                _settle(job, Refused(503, "assist_timeout", "Editing help took too long on this text."))
                return True
            except (ConnectionError, ValueError) as e:
                log.error("assist process failed (%s): it is replaced", e)
                _settle(job, busy())
                return False
            finally:
                self.working_for.discard(student)
                self.work.set()  # the student's next request may go now
            _settle(job, answer)

    async def close(self):
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for job in self.waiting.values():
            _settle(job, busy())
        self.waiting.clear()


def _settle(job, outcome):
    if not job.future.done():
        if isinstance(outcome, BaseException):
            job.future.set_exception(outcome)
        else:
            job.future.set_result(outcome)
