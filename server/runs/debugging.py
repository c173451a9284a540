"""A debug session: the server's side of a run under the debugger.

The debugger itself runs inside the student's program, in the sandbox
(child/debugging.py, whose docstring is the design note): it pauses the
program and writes `paused` lines on the run's control channel. This
module owns the rest, on the trusted side:

- the commands from the IDE (`step`, `step_in`, `step_out`, `continue`,
  `frame`, `breakpoints`), sent to the program on its channel only while
  it is paused, each with the breakpoints;
- what comes back, which the student's code could have written: a line is
  parsed only when the session asked for one (`expecting`), at most
  PARSED_PER_COMMAND lines per command, and only if it is small enough;
  every line not taken (dropped unparsed, or parsed and not the answer)
  counts towards the run's output limit, so a flood ends the run and the
  server's work on one is bounded. A pause is validated and rebuilt field
  by field, cut to bounds (`clean_pause`), and sent to the IDE as a
  `paused` message; before it, the debugger says it is working one out
  (`pausing`) and, if a watch or a value is slow, which (`slow`);
- the clocks: while paused, the run's wall-clock limit does not tick
  (`paused_seconds`), and a pause with no command for
  RUN_DEBUG_IDLE_SECONDS ends the run (`idle`). A command on its way is
  not a pause: the wall clock ticks from the moment it goes to the
  program. Working out a pause (watches, the values' __repr__: the
  student's code, run by the debugger) has a deadline, PAUSE_SECONDS from
  `pausing` or from a `frame`/`watches` command (`overdue`): past it the
  run ends with a sentence naming what was slow (`slow_words`), and its
  place is given back with everything else. A program can claim a
  pause at most once per command, so it cannot make its run last longer
  than the student's own steps allow; CPU, memory and output limits are
  the run's, as always, and the run ends only when the kernel says so;
- its place among the host's running programs (RUN_MAX_CONCURRENT): a
  paused program gives it back (`Places.give_back`), so a class that
  debugs at once does not make everyone else wait behind programs that
  wait for a student, and each command takes one again first (`take`: at
  once if one is free, else in the line like a run, told `queued`). The
  pause is the program's word, so the kernel confirms it: a program that
  uses more than PAUSED_CPU_SECONDS of CPU while it holds no place
  (`working_unplaced`, run.py's watchdog) is stopped. Where the sandbox
  cannot count CPU, a paused program keeps its place.
"""
import asyncio
import time
from typing import Any, Awaitable, Callable, Protocol

from ..errors import Refused
from ..valid_text import valid_text
from .admission import QueueFull

LINE_BYTES = 64 << 10  # the longest `paused` line parsed (the debugger keeps under 60 KiB)
BREAKPOINT_FILES = 100
BREAKPOINT_LINES = 1000  # in all
STACK = 64
VARIABLES = 200  # per scope
ITEMS = 50  # inside one value
DEPTH = 4
NODES = 5000  # values in one pause, all scopes together
TEXT = 300
NAME = 100
PATH = 1024
WATCHES = 10
WATCH = 200
PAUSED_CPU_SECONDS = 1.0  # CPU a paused program may use (its pause's last bytes, a signal): far more than it needs
PAUSE_SECONDS = 10  # to work out a pause (the debugger gives the student's code 1 s of it, then interrupts it)
PARSED_PER_COMMAND = 8  # lines parsed while a command's answer is awaited (it takes 3: pausing, slow, paused)


class Places(Protocol):
    """A debug run's place among the host's running programs (its Job's)."""

    def give_back(self) -> None:
        """The program waits for the student: its place goes to the next in line."""

    async def take(self) -> bool:
        """Wait for a place (at once if this run holds one): False if nobody waits any more.
        Raises admission.QueueFull when the line is full."""


class Program(Protocol):
    """What a debug session does to its program (the job's run.Run)."""

    def tell(self, message: dict[str, Any]) -> None:
        """Send `message` on the program's channel."""

    def interrupt(self) -> None:
        """Ctrl-C."""

    def cpu_seconds(self) -> float | None:
        """The CPU its sandbox has used, as the kernel counts it (None: it cannot)."""


