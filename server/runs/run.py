"""One run of a student's program in a ready sandbox: from `go` to its end.

It turns the launcher's frames into protocol messages (see docs/run-protocol.md):
text is decoded and coalesced into `output` messages every few tens of
milliseconds, images are cut out of stdout, and every limit the server
enforces itself (wall time, idle time, output, CPU time of the whole run,
disk) ends the run with its reason. What the run writes is watched as it
writes it (disk_guard.py), and its home walked every few seconds besides. Sends are awaited, so a slow client
slows the reading of the launcher's frames, and the program blocks at its
next write: nothing buffers without bound.

A run may also have a control channel (`channel`, see docs/run-protocol.md, "The
control channel"): lines of JSON between the server and the program, which
holds its end at fd 3. What comes on it is the program's data, never the
launcher's word: it is parsed with bounds and handed to `channel`, which is
awaited (a flood goes at the server's pace), and it can never end a run.

The run ends when the launcher reports the program's exit (which it learns
from the kernel, on a channel the program never holds) or when the server
stops it: then the sandbox is killed as a whole and the run is over once
the kernel says its processes are gone. Its reason is one of a fixed set,
worked out from what the kernel and the server know.
"""
import asyncio
import base64
import codecs
import json
import logging
import signal
import time
import uuid
from typing import Any, Awaitable, Callable, Protocol

from .disk_guard import WriteGuard
from .explain import explain
from .protocol import BadFrame, ImageParser, frame, read_frame
from .sandbox import Exit, StartedSandbox
from .spec import Mode, RunSpec
from ..valid_text import valid_text

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.025
FLUSH_BYTES = 16 << 10
KILL_GRACE = 1.0  # seconds the output may take to end after the kill
WATCHDOG_SECONDS = 0.25
QUOTA_LOOK_SECONDS = 3.0
QUOTA_LOOK_CPU = 0.01  # seconds of CPU a run must have used since the last look at its home
CPU_GRACE_SECONDS = 1.0  # the launcher's relay shares the run's CPU count
STDERR_TAIL = 4096  # characters of stderr kept: a traceback's last lines, for the teacher's live view
CHANNEL_LINE = 256 << 10  # the largest message on a run's channel, either way (as the launcher's)
PROMPT_LIMIT = 4096  # characters of an input() prompt told with its `input` message; a longer one is output
MARK_BYTES = 64  # what a prompt or input mark counts as output: a flood of them ends at the output limit
CHANNEL_LINE_COST = 64  # output bytes a debug run's dropped channel line counts at least: a frame's work

# How a run ended, as the console's last line says it; for a limit, what to try.
MESSAGES = {
    "ok": "finished",
    "error": "stopped with an error",
    "error_code": "stopped with an error: it ended itself with the number {code}, as sys.exit({code}) does",
    "interrupted": "interrupted (Ctrl-C)",
    "timeout": "stopped: it ran for more than {wall} seconds. If it waits for something, "
               "check that it can finish; a loop that never ends keeps it running",
    "idle": "stopped: nothing was printed or typed for {idle} seconds. Run it again when you are ready "
            "to use it",
    "debug_idle": "stopped: the debugger waited for your next step for more than {debug_idle} seconds. "
                  "Press Debug to start again",
    "debug_busy": "stopped: it kept the computer busy while it was paused in the debugger (a thread of its "
                  "own, perhaps). Debug it without threads, or press Run",
    "cpu_limit": "stopped: it kept the computer busy for more than {cpu} seconds. Look for a loop that never "
                 "ends (a while whose condition stays True)",
    "memory_limit": "stopped: it used more than {memory} MB of memory. Look for a list or text that keeps "
                    "growing in a loop",
    "output_limit": "stopped: it printed more than {output} KB. Look for a print inside a loop that never ends",
    "disk_limit": "your program wrote more than your folder can hold ({quota}), so it was stopped. "
                  "Delete files you do not need, then run it again",
    "changed": "not run: this file was changed somewhere else after you last saw it. The new version is "
               "shown now; look at it, then press Run again",
    "killed": "stopped",
    "logged_out": "stopped: you were signed out. Sign in again to run it",
    "server_restart": "stopped: the server is restarting; run it again in a moment",
    "sandbox_lost": "stopped: the place it ran in ended unexpectedly. Run it again; if it happens again, "
                    "tell your teacher",
    "runner_lost": "stopped: the computer running your program stopped. Press Run again",
}


