"""The runs of one worker: who has an IDE open, the sandbox kept ready for
each student, and every run's life from the Run button to its exit.

A run (a `Job`) goes through explicit states, and whatever it holds is
given back in one place (`_end`), whichever state it ends in:

    preparing  the student's run lock is claimed if their session is still
               live (PostgreSQL, one statement: one run per student across
               tabs, workers and hosts) and their ready sandbox taken
    ready      it waits for a place among the host's running programs
    running    the program runs (run.py)
    ending     the sandbox goes to the student's next run, or is killed as
               a whole and its cgroup removed
    ended      the place, the lock and the counters are given back; only
               then does the last message go out, so Run pressed right
               after it is never refused as already running

One sandbox per student is kept started ahead of time on a worker, shared
by all their tabs there; a student may have RUN_SOCKETS_PER_USER sockets
open on a worker, and a new one closes their oldest idle one. Sessions are
checked again on every `run` and every SESSION_CHECK_SECONDS for every open
socket, so a logout, deactivation or password reset stops the student's
program and closes their sockets on every worker and instance.
"""
import asyncio
import logging
import random
import time
from typing import Callable
from dataclasses import dataclass, field

from .. import metrics
from ..accounts import sessions
from ..accounts.uids import run_uid
from ..errors import Refused
from ..files.store import Area
from ..teaching.activity import error_line
from . import runlock
from .admission import QueueFull
from .disk_guard import DiskGuard
from .protocol import BadFrame, read_frame
from .run import Run
from .sandbox import ProgramLimits

log = logging.getLogger(__name__)

READY_TIMEOUT = 20.0
SESSION_CHECK_SECONDS = 1.0
JOB_END_WAIT = 30.0  # a run being stopped ends within this (its kill is bounded)
MEASURE_EVERY = 1.0  # seconds between walks of a home after runs (see _measure_after_run)
WROTE_MEASURE_NOW = 1 << 20  # a run that wrote this much to files has its home walked at once
CLOSE_SESSION_ENDED = 4401  # WebSocket close codes the IDE acts on (see PROTOCOL.md)
CLOSE_TOO_MANY_TABS = 4002


@dataclass
class Sandboxed:
    """A sandbox whose launcher said ready, and how many runs it may still serve."""
    sandbox: object
    runs_left: int


@dataclass
class Student:
    """A student with at least one socket open on this worker."""
    user: dict
    connections: list = field(default_factory=list)  # oldest first
    warm: asyncio.Future = None  # -> Sandboxed or None: the sandbox kept ready
    disk: tuple = None  # (bytes, files) of their home as last written to the roster
    measured_at: float = -MEASURE_EVERY  # monotonic time of the last walk of their home after a run
    measuring: asyncio.Future = None  # a walk put off to keep to MEASURE_EVERY


class Connection:
    """One open /ws/run, as the manager sees it: `send` a message, `close`
    the socket (the handler's)."""

    def __init__(self, student, token_hash, send, close):
        self.student = student
        self.token_hash = token_hash
        self.send = send
        self.close = close
        self.job = None  # from `run` until its last message
        self.closed = asyncio.Event()
        self.ending = False  # its session ended: it closes once its run has


class Job:
    """One press of Run."""

    def __init__(self, conn, parts, args, cols, rows, etag=None):
        self.conn, self.parts, self.args, self.cols, self.rows = conn, parts, args, cols, rows
        self.etag = etag  # the version the editor shows: nothing else may run
        self.state = "preparing"
        self.claim = None  # the run lock's id, once held
        self.admitted = False  # holds a place among the host's running programs
        self.sandboxed = None
        self.run = None
        self.done = asyncio.Event()  # its last message is out


def refusal(code, message):
    return {"type": "error", "error": code, "message": message}


SANDBOX_FAILED = refusal("sandbox_failed", "The sandbox could not start. Tell your teacher.")