class DebugSession:
    """One debug run's commands, pauses, clocks and place. Its job owns it
    and its run; it reaches them only through `Places` and `Program`."""

    def __init__(self, send: Callable[[dict[str, Any]], Awaitable[None]], places: Places,
                 breakpoints: dict[str, list[int]] | None = None, watches: list[str] | None = None):
        self.send = send  # a message to the IDE
        self.places = places
        self.program: Program | None = None  # once it exists (attach)
        self.breakpoints = breakpoints or {}
        self.watches = watches or []
        self.frame = 0  # the frame the last pause showed
        self.expecting = True  # one `paused` line will be taken: the first pause
        self.paused_since: float | None = None  # monotonic time the program paused, None while it runs
        self.paused_total = 0.0
        self.last_command = time.monotonic()
        self.last_pause: dict[str, Any] | None = None  # the last `paused` sent, sent again if a command cannot go on
        self.cpu_unplaced: float | None = None  # the run's CPU seconds when it gave its place back; None: it holds one
        self.going_on: asyncio.Future[None] | None = None  # the task of a command waiting for a place
        self.parsed = 0  # lines parsed since the last command
        self.preparing_since: float | None = None  # monotonic time the program began working out a pause, None if not
        self.slow: dict[str, Any] | None = None  # what it said was slow: {"watch": index} or {"value": name}
        self.cause: str | None = None  # the id of the command the next pause answers (None: the first pause, the run's)

    def attach(self, program: Program) -> None:
        self.program = program

    @property
    def _program(self) -> Program:
        assert self.program is not None  # attached as its run starts, before any command or line of it
        return self.program

    async def close(self) -> None:
        """The run ended: a command still waiting for a place gives up."""
        going_on = self.going_on
        if going_on is not None and not going_on.done():  # (waiting_for_place)
            going_on.cancel()
            await asyncio.gather(going_on, return_exceptions=True)

    # -- the clocks and the place (run.py's watchdog) --------------------------------

    def paused_seconds(self, now: float) -> float:
        """Seconds the program has spent paused, waiting for the student."""
        return self.paused_total + (now - self.paused_since if self.paused_since is not None else 0.0)

    def idle(self, now: float, limit: float) -> bool:
        """Paused with no command from the student for more than `limit` seconds
        (a command waiting for a place is not idle)."""
        paused_since = self.paused_since
        return self.waits_for_student and paused_since is not None and \
            now - max(paused_since, self.last_command) > limit

    @property
    def waits_for_student(self) -> bool:
        """Paused, and no command on its way to it (one waiting for a place is on its way)."""
        return self.paused_since is not None and not self.expecting

    def overdue(self, now: float) -> bool:
        """Has working out a pause (the student's watches, __repr__...) taken too long?"""
        return self.preparing_since is not None and now - self.preparing_since > PAUSE_SECONDS

    def slow_words(self) -> str:
        """Why a run ended while its pause was worked out (overdue, or its
        CPU or idle limit then): what was slow, in the student's words."""
        what = "the values to show at the pause (a watch, or a value whose __repr__ never finished)"
        slow = self.slow or {}
        if isinstance(slow.get("watch"), int) and 0 <= slow["watch"] < len(self.watches):
            what = f"your watch {self.watches[slow['watch']]!r}"
        elif isinstance(slow.get("value"), str):
            what = f"the value of {slow['value'][:NAME]!r} (its __repr__, len or items never finished)"
        return (f"stopped: the debugger could not finish working out {what}: it took too long. Remove that "
                "watch, or make the value quicker to show, then press Debug again")

    def ended_words(self) -> str:
        """Why a run ended by itself while its pause was worked out: a watch or a value's code ended it."""
        return ("ended while the debugger worked out the values to show at a pause: a watch, or a value's "
                "__repr__, ended the program (os._exit, perhaps). Remove that watch, then press Debug again")

    def working_unplaced(self, cpu: float | None) -> bool:
        """Has the program, paused with no place, used CPU it should not (the kernel's
        count, `cpu` seconds now)? Then its pause was not one."""
        return self.cpu_unplaced is not None and cpu is not None and cpu - self.cpu_unplaced > PAUSED_CPU_SECONDS

    # -- from the IDE ------------------------------------------------------------------

    def command(self, kind: str, msg: dict[str, Any]) -> None:
        """A command from the IDE: sent to the paused program, with the
        breakpoints, once it has a place; refused while it runs. The pause
        that answers it names its `id` (`re`)."""
        cause = msg.get("id")
        if kind == "breakpoints":
            self.breakpoints = clean_breakpoints(msg.get("breakpoints"))
            if self.paused_since is None:  # it runs: it takes them now (paused: with the next command)
                self._program.tell({"type": "breakpoints", "breakpoints": self.breakpoints})
            return
        if kind == "watches":
            self.watches = clean_watches(msg.get("watches"))
            if not self.waits_for_student:
                return  # evaluated at the next pause
            kind, msg = "frame", {"frame": self.frame}  # evaluated now: the same pause again
        if not self.waits_for_student:
            raise Refused(409, "not_paused", "The program is running, not paused: wait until it stops at a "
                                             "line, or press Stop.")
        message: dict[str, Any] = {"type": kind, "breakpoints": self.breakpoints, "watches": self.watches}
        if kind == "frame":
            frame = msg.get("frame")
            if isinstance(frame, bool) or not isinstance(frame, int) or not 0 <= frame < STACK:
                raise Refused(400, "bad_field", f"'frame' must be a whole number from 0 to {STACK - 1}.")
            message["frame"] = frame
        self._go_on(lambda: self._program.tell(message), runs_again=kind != "frame", cause=cause)

    def interrupt(self, cause: str | None = None) -> None:
        """Ctrl-C (the message's id: `cause`): a paused program takes it once
        it has a place again (it may go on, if it catches it); a running one at once."""
        if not self.waits_for_student:
            self._program.interrupt()
        else:
            self._go_on(self._program.interrupt, runs_again=True, cause=cause)

    def _go_on(self, act: Callable[[], None], runs_again: bool, cause: str | None = None) -> None:
        """`act()` (wake the program) once it has a place; the next pause is
        taken, and names `cause`."""
        self.cause = cause
        self.last_command = time.monotonic()
        self.expecting = True
        self.parsed = 0
        self.slow = None
        self.going_on = asyncio.ensure_future(self._placed(act, runs_again))

    async def _placed(self, act: Callable[[], None], runs_again: bool) -> None:
        try:
            if not await self.places.take():
                return  # nobody waits any more
        except QueueFull:
            self.expecting = False
            await self.send(self._answer({"type": "notice",  # (not an `error`: the run goes on)
                                          "message": "The server is busy, so your program stays paused. Try the "
                                                     "step again in a moment."}))
            assert self.last_pause is not None  # (it is paused)
            await self.send(self._answer(self.last_pause))  # the IDE shows it paused again
            return
        self.cpu_unplaced = None
        now = time.monotonic()  # on its way, a command is not a pause: the wall clock ticks again
        assert self.paused_since is not None  # (a command goes on only from a pause)
        self.paused_total += now - self.paused_since
        self.paused_since = None
        if not runs_again:  # (`frame`, `watches`): it works out the pause again at once
            self.preparing_since = now
        act()

    # -- from the program ------------------------------------------------------------

    def wants(self, size: int) -> bool:
        """Is a line of `size` bytes from the program to be parsed? (Else it
        is dropped, and counted as output.) At most PARSED_PER_COMMAND are."""
        if not self.expecting or self.waiting_for_place or size > LINE_BYTES or self.parsed >= PARSED_PER_COMMAND:
            return False
        self.parsed += 1
        return True

    @property
    def waiting_for_place(self) -> bool:
        return self.going_on is not None and not self.going_on.done()

    async def from_program(self, message: dict[str, Any]) -> bool:
        """A line the session asked for (wants): True if it was taken (a
        pause, or news of one being worked out), else it counts as output."""
        if not self.expecting or self.waiting_for_place:
            return False  # (a line written while its command waits for a place is not the answer to it)
        kind = message.get("type")
        if kind == "pausing" and self.preparing_since is None:
            self.preparing_since = time.monotonic()
            return True
        if kind == "slow" and self.slow is None:
            watch, value = message.get("watch"), message.get("value")
            self.slow = {"watch": watch} if _line(watch) is not None else {"value": _text(value, NAME)}
            self.preparing_since = self.preparing_since or time.monotonic()
            return True
        pause = clean_pause(message)
        if pause is None:
            return False
        self.expecting = False
        self.preparing_since = None
        self.frame = pause["frame"]
        if self.paused_since is None:
            self.paused_since = time.monotonic()
        cpu = self._program.cpu_seconds()
        if cpu is not None:  # the kernel can confirm the pause: the place goes to the next in line
            self.cpu_unplaced = cpu
            self.places.give_back()
        self.last_pause = pause
        await self.send(self._answer(pause))
        return True

    def _answer(self, message: dict[str, Any]) -> dict[str, Any]:
        """`message`, naming the command it answers (else the run's message names it: manager.Reply)."""
        return message if self.cause is None else {**message, "re": self.cause}


