"""The IDE sockets of one worker: who has an IDE open, their tabs, and the
session re-look; a socket's `run` becomes a job (job.py), whose sink the
socket is.

A student may have RUN_SOCKETS_PER_USER sockets open on a worker, and a new
one closes their oldest idle one. While a student has one open here, a
sandbox is kept ready for them (warm.py). Sessions are looked up again on
every `run` (when the job claims its lock) and every SESSION_LOOK_SECONDS
for every open socket, so a logout, deactivation or password reset stops
the student's program and closes their sockets on every worker and
instance.
"""
import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol

from .. import metrics
from ..accounts import sessions
from ..errors import Refused
from ..files.area import Area
from .debugging import DebugSession
from .job import Job, Jobs, RunRequest, RunSink, State
from .run import Run
from .scratch import ScratchSandbox
from .spec import RunSpec

log = logging.getLogger(__name__)

SESSION_LOOK_SECONDS = 1.0
JOB_END_WAIT = 30.0  # a run being stopped ends within this (its kill is bounded)
CLOSE_SESSION_ENDED = 4401  # WebSocket close codes the IDE acts on (see docs/run-protocol.md)
CLOSE_TOO_MANY_TABS = 4002


Send = Callable[[dict[str, Any]], Awaitable[None]]  # a message to the socket's IDE
Close = Callable[[int, str], None]  # close the socket with a WebSocket code and reason


class Attempt(Protocol):
    """An attempt under way, as a socket sees it (checks/grader.py's)."""

    done: asyncio.Event  # set once its result is out


class Grader(Protocol):
    """What the sockets ask of checks/grader.py's Grader (which imports this
    package, so it is named here by what it does)."""

    def start(self, user: dict[str, Any], session: bytes, class_id: int, slug: str, etag: str | None,
              sink: RunSink, area: Area | None = None) -> Attempt:
        """Start an attempt whose messages go to `sink` (of the file in the
        exam folder `area`, or in the home)."""

    def prepare(self, user: dict[str, Any]) -> None:
        """Start the sandbox of `user`'s next attempt now."""

    def forget(self, user: dict[str, Any]) -> None:
        """`user` has no IDE open here any more."""

    async def close(self) -> None:
        """The worker stops."""


@dataclass
class Student:
    """A student with at least one socket open on this worker."""
    user: dict[str, Any]
    connections: "list[Connection]" = field(default_factory=list)  # oldest first


class Connection:
    """One open /ws/run, as the manager sees it: the sink of its jobs. `send`
    a message, `close` the socket (the handler's)."""

    def __init__(self, student: Student, token_hash: bytes, send: Send, close: Close) -> None:
        self.student = student
        self.token_hash = token_hash
        self.send = send
        self.close = close
        self.job: Job | None = None  # its latest job
        self.attempt: Attempt | None = None  # its latest attempt (server/checks/grader.py)
        self.gone = asyncio.Event()  # the socket closed (or is closing): its run stops
        self.ending = False  # its session ended: it closes once its run has

    @property
    def busy(self) -> bool:
        """A program or an attempt of this socket's is under way."""
        return (self.job is not None and self.job.state is not State.ENDED) or \
            (self.attempt is not None and not self.attempt.done.is_set())


class Reply:
    """A socket as the sink of what one of its messages asked for: every
    message sent names that message's id as `re` (docs/run-protocol.md),
    unless it already names another (a debugger's command's pause)."""

    def __init__(self, conn: Connection, re: str | None) -> None:
        self.conn, self.re = conn, re
        self.gone = conn.gone

    async def send(self, message: dict[str, Any]) -> None:
        await self.conn.send(message if self.re is None or "re" in message else {**message, "re": self.re})


