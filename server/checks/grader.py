"""Attempts: one press of Check, an exercise's checks run once against the
student's saved program, the verdicts decided where the student's code
cannot reach.

An attempt waits in a line (CHECKS_AT_ONCE on this host at once; the
others are told their place and an estimate), then holds the student's run
lock for its whole length (no Run meanwhile, no second attempt), and:

1. reads the student's file and those beside it once (a snapshot), the
   version their editor showed (etag): every run of the attempt runs a
   fresh copy of these bytes, and the attempt records their version;
2. runs it once per output check, fed the check's input, echo off, below
   interactive runs (ATTEMPT_NICE), each for CHECK_SECONDS at most, with the
   exercise's no_import modules forbidden while it runs (code_rules.py):
   jobs with a collector for a sink, in a sandbox of the attempt's own
   (runs/scratch.py: a throwaway home), never the student's, so nothing a
   run writes survives it; the checks the student sees run first, the
   hidden ones after (see _run), so what a hidden check's run is given
   never reaches a result the student sees;
3. runs the teacher's side in a checker sandbox (checkers.py), which
   holds the exercise's tests.py and nothing of the student's: code checks
   on the source text, output comparisons (prompts apart: transcript.py),
   and tests.py's test functions. When a test calls a student's function,
   the call crosses as JSON to the student's program, served in the
   attempt's sandbox (a job in the launcher's `serve` mode, one for each
   phase), and the value comes back the same way; each call has
   CHECK_SECONDS. A program that exits, hangs or prints anything only
   fails the tests that needed it;
4. records the attempt: the exercises service computes the score from the
   exercise's points and keeps what the student may see (attempts.py). An
   attempt that could not be finished once the program ran is recorded
   all the same, as not checked (its stored outcome) and why.

The checks' verdicts come from the checker sandbox and nothing else; the
student's program only ever produces output and values. The whole attempt
has 3 × CHECK_SECONDS for its tests, past which what did not report failed.
"""
import asyncio
import logging
import time
from collections import deque
from datetime import datetime, timezone
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from ..config import Config
from ..errors import Refused
from ..files.area import Area
from ..exercises import visibility
from ..exercises.model import Check, Exercise
from ..files.history import etag_of
from ..runs.admission import Admission, QueueFull
from ..runs.events import NoEvents
from ..runs.job import Job, Jobs, RunRequest, RunSink, outcome, refused
from ..runs.scratch import ScratchSandbox
from ..runs.spec import Limits, Mode, RunSpec
from ..valid_text import valid_value
from . import code_rules
from .checkers import CheckerPlace, CheckerSandboxes
from .transcript import Transcript, shown as shown_transcript

if TYPE_CHECKING:  # the worker makes them and hands them in
    from ..exercises.service import Exercises, Found
    from ..files.service import Files

log = logging.getLogger(__name__)

ATTEMPT_NICE = 5  # an attempt's programs run below students' interactive ones
RETIRED_MAX = 64  # used sandboxes kept idle at most while attempts wait, before they are killed anyway
READY_SECONDS = 600  # an attempt's sandbox started ahead of time waits this long for its press of Check
SOURCE_LIMIT = 256 << 10  # bytes of a student's file an attempt reads
OUTPUT_LIMIT = 64 << 10  # characters of a program's output kept for comparing
# An attempt's runs are not the student's runs: the class view keeps what their last Run showed, and
# learns of the attempt from its record (exercise_progress).
ATTEMPT_RUN_EVENTS = NoEvents()
RUN_ENDINGS = {"ok", "error"}  # a run that ended otherwise (a limit, stopped) produced no output to compare