def options(msg: dict[str, Any]) -> dict[str, Any]:
    """The debugger's options in a `debug` message: its breakpoints and watches, validated."""
    return {"breakpoints": clean_breakpoints(msg.get("breakpoints", {})), "watches": clean_watches(msg.get("watches", []))}


def clean_watches(value: object) -> list[str]:
    """The watch expressions as the IDE sent them: a list of short texts."""
    if not isinstance(value, list) or len(value) > WATCHES or not all(
            isinstance(w, str) and 0 < len(w) <= WATCH and "\x00" not in w for w in value):
        raise Refused(400, "bad_field", f"'watches' must be a list of at most {WATCHES} expressions of at most "
                                        f"{WATCH} characters.")
    return value


def clean_breakpoints(value: object) -> dict[str, list[int]]:
    """{path: [line, ...]} as the IDE sent it, validated: paths relative to
    the home (no `..`, not absolute), lines whole numbers, bounded."""
    if not isinstance(value, dict) or len(value) > BREAKPOINT_FILES:
        raise Refused(400, "bad_field", f"'breakpoints' must map at most {BREAKPOINT_FILES} file paths to lists "
                                        "of line numbers.")
    out: dict[str, list[int]] = {}
    count = 0
    for path, lines in value.items():
        if _path(path) is None or not isinstance(lines, list) or not all(
                isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 10 ** 6 for n in lines):
            raise Refused(400, "bad_field", "'breakpoints' must map file paths of your folder to lists of line "
                                            "numbers.")
        count += len(lines)
        if count > BREAKPOINT_LINES:
            raise Refused(400, "bad_field", f"At most {BREAKPOINT_LINES} breakpoints can be set.")
        if lines:
            out[path] = sorted(set(lines))
    return out