class Pauses(Protocol):
    """What a run asks of its debug session (debugging.DebugSession), whose
    pauses stop its clocks and whose answers it takes from the channel."""

    paused_since: float | None
    preparing_since: float | None

    def wants(self, size: int) -> bool: ...
    def overdue(self, now: float) -> bool: ...
    def paused_seconds(self, now: float) -> float: ...
    def idle(self, now: float, limit: float) -> bool: ...
    def working_unplaced(self, cpu: float | None) -> bool: ...
    def slow_words(self) -> str: ...
    def ended_words(self) -> str: ...


Send = Callable[[dict[str, Any]], Awaitable[None]]


class Run:
    def __init__(self, spec: RunSpec, sandbox: StartedSandbox, send: Send,
                 over_quota: Callable[[], Awaitable[bool]] | None = None, disk_guard: WriteGuard | None = None,
                 channel: Callable[[dict[str, Any]], Awaitable[Any]] | None = None,
                 debug: Pauses | None = None) -> None:
        if spec.mode in (Mode.SERVE, Mode.TEST) and channel is None:
            raise ValueError("an attempt talks on the run's channel: make the Run with one")
        self.spec = spec  # what runs (spec.py)
        self.limits = spec.limits
        self.sandbox = sandbox  # a ready sandbox
        self.send = send  # async callable taking a message dict
        self.channel = channel  # async callable taking each message from the run's channel; None: no channel
        self.channel_dropped = 0  # lines from the channel that were not JSON objects
        self.debug = debug  # a debug session's: it asks for the channel's lines, and pauses the clock
        self.over_quota = over_quota  # async () -> True when the home is over its quota
        self.disk_guard = disk_guard  # this run's, or None
        self.id = uuid.uuid4().hex[:12]
        self.stop_reason: str | None = None
        self.status: dict[str, Any] | None = None  # the launcher's exit frame
        self.reusable = False  # the launcher reported the end itself and serves the next run
        self.output_bytes = 0
        self.stderr_tail = ""  # the end of what the program wrote to stderr (STDERR_TAIL)
        self.last_activity = time.monotonic()
        self._images = ImageParser()
        self._pending: list[tuple[str, str]] = []  # [(stream, text)]
        self._pending_size = 0
        self._sent_output = False
        self._told_input = False  # an `input` message was sent and nothing typed since
        # stdout since input()'s prompt mark, until its input mark (None: not in a prompt).
        self._prompt: str | None = None
        self._send_lock = asyncio.Lock()
        self._decoders = {s: codecs.getincrementaldecoder("utf-8")("replace") for s in ("stdout", "stderr")}
        self._reading: asyncio.Future[Any] | None = None
        self._stopping: asyncio.Future[None] | None = None

    # -- input from the client ---------------------------------------------

    def cpu_seconds(self) -> float | None:
        """The CPU its sandbox has used (None where the kernel cannot say)."""
        return self.sandbox.cpu_seconds()

    def stdin(self, text: str) -> None:
        self.last_activity = time.monotonic()
        self._told_input = False
        # A lone surrogate (half an emoji) cannot be UTF-8: it becomes "?".
        self.sandbox.send(frame(b"d", text.encode("utf-8", "replace")))

    def interrupt(self) -> None:
        self.last_activity = time.monotonic()
        self._told_input = False
        self.sandbox.send(frame(b"i"))

    def end_of_input(self) -> None:
        self._told_input = False
        self.sandbox.send(frame(b"e"))

    def resize(self, cols: int, rows: int) -> None:
        self.sandbox.send(frame(b"r", json.dumps({"cols": cols, "rows": rows}).encode()))

    def tell(self, message: dict[str, Any]) -> None:
        """Send `message` (a dict) to the program on its channel, once the
        run has started. ValueError if it is larger than CHANNEL_LINE."""
        if self.channel is None:
            raise RuntimeError("this run has no channel")
        data = json.dumps(message, separators=(",", ":")).encode()  # ASCII: no newline inside
        if len(data) > CHANNEL_LINE:
            raise ValueError(f"a channel message of {len(data)} bytes is over the limit of {CHANNEL_LINE}")
        self.last_activity = time.monotonic()
        self.sandbox.send(frame(b"c", data))

    def end_channel(self) -> None:
        """The program reads the end of its channel after what it was told
        (an attempt's `serve` run then exits)."""
        self.sandbox.send(frame(b"C"))

    def stop(self, reason: str | None = None) -> "asyncio.Future[None]":
        """End the run now (the first reason given is the one reported); an
        awaitable that is done once the sandbox's processes are gone."""
        if self.stop_reason is None:
            self.stop_reason = reason
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._kill())
        return asyncio.shield(self._stopping)

    async def _kill(self) -> None:
        await self.sandbox.kill()
        # No process of the sandbox is left to write; if the output has not
        # ended anyway, it is not waited for.
        if self._reading is not None and not self._reading.done():
            done, _ = await asyncio.wait([self._reading], timeout=KILL_GRACE)
            if not done:
                self._reading.cancel()

    # -- the run ----------------------------------------------------------

    async def go(self, copy: dict[str, bytes] | None = None) -> dict[str, Any]:
        """Start the program the spec names and stream it to the client;
        return the exit message. `copy` ({name: bytes}): the files of a
        course folder to run a read-only copy of (the spec's own `files`
        otherwise), which the launcher makes and discards after the run."""
        started = self.last_activity = time.monotonic()
        # The kernel's counts as the sandbox's last run ended are this run's
        # start (its launcher did nothing since): two cgroup reads saved.
        oom_before, cpu_before = self.sandbox.counts or (self.sandbox.oom_kills(), self.sandbox.cpu_seconds())
        self.sandbox.send(self.spec.to_frame(channel=self.channel is not None, copy=copy))
        self._reading = asyncio.ensure_future(self._relay())
        watchdog = asyncio.ensure_future(self._watchdog(started, cpu_before))
        flusher = asyncio.ensure_future(self._flush_every())
        guarding = asyncio.ensure_future(self._guard(self.disk_guard)) if self.disk_guard else None
        try:
            await asyncio.wait([self._reading])
            try:
                self.status = self._reading.result()
            except (asyncio.CancelledError, BadFrame):
                self.status = None
            except Exception:  # the channel's reader failed: the run cannot go on
                log.exception("run %s: reading its frames failed", self.id)
                self.status = None
        finally:
            watchdog.cancel()
            flusher.cancel()
            if guarding:  # it thaws the sandbox if it froze it: waited for, as the sandbox may serve again
                guarding.cancel()
                await asyncio.gather(guarding, return_exceptions=True)
        self.reusable = self.status is not None and self.stop_reason is None
        if self.reusable:
            exit_ = Exit()
        else:  # stopped, or the launcher ended without a word: end the sandbox
            await self.stop()
            exit_ = await self.sandbox.wait()
        for kind, payload in self._images.finish():
            await self._stdout_item(kind, payload)
        for stream, decoder in self._decoders.items():
            self._queue(stream, decoder.decode(b"", final=True))
        await self._flush()
        oom_after, cpu_after = self.sandbox.oom_kills(), self.sandbox.cpu_seconds()
        self.sandbox.counts = (oom_after, cpu_after)
        oom = oom_after > oom_before or exit_.oom_killed
        cpu_used = cpu_after - cpu_before if cpu_after is not None and cpu_before is not None else None
        return self._exit_message(exit_, oom, cpu_used, time.monotonic() - started)

    async def _relay(self) -> dict[str, Any] | None:
        """The launcher's frames until its exit frame (the status it reports)
        or the end of its output (None)."""
        while True:
            item = await read_frame(self.sandbox.stdout)
            if item is None:
                return None
            kind, payload = item
            self.last_activity = time.monotonic()
            if kind == b"o":
                for part in self._images.feed(payload):
                    await self._stdout_item(*part)
            elif kind == b"e":
                await self._text("stderr", payload)
            elif kind == b"c":
                await self._from_channel(payload)
            elif kind == b"X":
                return _status(payload)
            else:
                raise BadFrame(f"unexpected {kind!r} during a run")

    async def _from_channel(self, payload: bytes) -> None:
        """A line the program wrote on its channel: its data, so whatever is
        not a JSON object is dropped (and counted), never an error."""
        if self.channel is None:
            return  # the run did not ask for one
        if self.debug is not None and not self.debug.wants(len(payload)):
            return self._dropped(payload)  # not asked for
        try:
            message = json.loads(payload.decode("utf-8")) if len(payload) <= CHANNEL_LINE else None
        except (ValueError, RecursionError):  # RecursionError: nested too deep to parse
            message = None
        if not isinstance(message, dict):
            if self.debug is not None:
                return self._dropped(payload)
            self.channel_dropped += 1
            return
        if self._pending:
            await self._flush()  # what it printed first is shown first (a pause after a step's output)
        taken = await self.channel(message)
        if self.debug is not None and not taken:
            self._dropped(payload)  # parsed, and not the answer the debugger waited for

    def _dropped(self, payload: bytes) -> None:
        """A debug run's channel line that was not taken: a flood of them is
        output, and ends at its limit (each costs a frame's work at least)."""
        self.channel_dropped += 1
        self._count(max(len(payload) + 1, CHANNEL_LINE_COST))

    async def _stdout_item(self, kind: str, payload: bytes | int) -> None:
        if isinstance(payload, int):  # ("dropped", its size)
            await self._text("stderr", f"\n[an image of {payload >> 10} KB was too large to show]\n".encode())
        elif kind == "text":
            await self._text("stdout", payload)
        elif kind == "image":
            await self._image(payload)
        elif kind == "prompt":
            if self._count(MARK_BYTES):
                self._prompt = ""
                self._told_input = False  # a new input() call: its wait is told, typed ahead or not
        elif kind == "input":
            if self._count(MARK_BYTES):
                await self._wants_input()

    async def _text(self, stream: str, data: bytes) -> None:
        if not self._count(len(data)):
            return
        text = self._decoders[stream].decode(data)
        if stream == "stdout" and self._prompt is not None:
            self._prompt = self._prompt + text if len(self._prompt) + len(text) <= PROMPT_LIMIT else None
        self._queue(stream, text)
        if self._pending_size >= FLUSH_BYTES or not self._sent_output:
            # The first output goes at once: it is what "Run feels instant" means.
            await self._flush()  # waits for the client: reading pauses meanwhile

    async def _image(self, b64: bytes) -> None:
        if not self._count(len(b64)):
            return
        try:
            base64.b64decode(b64, validate=True)
        except ValueError:
            return  # not an image: nothing to show
        await self._flush()
        async with self._send_lock:
            await self.send({"type": "image", "mime": "image/png", "data": b64.decode("ascii")})

    async def _wants_input(self) -> None:
        """The program waits in input(): the page is told once per wait
        (what is typed, or input()'s next prompt, starts the next), after
        the prompt before it, whose text the message repeats (an output
        check leaves it out of the output it compares)."""
        prompt, self._prompt = self._prompt, None
        if self._told_input:
            return
        self._told_input = True
        await self._flush()
        async with self._send_lock:
            await self.send({"type": "input", **({"prompt": prompt} if prompt else {})})

    def _count(self, n: int) -> bool:
        self.output_bytes += n
        if self.output_bytes > self.limits.output_kb << 10:
            self.stop("output_limit")
            return False
        return True

    def _queue(self, stream: str, text: str) -> None:
        text = valid_text(text)  # a NUL it printed is shown as \0, as it is stored and sent everywhere
        if text:
            self._pending.append((stream, text))
            self._pending_size += len(text)
            if stream == "stderr":
                self.stderr_tail = (self.stderr_tail + text[-STDERR_TAIL:])[-STDERR_TAIL:]

    async def _flush(self) -> None:
        async with self._send_lock:
            batch, self._pending, self._pending_size = self._pending, [], 0
            merged: list[tuple[str, list[str]]] = []
            for stream, text in batch:  # one message per run of the same stream
                if merged and merged[-1][0] == stream:
                    merged[-1][1].append(text)
                else:
                    merged.append((stream, [text]))
            for stream, texts in merged:
                self._sent_output = True
                await self.send({"type": "output", "stream": stream, "data": "".join(texts)})

    async def _flush_every(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            if self._pending:
                await self._flush()

    async def _watchdog(self, started: float, cpu_before: float | None) -> None:
        limits = self.limits
        next_quota_look, cpu_at_quota_look = started + QUOTA_LOOK_SECONDS, cpu_before
        while True:
            await asyncio.sleep(WATCHDOG_SECONDS)
            now = time.monotonic()
            debug = self.debug
            if debug is not None and debug.overdue(now):
                return await self.stop("debug_slow")  # a watch or a value's __repr__ that never finishes
            if now - started - (debug.paused_seconds(now) if debug else 0) > limits.wall_seconds:
                return await self.stop("timeout")  # time paused in the debugger does not count
            cpu = self.sandbox.cpu_seconds()
            if debug is not None and debug.paused_since is not None:
                if debug.idle(now, limits.debug_idle_seconds):
                    return await self.stop("debug_idle")
                if debug.working_unplaced(cpu):
                    return await self.stop("debug_busy")  # it said it was paused, the kernel says not
            elif now - self.last_activity > limits.idle_seconds:
                return await self.stop("idle")
            if cpu is not None and cpu_before is not None and \
                    cpu - cpu_before > limits.cpu_seconds + CPU_GRACE_SECONDS:
                return await self.stop("cpu_limit")  # many processes, each under its own limit
            # The home is walked only while the program works: one waiting
            # for input writes nothing.
            working = cpu is None or cpu_at_quota_look is None or cpu - cpu_at_quota_look > QUOTA_LOOK_CPU
            if self.over_quota and now >= next_quota_look and working:
                if await self.over_quota():
                    log.info("run %s stopped: its home went over its quota (walked every %.0f s)",
                             self.id, QUOTA_LOOK_SECONDS)
                    return await self.stop("disk_limit")
                next_quota_look, cpu_at_quota_look = time.monotonic() + QUOTA_LOOK_SECONDS, cpu

    async def _guard(self, guard: WriteGuard) -> None:
        """Stop the run once it has written its home past its quota (`guard`: its disk guard)."""
        try:
            if not await guard.over_quota():
                return
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the home's walk failed: the periodic one still watches
            log.warning("the disk guard of run %s stopped watching: %r", self.id, e)
            return
        log.info("run %s stopped: it wrote %d bytes, past what its home had left (%d walks)",
                 self.id, guard.wrote(), guard.walks)
        if self.stop_reason is None:
            self.stop_reason = "disk_limit"
        guard.kill()  # still frozen: killed before any of its processes writes again
        await self.stop()

    def _exit_message(self, exit_: Exit, oom: bool, cpu_used: float | None, duration: float) -> dict[str, Any]:
        status: dict[str, Any] = self.status or {}
        code = status.get("code") if self.status else exit_.code
        sig = status.get("signal") if self.status else exit_.signal
        limits = self.limits
        if self.stop_reason:
            reason = self.stop_reason
        elif status.get("changed"):
            reason = "changed"
        elif oom or status.get("memory_error"):
            reason = "memory_limit"
        elif self.status is None:
            reason = "runner_lost" if exit_.lost else "sandbox_lost"
        elif sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu_used is not None
                                       and cpu_used >= limits.cpu_seconds):
            reason = "cpu_limit"
        elif status.get("interrupted") and (code == 130 or sig == signal.SIGINT):
            reason = "interrupted"
        else:
            reason = "ok" if code == 0 else "error"
        # Ended while the debugger worked out a pause: the student's watch or value did it, not the program.
        working_out = self.debug is not None and self.debug.preparing_since is not None
        if working_out and reason in ("cpu_limit", "idle", "timeout"):
            reason = "debug_slow"
        if reason == "debug_slow":
            assert self.debug is not None  # (only a debug run stops as debug_slow)
            words = self.debug.slow_words()
        elif working_out and reason in ("ok", "error"):
            assert self.debug is not None  # (working_out)
            words = self.debug.ended_words()
        else:
            words = MESSAGES[reason].format(wall=limits.wall_seconds, idle=limits.idle_seconds,
                                            cpu=limits.cpu_seconds, memory=limits.memory_mb,
                                            output=limits.output_kb, quota=_megabytes(limits.quota_bytes),
                                            debug_idle=limits.debug_idle_seconds)
        # A reason of its own is reported as the limit it is, in its own words.
        reason = {"idle": "timeout", "debug_idle": "timeout", "debug_slow": "timeout",
                  "debug_busy": "cpu_limit"}.get(reason, reason)
        if reason == "error" and code not in (None, 1):  # 1 is Python's own, for the error its traceback shows
            words = MESSAGES["error_code"].format(code=code)
        ended: dict[str, Any] = {"type": "exit", "run_id": self.id, "code": code, "signal": sig, "reason": reason,
                 "message": words, "duration": round(duration, 3)}
        if reason == "error":
            explanation = explain(self.stderr_tail)  # untrusted text: matched, never run
            if explanation:
                ended["explanation"] = explanation
        return ended


def _megabytes(n: int) -> str:
    return f"{n / (1 << 20):.3g} MB" if n >= 1 << 20 else f"{n >> 10} KB"


def _status(payload: bytes) -> dict[str, Any]:
    """The launcher's exit frame, checked field by field."""
    try:
        value = json.loads(payload)
    except ValueError:
        raise BadFrame("exit frame is not JSON") from None
    if not isinstance(value, dict):
        raise BadFrame("exit frame is not an object")

    def small_int(key: str, hi: int) -> int | None:
        v = value.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= hi else None
    return {"code": small_int("code", 255), "signal": small_int("signal", 64),
            "interrupted": value.get("interrupted") is True, "memory_error": value.get("memory_error") is True,
            "changed": value.get("changed") is True}

