"""A run's life, from "run this" to its last message, whoever asked for it.

A `Job` is made from who runs what (a `RunRequest`: the run's `RunSpec`,
and the user and the session that ask) and where its messages go (a `RunSink`: the IDE socket is one,
a grader's collector another). Its collaborators are explicit (`Jobs`,
which makes every job of the worker and holds what they share). It goes
through its states in order, each step asserting the state it needs (an
impossible transition raises `WrongState`), and whatever it holds is given
back in one place (`_end`), whichever state it ends in:

    preparing  the file is measured (runnable, within quota), the student's run lock
               claimed if their session is still live (PostgreSQL, one
               statement: one run per student across tabs, workers and
               hosts), and a ready sandbox taken (warm.py)
    ready      it waits for a place among the host's running programs
               (admission.py), telling the sink its position
    running    the program runs (run.py); a sandbox elsewhere (a runner's) is sent the home's
               changed files first, and what the program changed there is kept after it
               (shipping.py)
    ending     the sandbox goes back (to serve the student's next run, or
               killed as a whole), the place and the lock are given back
    ended      only then does the last message go out, so a run asked for
               right after it is never refused as already running; then
               the IDEs showing the home look again and the home is walked

The sink's `gone` event says nobody waits for the run any more (the socket
closed): a job not running yet stops at its next step, a running one is
stopped by its asker (`stop`).
"""
import asyncio
import enum
import logging
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol, TypeVar, cast

from .. import metrics
from ..config import Config
from ..db import Pool
from ..errors import Refused
from ..files.area import Area
from . import runlock, shipping
from .admission import Admission, Notify, QueueFull
from .debugging import DebugSession
from .disk_guard import DiskGuard, WriteGuard
from .events import RunEvents, run_error
from .run import Run
from .spec import Mode, RunSpec
from .sandbox import HomeCopy, SandboxError, StartedSandbox
from .starts import Sandboxed
from .warm import WarmSandboxes

if TYPE_CHECKING:  # the files service is the worker's; only its type is needed here
    from ..files.service import Files

T = TypeVar("T")
M = TypeVar("M", bound="dict[str, Any] | None")  # a step's last message

log = logging.getLogger(__name__)

RUN_FIRST_GUESS = 5.0  # seconds a run lasts, until this worker has seen one end
WROTE_MEASURE_NOW = 1 << 20  # a run that wrote this much to files has its home walked at once


class State(enum.Enum):
    PREPARING = "preparing"
    READY = "ready"
    RUNNING = "running"
    ENDING = "ending"
    ENDED = "ended"


class WrongState(RuntimeError):
    """A step of a job was taken in a state that does not allow it (a bug)."""


@dataclass(frozen=True)
class RunRequest:
    """A run (its RunSpec: spec.py) and what only this worker holds for it."""
    spec: RunSpec
    user: dict[str, Any]
    session: bytes  # the token hash of the session that asks: no run once it has ended
    claim: str | None = None  # the run lock, when the asker holds it already (Jobs.claim: an attempt's runs)
    placed: bool = False  # the asker holds its place already: it waits in no line (an attempt's checker run)
    console: bool = False  # an IDE shows its output: teaching is told it too (RunEvents.run_console)
    sandboxes: "SandboxSource | None" = None  # where its sandbox comes from: None, the user's ready one (warm.py)
    events: RunEvents | None = None  # who hears that it started and how it ended: None, the class view (Jobs.events)


class SandboxSource(Protocol):
    """Where a job takes its sandbox from and gives it back to: the user's
    ready sandbox (warm.WarmSandboxes), or an attempt's own (scratch.py)."""

    holds_home: bool  # its programs can write the user's home (its quota is watched, its changes announced)
    copies_home: bool  # they run on a copy of it, brought in step before each run (shipping.py)

    async def take(self, user: dict[str, Any], notify: Notify) -> Sandboxed | None:
        """A ready sandbox; None if none could start, twice. `notify(position)`
        hears where its start is in line, if it waits for one."""

    def used(self, user: dict[str, Any], sandboxed: Sandboxed) -> None:
        """A run starts in it."""

    async def give_back(self, user: dict[str, Any], sandboxed: Sandboxed, ran: bool, reusable: bool) -> None:
        """The job is done with it (`ran`: a program ran; `reusable`: its launcher cleared up)."""