class RunManager:
    def __init__(self, jobs: Jobs, grader: Grader | None = None) -> None:
        self.jobs = jobs
        self.grader = grader  # checks.grader.Grader: the attempts asked for on these sockets
        self.students: dict[int, Student] = {}  # user id -> Student

    # -- sockets ------------------------------------------------------------

    def open(self, user: dict[str, Any], token_hash: bytes, send: Send, close: Close) -> "Connection | None":
        """A socket opened: its Connection, or None when the student has too
        many open here and none of them can give way."""
        student = self.students.get(user["id"])
        if student is None:
            student = self.students[user["id"]] = Student(user)
        limit = self.jobs.cfg.RUN_SOCKETS_PER_USER
        if len(student.connections) >= limit:
            idle = [c for c in student.connections if not c.busy]
            if not idle:
                return None
            idle[0].close(CLOSE_TOO_MANY_TABS, "The IDE was opened in another tab.")
            self._forget(idle[0], replaced=True)
        conn = Connection(student, token_hash, send, close)
        student.connections.append(conn)
        metrics.SOCKETS.inc()
        self.jobs.events.student_online(user, True)
        self.jobs.warm.want(user)
        return conn

    def closed(self, conn: Connection) -> None:
        """The socket closed, however: its run is stopped; the student's
        sandbox goes when their last socket here does."""
        conn.gone.set()
        run = self.running(conn)
        if run is not None:
            self.jobs.track(run.stop("killed"))
        self._forget(conn)

    def _forget(self, conn: Connection, replaced: bool = False) -> None:
        """The socket is gone; so is its student here once it was their last
        (unless a new socket replaces it)."""
        conn.gone.set()
        student = conn.student
        if conn in student.connections:
            student.connections.remove(conn)
            metrics.SOCKETS.dec()
            self.jobs.events.student_online(student.user, False)
        if not student.connections and not replaced:
            self.students.pop(student.user["id"], None)
            self.jobs.left(student.user)
            if self.grader is not None:
                self.grader.forget(student.user)

    # -- runs -----------------------------------------------------------------

    def start(self, conn: Connection, spec: RunSpec, re: str | None = None) -> None:
        """Run what `spec` says (a file of the user's home, or of a course
        folder they may read as a read-only copy in their own sandbox; under
        the debugger or not), its messages on this socket, naming the
        message `re` that asked for it."""
        if conn.busy:
            raise Refused(409, "already_running", "A program is already running here. Stop it first.")
        user = conn.student.user
        # An exam's file runs where the student's own files are not: a sandbox with a home of its own.
        place = ScratchSandbox(self.jobs.warm.starts, self.jobs.warm.uid_of(user)) \
            if spec.course is not None and spec.course.startswith("exam/") else None
        request = RunRequest(spec, user, conn.token_hash, console=True, sandboxes=place)
        job = conn.job = self.jobs.start(request, Reply(conn, re))
        assert job.task is not None  # start() started it
        job.task.add_done_callback(lambda _: self._after(conn, job))
        if place is not None:
            job.task.add_done_callback(lambda _: self.jobs.track(place.close()))

    def attempt(self, conn: Connection, class_id: int, slug: str, etag: str | None, re: str | None = None,
                area: Area | None = None) -> None:
        """Start an attempt: the student's program (in their home, or the
        exam folder `area`) against an exercise's checks; the attempt's
        messages come on this socket, naming the message `re`."""
        if conn.busy:
            raise Refused(409, "already_running", "A program or a check is already running here. Stop it, "
                                                  "then press Check.")
        if self.grader is None:
            raise Refused(503, "no_checks", "Checks are not available on this server.")
        conn.attempt = self.grader.start(conn.student.user, conn.token_hash, class_id, slug, etag, Reply(conn, re),
                                         area)

    def prepare_attempt(self, conn: Connection) -> None:
        """An exercise is open in the IDE: its next attempt's sandbox starts now."""
        if self.grader is not None:
            self.grader.prepare(conn.student.user)

    def running(self, conn: Connection) -> Run | None:
        """The Run of the socket's program, or None."""
        job = conn.job
        return job.run if job is not None and job.state is not State.ENDED else None

    def debugging(self, conn: Connection) -> DebugSession | None:
        """The debug session of the socket's program, or None."""
        job = conn.job
        return job.debug if job is not None and job.state is not State.ENDED else None

    def _after(self, conn: Connection, job: Job) -> None:
        """The job is over: a session found ended on the way closes the socket."""
        if job.session_ended:
            self._end_session(conn)

    # -- sessions ---------------------------------------------------------------

    async def close_ended_sessions(self) -> None:
        """Stop the programs and close the sockets of sessions that ended
        (logout, deactivation, password reset, expiry) anywhere."""
        conns = [c for s in self.students.values() for c in s.connections]
        if not conns:
            return
        valid = await sessions.still_valid(self.jobs.pool, {c.token_hash for c in conns})
        for conn in conns:
            if conn.token_hash not in valid:
                self._end_session(conn)

    def _end_session(self, conn: Connection) -> None:
        """Stop the socket's program (its exit message says why), then close it."""
        if conn.ending:
            return
        conn.ending = True
        job = conn.job if conn.busy else None
        if job and job.run:
            job.run.stop("logged_out")
        elif job:
            conn.gone.set()  # not running yet: it stops at its next step

        async def close_after_run() -> None:
            if job:
                try:
                    await asyncio.wait_for(job.done.wait(), JOB_END_WAIT)
                except asyncio.TimeoutError:
                    pass
            conn.close(CLOSE_SESSION_ENDED, "Your session has ended.")
            self.closed(conn)
        self.jobs.track(close_after_run())

    # -- the worker's side ----------------------------------------------------------

    async def shutdown(self) -> None:
        """Runs end first (each student is told why) and give back their
        locks; then sockets close and the ready sandboxes go."""
        await self.jobs.stop_all("server_restart")
        for student in list(self.students.values()):
            for conn in list(student.connections):
                conn.close(1012, "server restarting")
                self.closed(conn)
        await self.jobs.warm.close()
        if self.grader is not None:
            await self.grader.close()
        if self.jobs.tasks:
            await asyncio.wait(list(self.jobs.tasks), timeout=5)