def _path(value: object) -> str | None:
    """A path relative to the run's folder, as the program says it; None if not one."""
    if not isinstance(value, str) or not 0 < len(value) <= PATH or value.startswith("/") or "\x00" in value:
        return None
    if any(part in ("", ".", "..") for part in value.split("/")):
        return None
    return value


def _line(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 10 ** 7 else None


def _text(value: object, limit: int) -> str | None:
    return valid_text(value[:limit]) if isinstance(value, str) else None  # a NUL in a value is shown as \0


def clean_pause(message: dict[str, Any]) -> dict[str, Any] | None:
    """The IDE's `paused` message rebuilt from what the program wrote, or
    None when it is not one: nothing of it passes unvalidated."""
    if message.get("type") != "paused":
        return None
    stack = message.get("stack")
    if not isinstance(stack, list) or not 0 < len(stack) <= STACK:
        return None
    frames: list[dict[str, Any]] = []
    for entry in stack:
        if not isinstance(entry, dict):
            return None
        frames.append({"function": _text(entry.get("function"), NAME) or "?", "file": _path(entry.get("file")),
                       "line": _line(entry.get("line"))})
    selected = message.get("frame")
    if isinstance(selected, bool) or not isinstance(selected, int) or not 0 <= selected < len(frames):
        return None
    budget = [NODES]
    pause: dict[str, Any] = {"type": "paused", "file": _path(message.get("file")), "line": _line(message.get("line")),
             "stack": frames, "frame": selected, "variables": _scope(message.get("variables"), budget)}
    if pause["variables"] is None or pause["file"] is None or pause["line"] is None:
        return None
    for scope in ("globals", "watches"):
        if scope in message:
            pause[scope] = _scope(message.get(scope), budget)
            if pause[scope] is None:
                return None
    return pause


def _scope(values: object, budget: list[int]) -> list[dict[str, Any]] | None:
    if not isinstance(values, list):
        return None
    out: list[dict[str, Any]] = []
    for value in values[:VARIABLES]:
        node = _value(value, DEPTH, budget)
        if node is None:
            return None
        out.append(node)
    return out


def _value(node: object, depth: int, budget: list[int]) -> dict[str, Any] | None:
    """One variable (and its insides, to `depth`), rebuilt; None if malformed."""
    if not isinstance(node, dict) or budget[0] <= 0:
        return None
    budget[0] -= 1
    name, kind, text = _text(node.get("name"), NAME), _text(node.get("type"), NAME), _text(node.get("value"), TEXT)
    if name is None or kind is None or text is None:
        return None
    out: dict[str, Any] = {"name": name, "type": kind, "value": text}
    if node.get("changed") is True:
        out["changed"] = True
    items = node.get("items")
    if isinstance(items, list) and depth > 0:
        inside: list[dict[str, Any]] = []
        for item in items[:ITEMS]:
            child = _value(item, depth - 1, budget)
            if child is None:
                break
            inside.append(child)
        out["items"] = inside
        more = node.get("more")
        if isinstance(more, int) and not isinstance(more, bool) and 0 < more < 10 ** 12:
            out["more"] = more
    return out