class RunSink(Protocol):
    """Where a job's messages go (docs/run-protocol.md: queued, started, output,
    image, input, notice, exit, error)."""

    gone: asyncio.Event  # set when nobody waits for the run any more

    async def send(self, message: dict[str, Any]) -> None:
        """Deliver `message`; never raises (a sink that cannot deliver drops it)."""



class ChannelSink(RunSink, Protocol):
    """The sink of a job that serves an attempt or runs its tests (Mode.SERVE,
    Mode.TEST): it has its program's channel messages too."""

    async def channel(self, message: dict[str, Any]) -> None:
        """A message the program wrote on its channel (awaited: the next waits for it)."""


class SessionEnded(Refused):
    def __init__(self) -> None:
        super().__init__(401, "session_ended", "Your session has ended. Log in again.")


def refusal(code: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": code, "message": message}


async def outcome(step: Callable[[], Awaitable[M]], doing: str) -> M | dict[str, Any]:
    """What `step()` returns (its last message), or what it raised as a refusal (`refused`)."""
    try:
        return await step()
    except Exception as e:
        return refused(e, doing)


def refused(error: Exception, doing: str) -> dict[str, Any]:
    """`error`, raised while `doing`, as the refusal its client is sent: a
    Refused as it says; anything else is a bug: logged, and said plainly."""
    if isinstance(error, Refused):
        return refusal(error.code, error.message)
    log.error("%s failed", doing, exc_info=error)
    return refusal("internal_error", "Something went wrong on the server. It has been logged.")


# Said only once a start failed twice (starts.py): the server, not the student's program, is at fault.
SANDBOX_FAILED = refusal("sandbox_failed", "Your program could not start: the server could not make room for it "
                                           "just now. Press Run to try again; if this keeps happening, tell your "
                                           "teacher.")


@dataclass
class Jobs:
    """Every job of this worker, and what they share."""
    cfg: Config
    pool: Pool  # the database pool (the run lock)
    files: "Files"  # the files service: the file, the home's quota, its changes and usage
    admission: Admission
    warm: WarmSandboxes
    events: RunEvents
    draining: Callable[[], bool]  # True once the worker shuts down: nothing new starts
    live: "set[Job]" = field(default_factory=set)  # jobs not ended
    took: deque[float] = field(default_factory=lambda: deque(maxlen=50))  # the latest runs' seconds, for estimates
    held: set[str] = field(default_factory=set)  # run locks held here (kept alive by the worker's heartbeat)
    tasks: "set[asyncio.Future[Any]]" = field(default_factory=set)  # awaited at shutdown: jobs, walks put off

    def start(self, request: RunRequest, sink: RunSink) -> "Job":
        """Make a job and start its life as a task."""
        job = Job(request, sink, self)
        job.task = self.track(job.live())
        return job

    def estimate(self, position: int) -> float:
        """Seconds until a run at `position` in the line for a place starts:
        the places free as the latest runs lasted, `slots` at a time."""
        each = sum(self.took) / len(self.took) if self.took else RUN_FIRST_GUESS
        return round(each * position / self.admission.slots, 1)

    def left(self, user: dict[str, Any]) -> None:
        """`user` has no IDE open here any more: what is kept for them goes
        (their ready sandbox, their home's usage record)."""
        self.warm.unwant(user)
        self.files.usage.forget(user)

    async def claim(self, user: dict[str, Any], session: bytes) -> str:
        """Claim `user`'s run lock for a run asked for by `session` (one run
        per student across tabs, workers and hosts): its id. Refused when
        they have a run already; SessionEnded when the session has."""
        claim = uuid.uuid4().hex
        claimed = await runlock.claim(self.pool, user["username"], claim, session)
        if claimed == "session_ended":
            raise SessionEnded()
        if claimed == "busy":
            raise Refused(409, "already_running", "You already have a program running (in another tab or "
                                                  "window). Stop it there first.")
        self.held.add(claim)
        return claim

    async def release(self, user: dict[str, Any], claim: str) -> None:
        """Give the run lock back (never raises: a lock not given back goes stale)."""
        self.held.discard(claim)
        try:
            await runlock.release(self.pool, user["username"], claim)
        except Exception:
            log.exception("could not release the run lock of %s (it goes stale in %d s)",
                          user["username"], runlock.STALE)

    def claims(self) -> list[str]:
        """Run lock ids held by this worker (kept alive by its heartbeat)."""
        return list(self.held)

    def active_runs(self) -> list[Run]:
        return [job.run for job in self.live if job.run is not None]

    async def stop_all(self, reason: str) -> None:
        """Stop every running program (each student is told `reason`) and
        wait a little for their jobs to give back what they hold."""
        await asyncio.gather(*(run.stop(reason) for run in self.active_runs()))
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=3)

    def track(self, coroutine: Awaitable[T]) -> "asyncio.Future[T]":
        """Run it as a task the worker waits for when it shuts down, so no run
        lock or sandbox is left behind when the database pool closes."""
        task = asyncio.ensure_future(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task


class Job:
    """One run, asked for by `request`, told to `sink`."""

    def __init__(self, request: RunRequest, sink: RunSink, jobs: Jobs):
        self.request, self.sink, self.jobs = request, sink, jobs
        self.state = State.PREPARING
        self.claim: str | None = None  # the run lock's id, once this job holds it (not when its asker does)
        self.admitted = False  # holds a place among the host's running programs
        self.sandboxed: Sandboxed | None = None
        self.run: Run | None = None
        self.debug: DebugSession | None = None  # a debug run's session (debugging.py)
        self.session_ended = False  # refused because the asker's session had ended
        self.done = asyncio.Event()  # its last message is out
        self.task: asyncio.Future[None] | None = None  # its life, once started (Jobs.start): done with it
        self.not_kept: list[str] = []  # sentences on what the program wrote elsewhere that was not kept

    @property
    def events(self) -> RunEvents:
        """Who hears of it: the request's (an attempt's runs are not the student's last run), or the class view."""
        return self.request.events or self.jobs.events

    @property
    def sandboxes(self) -> SandboxSource:
        """Where its sandbox comes from: the request's, or the user's ready one."""
        return self.request.sandboxes or self.jobs.warm

    def _step(self, needs: State, to: State) -> None:
        if self.state is not needs:
            raise WrongState(f"a job goes from {needs.value} to {to.value}, not from {self.state.value}")
        self.state = to

    async def live(self) -> None:
        """The whole life: the steps, the end, the last message."""
        jobs, user = self.jobs, self.request.user
        jobs.live.add(self)
        try:
            try:
                message = await outcome(self._go, "a run")
            finally:
                await self._end()
        finally:
            jobs.live.discard(self)
        if self.run is not None:  # the program started: the teacher's view hears how it ended
            ended = message if message and message.get("type") == "exit" else {"type": "exit", "reason": "sandbox_lost"}
            self.events.run_ended(user, ended, run_error(self.run.stderr_tail, user["username"]))
            self._tee(ended)
        if message:
            await self.sink.send(message)
        for sentence in self.not_kept:
            await self._notice(sentence)
        if self.run is not None and self.sandboxes.holds_home:
            # It may have written, made, renamed or deleted files: the open IDEs look again.
            if jobs.files.changes is not None:
                jobs.files.changes.announce(Area.home(user["username"]).key, "program", by="program")
            guard = self.run.disk_guard
            await jobs.files.usage.after_run(user, self._notice,
                                             now=guard is not None and guard.wrote() >= WROTE_MEASURE_NOW)
        if user["id"] not in jobs.warm.wanted:
            jobs.files.usage.forget(user)
        self.done.set()

    def _tee(self, message: dict[str, Any]) -> None:
        """A message of the run as its IDE shows it, for the teacher's view of its console."""
        if self.request.console:
            self.events.run_console(self.request.user, message)

    async def _send_teed(self, message: dict[str, Any]) -> None:
        self._tee(message)
        await self.sink.send(message)

    async def _notice(self, sentence: str) -> None:
        await self.sink.send({"type": "notice", "message": sentence})

    async def _go(self) -> dict[str, Any] | None:
        """preparing → ready → running: the exit message, or a refusal (None
        when nobody waits for it any more)."""
        jobs, request, spec = self.jobs, self.request, self.request.spec
        user, area = request.user, Area.home(request.user["username"])
        if request.claim is None:
            try:
                self.claim = await jobs.claim(user, request.session)
            except SessionEnded:
                self.session_ended = True
                raise
        # (After the run lock: the home is then as the student's last run left it.)
        copy, used, tree = None, None, None
        if spec.course is not None:  # the course file and those beside it, run as a copy in the user's own sandbox
            used, copy = await jobs.files.course_copy(user["username"], Area.of_key(spec.course), spec.parts)
        elif spec.files is None and spec.mode is not Mode.TEST:  # (a snapshot, a checker: the files are given)
            if self.sandboxes.copies_home:  # and the home's tree to bring the copy in step with: one call
                used, tree = await jobs.files.runnable_listed(user["username"], area, spec.parts)
            else:  # a file, within its quota
                used = await jobs.files.runnable_size(user["username"], area, spec.parts)
        self.sandboxed = await self.sandboxes.take(user, self._waiting_for_sandbox)
        if self.sandboxed is None:
            return SANDBOX_FAILED
        if self.sink.gone.is_set():
            return None

        self._step(State.PREPARING, State.READY)
        if not request.placed:
            queued_at = time.monotonic()
            try:
                self.admitted = await self._admit()
            except QueueFull:
                return refusal("server_busy", "The server is busy. Try again in a moment.")
            if not self.admitted:
                return None  # nobody waits any more
            metrics.RUN_QUEUE_WAIT.observe(time.monotonic() - queued_at)
        if jobs.draining():  # shutdown stopped the runs it found: this one must not start after it
            return refusal("server_restart", "The server is restarting. Run it again in a moment.")

        self._step(State.READY, State.RUNNING)
        sandbox = self.sandboxed.sandbox
        channel: Callable[[dict[str, Any]], Awaitable[Any]] | None = \
            cast(ChannelSink, self.sink).channel if spec.mode in (Mode.SERVE, Mode.TEST) else None
        if spec.mode is Mode.DEBUG:
            options = spec.debug.to_dict() if spec.debug else {}
            self.debug = DebugSession(self.sink.send, self, **options)  # pauses: the IDE's, not the teacher's view
            channel = self.debug.from_program
        home = self.sandboxes.holds_home
        copied = sandbox.copy if home else None  # it runs elsewhere, on a copy of the home
        if copied is not None:
            try:
                await shipping.send(jobs.files, user["username"], copied, jobs.cfg.MAX_FILE_BYTES, tree)
            except SandboxError as e:
                log.warning("could not send %s's files to their sandbox: %s", user["username"], e)
                sandboxed, self.sandboxed = self.sandboxed, None
                await self.sandboxes.give_back(user, sandboxed, ran=True, reusable=False)  # it goes
                return SANDBOX_FAILED
        # (A copy's home is not walked here while it runs: the runner guards it.)
        walked = home and copied is None
        self.run = Run(spec, sandbox, self._send_teed, over_quota=(lambda: self._over_quota(area)) if walked else None,
                       disk_guard=self._disk_guard(sandbox, area, used), channel=channel, debug=self.debug)
        if self.debug is not None:
            self.debug.attach(self.run)
        self.sandboxes.used(user, self.sandboxed)
        metrics.RUNS_ACTIVE.inc()
        self.events.run_started(user)
        if self.sink.gone.is_set():
            self.run.stop("killed")
        await self._send_teed({"type": "started", "run_id": self.run.id})
        message = await self.run.go(copy)
        if copied is not None:
            await self._take_back(copied, used)
        metrics.RUN_DURATION.observe(message["duration"])
        if not request.placed:  # (the line's estimates are of the runs that wait in it)
            jobs.took.append(message["duration"])
        metrics.RUN_EXITS.labels(message["reason"]).inc()
        return message

    async def _take_back(self, copy: HomeCopy, used: int | None) -> None:
        """What the program changed in the copy of the home it ran on, kept
        in the home (shipping.py), before the sandbox serves another run
        (`used`: the bytes the home held as it started, if known)."""
        username = self.request.user["username"]
        room = None if used is None else max(0, self.request.spec.limits.quota_bytes - used)
        try:
            self.not_kept = await shipping.take_back(self.jobs.files, username, copy, self.jobs.cfg.MAX_FILE_BYTES,
                                                     room)
        except SandboxError as e:
            log.warning("could not take back what %s's program wrote: %s", username, e)
            self.not_kept = ["What your program wrote to files could not be kept: the computer running it "
                             "stopped. Run it again."]
        except Refused as e:
            self.not_kept = [f"What your program wrote to files could not be kept: {e.message}"]

    async def _waiting_for_sandbox(self, position: int) -> None:
        """Its sandbox waits in the line of starts (starts.py): the student is told where."""
        if not self.sink.gone.is_set():
            estimate = self.jobs.warm.starts.estimate(position)
            await self.sink.send({"type": "queued", "line": "start", "position": position, "estimate": estimate})

    async def _admit(self) -> bool:
        """Wait for a place; False if the sink went first."""
        admission = self.jobs.admission

        async def queued(position: int) -> None:
            metrics.RUN_QUEUE.set(len(admission.waiting))
            await self.sink.send({"type": "queued", "line": "run", "position": position,
                                  "estimate": self.jobs.estimate(position)})
        entering = asyncio.ensure_future(admission.enter(queued))
        going = asyncio.ensure_future(self.sink.gone.wait())
        try:
            await asyncio.wait([entering, going], return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # (a debug run's command, when the run ends first)
            if entering.done() and not entering.cancelled() and entering.exception() is None:
                admission.leave()  # admitted as it was given up: the place passes on
            raise
        finally:
            going.cancel()
            if not entering.done():
                entering.cancel()  # gives the place on if it came just now
                await asyncio.gather(entering, return_exceptions=True)
            metrics.RUN_QUEUE.set(len(admission.waiting))
        if entering.cancelled():
            return False
        entering.result()  # QueueFull
        return True

    # -- a debug run's place (debugging.Places) ---------------------------------------

    def give_back(self) -> None:
        if self.admitted:
            self.admitted = False
            self.jobs.admission.leave()

    async def take(self) -> bool:
        if not self.admitted:
            self.admitted = await self._admit()
        return self.admitted

    async def _end(self) -> None:
        """(any state) → ending → ended: give back whatever the job holds."""
        if self.state in (State.ENDING, State.ENDED):
            raise WrongState(f"a job ends once, not again from {self.state.value}")
        self.state = State.ENDING
        jobs, user = self.jobs, self.request.user
        if self.run is not None:
            metrics.RUNS_ACTIVE.dec()
        if self.sandboxed is not None:
            await self.sandboxes.give_back(user, self.sandboxed, ran=self.run is not None,
                                           reusable=self.run is not None and self.run.reusable)
        if self.debug is not None:
            await self.debug.close()  # before the place: a command waiting for one gives up
        if self.admitted:
            jobs.admission.leave()
        if self.claim is not None:
            await jobs.release(user, self.claim)
        self._step(State.ENDING, State.ENDED)

    # -- the home's quota, while the program runs ---------------------------------------

    async def _over_quota(self, area: Area) -> bool:
        """Has its home gone over its quota?"""
        return await self.jobs.files.quota_problem(self.request.user["username"], area) is not None

    def _disk_guard(self, sandbox: StartedSandbox, area: Area, used: int | None) -> WriteGuard | None:
        """The run's write budget (disk_guard.py): what the home's quota
        leaves of `used`, or in a scratch home RUN_FILE_MB in all; None
        where the sandbox has no cgroup to count its writes. A sandbox on a
        runner is guarded there, on its copy of the home."""
        limits, files, username = self.request.spec.limits, self.jobs.files, self.request.user["username"]
        if self.request.spec.mode is Mode.TEST:
            # The checker runs the teacher's tests.py, nothing of the student's (their functions run in
            # the serving program, which is guarded): no write budget read every few ms for it.
            return None
        if sandbox.copy is not None:
            if not self.sandboxes.holds_home:
                return sandbox.copy.guard(limits.file_mb << 20, limits.file_mb << 20, None)
            return sandbox.copy.guard(limits.quota_bytes - used, limits.file_mb << 20, limits.quota_bytes) \
                if isinstance(used, int) else None
        if sandbox.writes is not None and not self.sandboxes.holds_home:
            return DiskGuard(sandbox.writes, _no_room, limits.file_mb << 20, limits.file_mb << 20)
        if sandbox.writes is None or not isinstance(used, int):
            return None
        return DiskGuard(sandbox.writes, lambda: files.room_left(username, area), limits.quota_bytes - used,
                         limits.file_mb << 20)


async def _no_room() -> int | None:
    """A scratch home's room once its run's write budget is spent: none."""
    return None