@dataclass
class Collected:
    """A sink that keeps a run's output (bounded), its prompts apart, and its exit."""
    gone: asyncio.Event = field(default_factory=asyncio.Event)
    transcript: Transcript = field(default_factory=lambda: Transcript(OUTPUT_LIMIT))
    exit: dict[str, Any] | None = None
    # The program's channel messages, when it has a channel.
    channel_messages: "asyncio.Queue[dict[str, Any]] | None" = None

    async def send(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "output" and message.get("stream") == "stdout":
            self.transcript.output(message["data"])
        elif kind == "input":
            self.transcript.waits(message.get("prompt") or "")
        elif kind in ("exit", "error"):
            self.exit = message

    async def channel(self, message: dict[str, Any]) -> None:
        if self.channel_messages is not None:
            await self.channel_messages.put(message)  # bounded: the program waits while it is full

    @property
    def text(self) -> str:
        return self.transcript.text()


class Relay:
    """The checker run's sink: its messages kept as any run's, and its
    channel relayed: a test's call of the student's function goes to the
    program serving them (`answer`: Attempt._call) and the reply back;
    verdicts are kept. Each is awaited, so the checker's next line waits
    for it."""

    def __init__(self, answer: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]], tests: dict[str, Check]) -> None:
        self.answer = answer
        self.tests = tests  # test function name -> its check
        self.collected = Collected()
        self.gone = self.collected.gone
        self.verdicts: dict[str, Any] = {}
        self.job: Job | None = None  # the checker run's, once started

    async def send(self, message: dict[str, Any]) -> None:
        await self.collected.send(message)

    async def channel(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "call":
            reply = await self.answer(message)
            run = self.job.run if self.job is not None else None
            if run is None:
                return  # (its channel speaks only while its run does)
            try:
                run.tell(reply)
            except ValueError:  # a value over the channel's bound
                run.tell({"type": "reply", "id": message.get("id"),
                          "failed": {"message": "The value your function returned is too large to check."}})
        elif kind == "result" and isinstance(message.get("id"), str):
            test = self.tests.get(message["id"])
            # It may quote a NUL the program wrote.
            self.verdicts.setdefault(test.id if test else message["id"], valid_value(message))
        elif kind == "not_gradable":
            self.verdicts["not_gradable"] = valid_value(message.get("error") or {})


class Grader:
    """Every attempt of this worker."""

    def __init__(self, cfg: Config, jobs: Jobs, checkers: CheckerSandboxes, exercises: "Exercises", files: "Files",
                 processes: int = 1) -> None:
        self.cfg = cfg
        self.jobs = jobs
        self.checkers = checkers
        self.exercises = exercises  # the exercises service: the exercise, and recording the attempt
        self.files = files
        self.limits = Limits.of(cfg)  # an attempt's runs have these, with CHECK_SECONDS of wall and idle time
        self.line = Admission(max(1, cfg.CHECKS_AT_ONCE // processes), cfg.CHECK_QUEUE_MAX // processes)
        self.took = deque([2.0], maxlen=20)  # seconds the latest attempts took, for estimates
        self.attempts: dict[int, Attempt] = {}  # user id -> Attempt: one at a time per student
        # user id -> (an attempt's sandbox started ahead of time, when): the student has an exercise in
        # front of them, so their next Check waits for no sandbox. One each, while their IDE is open here.
        self.ready: dict[int, tuple[ScratchSandbox, float]] = {}
        self.retired: list[ScratchSandbox] = []  # used, idle, to kill once no attempt waits (retire)

    def start(self, user: dict[str, Any], session: bytes, class_id: int, slug: str, etag: str | None,
              sink: RunSink, area: Area | None = None) -> "Attempt":
        if user["id"] in self.attempts:
            raise Refused(409, "check_waiting", "Your check is already on its way: its result comes here.")
        attempt = self.attempts[user["id"]] = Attempt(self, user, session, class_id, slug, etag, sink, area)
        self.jobs.track(attempt.live())
        return attempt

    def prepare(self, user: dict[str, Any]) -> None:
        """Start the sandbox of `user`'s next attempt now (an exercise is open
        in their IDE, or they just pressed Check): one at a time, kept READY_SECONDS."""
        now = time.monotonic()
        for user_id, (place, since) in list(self.ready.items()):
            if now - since > READY_SECONDS:
                self._drop_ready(user_id)
        if user["id"] in self.ready or user["id"] in self.attempts or self.jobs.draining():
            return
        self.ready[user["id"]] = (self._started_place(user, ahead=True), now)

    def forget(self, user: dict[str, Any]) -> None:
        """`user` has no IDE open here any more: their ready sandbox goes."""
        self._drop_ready(user["id"])

    def take_place(self, user: dict[str, Any]) -> "ScratchSandbox":
        """A sandbox for `user`'s attempt: the one started ahead of time, or a new one."""
        ready = self.ready.pop(user["id"], None)
        if ready is not None:
            if time.monotonic() - ready[1] <= READY_SECONDS:
                return ready[0]
            self.jobs.track(ready[0].close())
        return self._started_place(user)

    def retire(self, place: "ScratchSandbox") -> None:
        """An attempt is over with its sandbox (nothing runs in it). It goes after
        the result is out, and while attempts wait in line, once none does:
        killing a sandbox costs the kernel CPU those attempts need."""
        self.retired.append(place)
        if not self.line.waiting or len(self.retired) > RETIRED_MAX:
            retired, self.retired = self.retired, []
            self.jobs.track(asyncio.gather(*(p.close() for p in retired), return_exceptions=True))

    async def close(self) -> None:
        """The worker stops: every sandbox kept here goes."""
        retired, self.retired = self.retired, []
        for user_id in list(self.ready):
            self._drop_ready(user_id)
        await asyncio.gather(*(p.close() for p in retired), self.checkers.close(), return_exceptions=True)

    def _started_place(self, user: dict[str, Any], ahead: bool = False) -> ScratchSandbox:
        """An attempt's sandbox for `user`, starting now (`ahead`: before they press Check)."""
        place = ScratchSandbox(self.jobs.warm.starts, self.jobs.warm.uid_of(user))
        place.warm_up(ahead)
        return place

    def _drop_ready(self, user_id: int) -> None:
        ready = self.ready.pop(user_id, None)
        if ready is not None:
            self.jobs.track(ready[0].close())

    def estimate(self, position: int) -> float:
        """Seconds until an attempt at `position` in the line has its result."""
        each = sum(self.took) / len(self.took)
        return round(each * (1 + position / self.line.slots), 1)


class Attempt:
    def __init__(self, grader: Grader, user: dict[str, Any], session: bytes, class_id: int, slug: str,
                 etag: str | None, sink: RunSink, area: Area | None = None) -> None:
        self.grader, self.user, self.session = grader, user, session
        self.class_id, self.slug, self.etag, self.sink = class_id, slug, etag, sink
        self.area = area  # the exam folder that holds the file checked; None: the home
        self.done = asyncio.Event()
        # The student's program was given to a sandbox: from then on the press is kept, whatever
        # happens (what an attempt does can tell something of its hidden inputs, even when it fails).
        self.pressed = False
        self.snapshot: dict[str, bytes] = {}  # the graded file and those beside it, read once: every run runs these
        self.graded: dict[str, Any] | None = None  # what the attempt graded: the file, its version and its bytes
        self.place: ScratchSandbox | None = None  # the sandbox of the attempt's runs of the student's program
        # The student's program serving the tests' calls: (job, its sink), or None.
        self.serving: tuple[Job, Collected] | None = None
        self.shown_phase = True  # what runs now may be shown to the student (see _run)
        self.forbid: tuple[str, ...] = ()  # modules the student's runs may not import (code_rules.py)
        self.ran: list[Collected] = []  # the sinks of the student's runs: their exits say whether they imported one

    async def live(self) -> None:
        try:
            message = await outcome(self._attempt, "an attempt")
        finally:
            self.grader.attempts.pop(self.user["id"], None)
        await self.sink.send(message)
        # Still at their IDE: ready for their next press, unless attempts wait in line (then it would
        # take CPU from them; their next press starts it while it waits, as the first did).
        if self.user["id"] in self.grader.jobs.warm.wanted and not self.grader.line.waiting:
            self.grader.prepare(self.user)
        self.done.set()

    async def _attempt(self) -> dict[str, Any]:
        grader, user = self.grader, self.user
        await grader.exercises.classes.member_of(user, self.class_id)  # before anything of the class is read
        found = await grader.exercises.exercise(user["username"], self.class_id, self.slug)
        # Its sandbox was started ahead of time, or starts while it waits in line: a class pressing
        # Check at once waits for its places, not for sandboxes too.
        self.place = grader.take_place(user)
        try:
            return await self._in_place(found)
        finally:
            grader.retire(self.place)

    async def _in_place(self, found: "Found") -> dict[str, Any]:
        grader, user = self.grader, self.user
        await self._wait_in_line()
        started_at, started = _now(), time.monotonic()
        self.started_at = started_at  # which checks' results the student may see is decided as of now
        failed = None
        try:
            claim = await grader.jobs.claim(user, self.session)
            try:
                await self.sink.send({"type": "check", "state": "running"})
                results, not_gradable, why = await self._run(found, claim)
            except Exception as e:
                if not self.pressed:  # refused before it began (a stale editor, too large): nothing to keep
                    raise
                failed = e
            finally:
                await self._stop_serving()
                await grader.jobs.release(user, claim)
        finally:
            grader.line.leave()
            grader.took.append(time.monotonic() - started)
        if failed is None:
            try:
                return await self._record(started_at, results, not_gradable, why)
            except Exception as e:
                failed = e
        return await self._not_checked(started_at, failed)

    async def _record(self, started_at: datetime, results: list[dict[str, Any]], not_gradable: bool,
                      why: str) -> dict[str, Any]:
        """Keep the attempt's results (the exercises service scores them):
        the message its sink is sent. (Grading an exam keeps them elsewhere:
        exams/grading.py.)"""
        attempt = await self.grader.exercises.record_attempt(self.user, self.class_id, self.slug, started_at, results,
                                                             not_gradable, why, graded=self.graded)
        return {"type": "check", "state": "done", "attempt": attempt}

    async def _not_checked(self, started_at: datetime, error: Exception) -> dict[str, Any]:
        """An attempt that could not be finished: kept all the same, as not
        checked (its stored outcome) and why (so no press is hidden from the teacher); the
        refusal the student is sent, saying so, with that attempt."""
        said = refused(error, "an attempt")
        attempt = await self.grader.exercises.record_attempt(
            self.user, self.class_id, self.slug, started_at, [], message=said["message"], reason=said["error"],
            graded=self.graded)
        return {**said, "message": attempt["note"], "attempt": attempt}

    async def _wait_in_line(self) -> None:
        grader = self.grader

        async def queued(position: int) -> None:
            await self.sink.send({"type": "check", "state": "queued", "position": position,
                                  "estimate": grader.estimate(position)})
        try:
            await grader.line.enter(queued)
        except QueueFull:
            raise Refused(503, "server_busy", "Too many checks are waiting. Try again in a minute.") from None

    # -- the steps -------------------------------------------------------------------------

    async def _run(self, found: "Found", claim: str) -> tuple[list[dict[str, Any]], bool, str]:
        """(results for record_attempt, not gradable, why).

        The checks run in two phases, in one sandbox of the attempt's own:
        first those whose results the student may see, then the others
        (hidden, or after the due date that has not come). What the
        program is given in the second (a hidden check's input, a hidden
        test's arguments) can reach nothing of the first, which is over:
        the student sees only results worked out before it was given."""
        exercise = _usable(found)
        parts = (self.slug,) + tuple(exercise.file.split("/"))
        data = await self._take_snapshot(parts)
        self.pressed = True
        self.forbid = code_rules.forbidden(exercise.checks)
        source = data.decode("utf-8", "replace")
        results, verdicts = {}, {}
        for shown in (True, False):
            checks = [c for c in exercise.checks if visibility.shown(c, exercise, self.started_at) == shown]
            if not checks:
                continue
            self.shown_phase = shown
            output_checks = []
            for check in checks:
                if check.kind != "output":
                    continue
                ran = await self._output_run(parts, claim, check)
                assert ran.exit is not None  # (_output_run refuses a run that did not end with one)
                if ran.exit.get("reason") in RUN_ENDINGS:
                    output_checks.append({"id": check.id, "compare": check.compare, "expected": check.expected,
                                          "transcript": ran.transcript.pieces(check.input)})
                else:  # stopped by a limit: nothing to compare
                    results[check.id] = {"id": check.id, "passed": False,
                                         "message": "Your program " + (ran.exit.get("message") or "did not finish") +
                                         ".", "shown": {"input": check.input, "actual": ran.text,
                                                        "compare": check.compare},
                                         "details": {"exit": ran.exit}}
            got = await self._checker(found, parts, claim, source, checks, output_checks)
            await self._stop_serving()  # the next phase's calls go to a program of its own
            if "not_gradable" in got:
                return [], True, _sentence(got["not_gradable"])
            verdicts.update(got)
        by_id = {c.id: c for c in exercise.checks}
        for check_id, verdict in verdicts.items():
            known = by_id.get(check_id)
            if known is not None and check_id not in results:
                results[check_id] = _result(known, verdict)
        for check_id, verdict in code_rules.broken_while_running(exercise.checks, self.forbid,
                                                                 [s.exit for s in self.ran]).items():
            if results.get(check_id, {}).get("passed", True):  # the text passed: what the program did wins
                results[check_id] = _result(by_id[check_id], verdict)
        return list(results.values()), False, ""

    async def _take_snapshot(self, parts: tuple[str, ...]) -> bytes:
        """Read the graded file and those beside it once (every run of the
        attempt runs these bytes, whatever a program does meanwhile): the
        file's bytes. Refused when it is not the version the editor shows."""
        username = self.user["username"]
        try:
            self.snapshot = await self.grader.files.snapshot(username, parts, self.area)
        except Refused as e:
            if e.code == "file_too_large":
                raise Refused(413, "too_large", f"{'/'.join(parts)} is too large to check.") from None
            raise
        data = self.snapshot[parts[-1]]
        if len(data) > SOURCE_LIMIT:
            raise Refused(413, "too_large", f"{'/'.join(parts)} is too large to check.")
        version = etag_of(data)
        if self.etag and version != self.etag:
            raise Refused(409, "changed", "Your file was changed somewhere else after you last saw it. "
                                          "Look at the new version, then press Check again.")
        self.graded = {"file": "/".join(parts), "version": version, "source": data}
        return data

    def _request(self, parts: tuple[str, ...], claim: str, seconds: int, **asked: Any) -> RunRequest:
        """A run of the snapshot in the attempt's sandbox, for `seconds` at most."""
        spec = RunSpec(self.user["id"], self.user["username"], parts, self.grader.limits.lasting(seconds),
                       files=tuple(self.snapshot.items()), forbid=self.forbid, nice=ATTEMPT_NICE, **asked)
        return RunRequest(spec, self.user, self.session, claim=claim, sandboxes=self.place, events=ATTEMPT_RUN_EVENTS)

    async def _output_run(self, parts: tuple[str, ...], claim: str, check: Check) -> Collected:
        sink = Collected()
        self.ran.append(sink)
        job = self.grader.jobs.start(self._request(parts, claim, self.grader.cfg.CHECK_SECONDS, stdin=check.input,
                                                   echo=False), sink)
        await job.done.wait()
        if sink.exit is None or sink.exit.get("type") == "error":
            raise Refused(503, "check_failed", (sink.exit or {}).get("message") or
                          "Your program could not be run for the check. Try again in a moment.")
        return sink

    async def _checker(self, found: "Found", parts: tuple[str, ...], claim: str, source: str, checks: list[Check],
                       output_checks: list[dict[str, Any]]) -> dict[str, Any]:
        """The teacher's side of `checks`, in a checker sandbox: {check id:
        verdict}, or {"not_gradable": error} when the source does not parse."""
        grader, exercise = self.grader, _usable(found)
        options = {"module": exercise.file.rsplit("/", 1)[-1].removesuffix(".py"), "tests_file": "tests.py",
                   "tests": [c.test for c in checks if c.kind == "function"], "source": source,
                   "code_checks": [{"id": c.id, "rule": c.rule} for c in checks if c.kind == "code"],
                   "output_checks": output_checks}
        spec = RunSpec(self.user["id"], self.user["username"], ("tests.py",),
                       grader.limits.lasting(3 * grader.cfg.CHECK_SECONDS), mode=Mode.TEST, nice=ATTEMPT_NICE,
                       tests=options)
        # Under the attempt's own lock and place (it waited in the attempts' line), in a checker sandbox of its own.
        place = CheckerPlace(grader.checkers, {"tests.py": (found.tests or "").encode()})
        relay = Relay(lambda call: self._call(parts, claim, call), {c.test: c for c in checks if c.kind == "function"})
        relay.job = grader.jobs.start(RunRequest(spec, self.user, self.session, claim=claim, placed=True,
                                                 sandboxes=place, events=ATTEMPT_RUN_EVENTS), relay)
        await relay.job.done.wait()
        exit_, verdicts = relay.collected.exit or {}, relay.verdicts
        if exit_.get("type") != "exit":  # it did not run
            if exit_.get("error") == "sandbox_failed":
                raise Refused(503, "sandbox_failed", "The checks could not start. Try again in a moment.")
            raise Refused(503, exit_.get("error") or "checker_failed",
                          exit_.get("message") or "The checks could not start. Try again in a moment.")
        if exit_["reason"] not in RUN_ENDINGS and "not_gradable" not in verdicts:
            log.info("a checker run ended %s: %s", exit_["reason"], exit_.get("message"))
        awaited = {c.id for c in checks if c.kind != "output"} | {c["id"] for c in output_checks}
        if "not_gradable" not in verdicts and not awaited <= verdicts.keys() and exit_["reason"] != "timeout":
            # Past its time, what did not report failed (a slow program's doing); otherwise it broke.
            raise Refused(503, "checker_failed", "The checks stopped before they had all run. Press Check "
                                                 "again; if it happens again, tell your teacher.")
        return verdicts

    # -- the student's functions, served ---------------------------------------------------

    async def _call(self, parts: tuple[str, ...], claim: str, call: dict[str, Any]) -> dict[str, Any]:
        """A test's call of the student's function: the reply to send the
        checker (the student's value, what it raised, or why it failed)."""
        reply = {"type": "reply", "id": call.get("id")}
        if self.shown_phase and call.get("test") is None:
            # Made as tests.py loads, with arguments the student never sees: the answer could carry them
            # into a result shown. Such calls belong in a test.
            return {**reply, "failed": {"message": f"{call.get('function')}() is called outside a test "
                                                   "function of tests.py: move the call into a test."}}
        serving = await self._serving(parts, claim)
        if isinstance(serving, dict):  # it could not even be imported
            return {**reply, "failed": serving}
        job, sink = serving
        assert job.run is not None  # (it said it was ready: it runs)
        job.run.tell({"type": "call", "id": call.get("id"), "function": call.get("function"),
                      "args": call.get("args", []), "kwargs": call.get("kwargs", {})})
        try:
            answer = await asyncio.wait_for(self._reply_to(job, sink, call.get("id")), self.grader.cfg.CHECK_SECONDS)
        except asyncio.TimeoutError:
            await self._stop_serving()
            return {**reply, "failed": {"message": f"{call.get('function')}() did not return within "
                                                   f"{self.grader.cfg.CHECK_SECONDS} s: is there a loop that "
                                                   "never ends?"}}
        if answer is None:
            self.serving = None
            return {**reply, "failed": {"message": "Your program ended while a check was calling "
                                                   f"{call.get('function')}() (it called exit() or os._exit?)."}}
        return {**reply, **{k: answer[k] for k in ("value", "raised") if k in answer}}

    async def _serving(self, parts: tuple[str, ...], claim: str) -> tuple[Job, Collected] | dict[str, Any]:
        """The student's program serving the tests' calls, started if need
        be: (job, sink), or what failed when it could not be imported."""
        if self.serving is not None and not self.serving[0].done.is_set():
            return self.serving
        cfg = self.grader.cfg
        sink = Collected(channel_messages=asyncio.Queue(maxsize=16))
        self.ran.append(sink)
        job = self.grader.jobs.start(self._request(parts, claim, 3 * cfg.CHECK_SECONDS, mode=Mode.SERVE), sink)
        self.serving = (job, sink)
        first = await self._next_message(sink, job, cfg.CHECK_SECONDS)
        if first is not None and first.get("type") == "ready":
            return self.serving
        await self._stop_serving()
        if first is not None and first.get("type") == "import_failed":
            return {"message": "Your program could not be imported: " + _sentence(first.get("error") or {})}
        return {"message": "Your program did not start for the check: " +
                           ((sink.exit or {}).get("message") or "it did not answer") + "."}

    async def _reply_to(self, job: Job, sink: Collected, call_id: object) -> dict[str, Any] | None:
        """The served program's reply to call `call_id`; None once it has ended."""
        while True:
            message = await self._next_message(sink, job)
            if message is None:
                return None
            if message.get("type") == "reply" and message.get("id") == call_id:
                return message

    @staticmethod
    async def _next_message(sink: Collected, job: Job, timeout: float | None = None) -> dict[str, Any] | None:
        """The next channel message of a served program, or None once it ended."""
        assert sink.channel_messages is not None  # (a served program's sink keeps them)
        getting = asyncio.ensure_future(sink.channel_messages.get())
        ending = asyncio.ensure_future(job.done.wait())
        try:
            done, _ = await asyncio.wait([getting, ending], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ending.cancel()
            if not getting.done():
                getting.cancel()
        return getting.result() if getting in done else None

    async def _stop_serving(self) -> None:
        serving, self.serving = self.serving, None
        if serving is not None:
            await self._stop(serving)

    @staticmethod
    async def _stop(serving: tuple[Job, Collected]) -> None:
        job, _ = serving
        if job.run is not None:
            job.run.end_channel()
        try:
            await asyncio.wait_for(job.done.wait(), 1.0)
        except asyncio.TimeoutError:
            if job.run is not None:
                await job.run.stop("killed")
            await job.done.wait()


def _result(check: Check, verdict: dict[str, Any]) -> dict[str, Any]:
    """What record_attempt keeps of one verdict of the checker."""
    passed = verdict.get("passed") is True
    # Not its `line`: that is the tests file's, which the student does not have.
    shown = {k: verdict[k] for k in ("expected", "actual", "diff") if isinstance(verdict.get(k), str)}
    if check.kind == "output":
        shown.setdefault("input", check.input)
        shown["compare"] = check.compare  # the result says how the output was compared
        if shown_transcript(verdict.get("transcript")):
            shown["transcript"] = verdict["transcript"]
    return {"id": check.id, "passed": passed, "message": str(verdict.get("message") or ""),
            "shown": shown or None, "details": verdict}


def _sentence(error: dict[str, Any]) -> str:
    """An error the sandbox reported ({type, message, line}), as one sentence."""
    kind, message, line = error.get("type") or "Error", error.get("message") or "", error.get("line")
    where = f" on line {line}" if isinstance(line, int) else ""
    return f"{kind}{where}: {message}".strip().rstrip(":") + "."


def _usable(found: "Found") -> Exercise:
    """The exercise of `found`, which the exercises service gives the grader only usable."""
    assert found.exercise is not None  # (Exercises.exercise refuses one that is not)
    return found.exercise


def _now() -> datetime:
    return datetime.now(timezone.utc)