class RunManager:
    def __init__(self, ctx):
        self.ctx = ctx
        self.students = {}  # user id -> Student
        self.jobs = set()
        self.tasks = set()  # awaited at shutdown: runs, discards of sandboxes

    # -- sockets ------------------------------------------------------------

    def open(self, user: dict, token_hash: bytes, send: Callable, close: Callable) -> "Connection | None":
        """A socket opened: its Connection, or None when the student has too
        many open here and none of them can give way."""
        student = self.students.get(user["id"])
        if student is None:
            student = self.students[user["id"]] = Student(user)
        limit = self.ctx.cfg.RUN_SOCKETS_PER_USER
        if len(student.connections) >= limit:
            idle = [c for c in student.connections if c.job is None]
            if not idle:
                return None
            idle[0].close(CLOSE_TOO_MANY_TABS, "The IDE was opened in another tab.")
            self._forget(idle[0], replaced=True)
        conn = Connection(student, token_hash, send, close)
        student.connections.append(conn)
        metrics.SOCKETS.inc()
        self._tell_teaching("student_online", user, True)
        self._warm_up(student)
        return conn

    def closed(self, conn: Connection) -> None:
        """The socket closed, however: its run is stopped; the student's
        sandbox goes when their last socket here does."""
        if conn.closed.is_set():
            return
        conn.closed.set()
        if conn.job and conn.job.run:
            self._track(conn.job.run.stop("killed"))
        self._forget(conn)

    def _forget(self, conn, replaced=False):
        """The socket is gone; so is its student here once it was their last
        (unless a new socket replaces it) and no run of theirs is ending."""
        conn.closed.set()
        student = conn.student
        if conn in student.connections:
            student.connections.remove(conn)
            metrics.SOCKETS.dec()
            self._tell_teaching("student_online", student.user, False)
        if replaced:
            return
        if not student.connections and not any(j.conn.student is student for j in self.jobs):
            self.students.pop(student.user["id"], None)
            self._discard_warm(student)

    # -- runs -----------------------------------------------------------------

    def start(self, conn: Connection, parts: tuple[str, ...], args: list[str], cols: int, rows: int,
              etag: str | None = None) -> None:
        if conn.job is not None:
            raise Refused(409, "already_running", "A program is already running here. Stop it first.")
        job = conn.job = Job(conn, parts, args, cols, rows, etag)
        self._track(self._run(job))

    def running(self, conn: Connection) -> Run | None:
        """The Run of the socket's program, or None."""
        return conn.job.run if conn.job else None

    async def _run(self, job):
        self.jobs.add(job)
        try:
            try:
                message = await self._go(job)
            except Refused as e:
                message = refusal(e.code, e.message)
            except Exception:
                log.exception("a run failed")
                message = refusal("internal_error", "Something went wrong on the server. It has been logged.")
            finally:
                await self._end(job)
        finally:
            self.jobs.discard(job)
            job.conn.job = None
        if job.run is not None:  # the program started: the teacher's view hears how it ended
            ended = message if message and message.get("type") == "exit" else {"type": "exit", "reason": "sandbox_lost"}
            self._tell_teaching("run_ended", job.conn.student.user, ended, error_line(job.run.stderr_tail))
        if message:
            await job.conn.send(message)
        if job.run is not None:
            guard = job.run.disk_guard
            # It may have written, made, renamed or deleted files: the open IDEs look again.
            self.ctx.files.changes.announce(Area.home(job.conn.student.user["username"]).key, "program",
                                            by="program")
            await self._measure_after_run(job.conn, now=guard is not None and guard.wrote() >= WROTE_MEASURE_NOW)
        job.done.set()
        if job.conn.closed.is_set():
            self._forget(job.conn)  # the last job of a student who left: their sandbox goes now
        else:
            self._warm_up(job.conn.student)

    async def _go(self, job):
        """preparing → ready → running: the exit message, or a refusal."""
        ctx, conn = self.ctx, job.conn
        user = conn.student.user
        area = Area.home(user["username"])
        # A file, in a home within its quota:
        used = await ctx.files.check_runnable(user["username"], area, job.parts)
        claim = f"{id(job):x}-{time.monotonic_ns():x}"
        claimed = await runlock.claim(ctx.pool, user["username"], claim, conn.token_hash)
        if claimed == "session_ended":
            self._end_session(conn)  # once this refusal is out
            return refusal("session_ended", "Your session has ended. Log in again.")
        if claimed == "busy":
            return refusal("already_running", "You already have a program running (in another tab or "
                                              "window). Stop it there first.")
        job.claim = claim
        job.sandboxed = await self._take_sandbox(conn.student)
        if job.sandboxed is None:
            return SANDBOX_FAILED
        if conn.closed.is_set():
            return None

        job.state = "ready"  # a place in the host's line, once the sandbox is ready
        queued_at = time.monotonic()
        try:
            job.admitted = await self._admit(conn)
        except QueueFull:
            return refusal("server_busy", "The server is busy. Try again in a moment.")
        if not job.admitted:
            return None  # the socket closed while it waited
        metrics.RUN_QUEUE_WAIT.observe(time.monotonic() - queued_at)
        if ctx.draining:  # shutdown stopped the runs it found: this one must not start after it
            return refusal("server_restart", "The server is restarting. Run it again in a moment.")

        job.state = "running"
        job.run = Run(ctx.cfg, job.sandboxed.sandbox, conn.send, disk_check=lambda: self._over_quota(area),
                      disk_guard=self._disk_guard(job.sandboxed.sandbox, area, used))
        job.sandboxed.runs_left -= 1
        if job.sandboxed.runs_left == 0 and ctx.sandbox.reusable:
            # A sandbox's last run: its successor starts now, ready for the
            # next run. (One that serves one run only is replaced after it,
            # not during it: that would double the sandboxes of a class.)
            self._warm_up(conn.student)
        metrics.RUNS_ACTIVE.inc()
        self._tell_teaching("run_started", user)
        if conn.closed.is_set():
            job.run.stop("killed")
        await conn.send({"type": "started", "run_id": job.run.id})
        message = await job.run.execute("/".join(job.parts), job.args, job.cols, job.rows, job.etag)
        metrics.RUN_DURATION.observe(message["duration"])
        metrics.RUN_EXITS.labels(message["reason"]).inc()
        return message

    async def _admit(self, conn):
        """Wait for a place; False if the socket closed first."""
        admission = self.ctx.admission

        async def queued(position):
            metrics.RUN_QUEUE.set(len(admission.waiting))
            await conn.send({"type": "queued", "position": position})
        entering = asyncio.ensure_future(admission.enter(queued))
        closing = asyncio.ensure_future(conn.closed.wait())
        try:
            await asyncio.wait([entering, closing], return_when=asyncio.FIRST_COMPLETED)
        finally:
            closing.cancel()
            if not entering.done():
                entering.cancel()  # gives the place on if it came just now
                await asyncio.gather(entering, return_exceptions=True)
            metrics.RUN_QUEUE.set(len(admission.waiting))
        if entering.cancelled():
            return False
        entering.result()  # QueueFull
        return True

    async def _end(self, job):
        """ending → ended: give back whatever the job holds."""
        job.state = "ending"
        student, sandboxed = job.conn.student, job.sandboxed
        if job.run is not None:
            metrics.RUNS_ACTIVE.dec()
        if sandboxed is not None:
            keep = job.run is None or (job.run.reusable and sandboxed.runs_left > 0)
            if keep and student.warm is None and student.connections and not self.ctx.draining:
                student.warm = asyncio.ensure_future(self._reuse(sandboxed, fresh=job.run is None))
            else:
                await _discard(sandboxed.sandbox)
        if job.admitted:
            self.ctx.admission.leave()
        if job.claim is not None:
            try:
                await runlock.release(self.ctx.pool, student.user["username"], job.claim)
            except Exception:
                log.exception("could not release the run lock of %s (it goes stale in %d s)",
                              student.user["username"], runlock.STALE)
        job.state = "ended"

    # -- the home's quota ----------------------------------------------------------

    async def _over_quota(self, area):
        """While a program runs: has its home gone over its quota?"""
        username = area.key.split("/", 1)[1]
        return await self.ctx.files.quota_problem(username, area) is not None

    def _disk_guard(self, sandbox, area, used):
        """The run's write budget (disk_guard.py): what the quota leaves of
        `used`; None where the sandbox has no cgroup to count its writes."""
        writes = getattr(sandbox, "writes", None)
        if writes is None or not isinstance(used, int):
            return None
        cfg, username = self.ctx.cfg, area.key.split("/", 1)[1]

        async def room_left():
            return await self.ctx.files.room_left(username, area)
        return DiskGuard(writes, room_left, cfg.QUOTA_BYTES - used, cfg.RUN_FILE_MB << 20)

    async def _measure_after_run(self, conn, now=False):
        """After a run: what the home holds now (the program may have written
        anything), for the student's next save or run and the teacher's
        roster; the student is told at once when it is over its quota. A
        student running again and again has it walked at most every
        MEASURE_EVERY seconds: the walk after the last of those runs is put
        off until then (what a run writes meanwhile is bounded by its limits
        and its own disk watchdog). A run that wrote files has it walked
        `now`: the next run's write budget starts from the record."""
        student = conn.student
        if student.measuring is not None and not now:
            return  # a walk is due, and will see what this run wrote
        wait = student.measured_at + MEASURE_EVERY - time.monotonic()
        if wait <= 0 or now:
            await self._measure_home(conn)
            return

        async def later():
            try:
                await asyncio.sleep(wait)
                await self._measure_home(conn)
            finally:
                student.measuring = None
        student.measuring = self._track(later())

    async def _measure_home(self, conn):
        user, student = conn.student.user, conn.student
        student.measured_at = time.monotonic()
        try:
            used, files, problem = await self.ctx.files.measure(user["username"], Area.home(user["username"]))
            if student.disk != (used, files):  # most runs write nothing: no statement then
                await self.ctx.pool.execute(
                    "UPDATE users SET disk_bytes = $2, disk_files = $3, disk_measured_at = now() WHERE id = $1",
                    user["id"], used, files)
                student.disk = (used, files)
        except Refused as e:  # busy, or the database away: the next run measures again
            log.info("could not measure the home of %s after a run: %s", user["username"], e.message)
            return
        if problem:
            await conn.send({"type": "notice", "message": problem})

    # -- sandboxes kept ready -------------------------------------------------

    def _warm_up(self, student):
        if student.warm is None and student.connections and not self.ctx.draining:
            student.warm = asyncio.ensure_future(self._new_sandbox(student.user))

    async def _take_sandbox(self, student):
        """The student's ready sandbox (a fresh one if it has none or it failed)."""
        warm, student.warm = student.warm, None
        sandboxed = await warm if warm else None
        return sandboxed or await self._new_sandbox(student.user)

    def _discard_warm(self, student):
        warm, student.warm = student.warm, None
        if warm is not None:
            async def discard():
                sandboxed = await warm
                if sandboxed:
                    await _discard(sandboxed.sandbox)
            self._track(discard())

    async def _reuse(self, sandboxed, fresh):
        """A sandbox back from a run (or one that never ran), once ready again."""
        if fresh or await ready(sandboxed.sandbox):
            if not fresh:
                metrics.SANDBOX_REUSED.inc()
            return sandboxed
        await _discard(sandboxed.sandbox)
        return None

    async def _new_sandbox(self, user):
        """Start a sandbox for `user` and wait until its launcher is ready."""
        ctx = self.ctx
        started = time.monotonic()
        runs = sandbox_runs(ctx.cfg.RUN_SANDBOX_RUNS) if ctx.sandbox.reusable else 1
        try:
            home = await ctx.files.ensure_home(user)
            settings = {"limits": ProgramLimits.from_config(ctx.cfg).__dict__, "nice": 10, "runs": runs}
            sandbox = await ctx.sandbox.prepare(home, run_uid(ctx.cfg, user["id"]), settings)
        except Refused as e:  # the storage's answer (failing, hung): logged once per episode by files/faults.py
            log.info("no %s sandbox for %s now: %s", ctx.sandbox.name, user["username"], e.message)
            return None
        except Exception:
            log.exception("could not start a %s sandbox", ctx.sandbox.name)
            return None
        if not await ready(sandbox):
            await _discard(sandbox)
            log.error("a %s sandbox did not become ready: %s", ctx.sandbox.name,
                      sandbox.diagnostics() or "(it said nothing)")
            return None
        metrics.SANDBOX_START.observe(time.monotonic() - started)
        return Sandboxed(sandbox, runs)

    # -- sessions ---------------------------------------------------------------

    async def check_sessions(self) -> None:
        """Stop the programs and close the sockets of sessions that ended
        (logout, deactivation, password reset, expiry) anywhere."""
        conns = [c for s in self.students.values() for c in s.connections]
        if not conns:
            return
        valid = await sessions.still_valid(self.ctx.pool, {c.token_hash for c in conns})
        for conn in conns:
            if conn.token_hash not in valid:
                self._end_session(conn)

    def _end_session(self, conn):
        """Stop the socket's program (its exit message says why), then close it."""
        if conn.ending:
            return
        conn.ending = True
        job = conn.job
        if job and job.run:
            job.run.stop("logged_out")
        elif job:
            conn.closed.set()  # not running yet: it stops at its next step

        async def close_after_run():
            if job:
                try:
                    await asyncio.wait_for(job.done.wait(), JOB_END_WAIT)
                except asyncio.TimeoutError:
                    pass
            conn.close(CLOSE_SESSION_ENDED, "Your session has ended.")
            self.closed(conn)
        self._track(close_after_run())

    # -- the worker's side ----------------------------------------------------------

    def claims(self) -> list[str]:
        """Run lock ids held by this worker's runs (kept alive by its heartbeat)."""
        return [job.claim for job in self.jobs if job.claim is not None]

    def active_runs(self) -> list[Run]:
        return [job.run for job in self.jobs if job.run is not None]

    async def shutdown(self) -> None:
        """Runs end first (each student is told why) and give back their
        locks; then sockets close and the ready sandboxes go."""
        await asyncio.gather(*(run.stop("server_restart") for run in self.active_runs()))
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=3)
        for student in list(self.students.values()):
            for conn in list(student.connections):
                conn.close(1012, "server restarting")
                self.closed(conn)
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=5)

    def _tell_teaching(self, hook, *args):
        """The live class view's hook `hook` (teaching/service.py): it only
        notes the event for a batched write, so it is not awaited here; a
        failure is logged and never reaches the run or the socket."""
        teaching = getattr(self.ctx, "teaching", None)
        if teaching is None:
            return
        task = asyncio.ensure_future(getattr(teaching, hook)(*args))
        task.add_done_callback(_log_hook_failure)

    def _track(self, coroutine):
        """Run it as a task the worker waits for when it shuts down, so no run
        lock or sandbox is left behind when the database pool closes."""
        task = asyncio.ensure_future(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task


def sandbox_runs(most):
    """How many runs a new sandbox serves: `most`, less up to a fifth at
    random, so that a class that opened the IDE together does not replace
    all its sandboxes at the same run."""
    return max(1, most - random.randrange(most // 5 + 1))


async def ready(sandbox, timeout=READY_TIMEOUT):
    """Wait for the launcher's `ready` frame; False if it ended or broke."""
    try:
        item = await asyncio.wait_for(read_frame(sandbox.stdout), timeout)
    except (asyncio.TimeoutError, BadFrame):
        return False
    if item is None or item[0] != b"R":
        return False
    sandbox.on_ready()
    return True


def _log_hook_failure(task):
    if not task.cancelled() and task.exception() is not None:
        log.error("a live class view hook failed", exc_info=task.exception())


async def _discard(sandbox):
    await sandbox.kill()
    await sandbox.release()
