"""Starting sandboxes: a few at once per worker, the others in line.

A sandbox's start costs CPU (bubblewrap's namespaces, the launcher's
interpreter, the seccomp filter). When a whole class opened the IDE on a
busy host, every start ran at once, all of them missed their deadline to
be ready, and students read "The sandbox could not start" while nothing
was broken. So a worker starts at most `at_once` sandboxes at a time
(SANDBOX_STARTS_AT_ONCE, by default its share of the host's CPUs) and the
others wait in line (admission.Admission): those somebody waits for (Run
or Check pressed) before those started ahead of need (a student's ready
sandbox, an attempt's prepared one), which are `hurry`-ed to the front of
those when their student presses Run. A student waiting is told their
place and an estimate from the latest starts. The deadline to be ready
counts from the start, not from the line, and the launcher starts at
normal CPU priority (cgroups.RunGroup.starting): it is the server's code
until it is ready. A start that fails is tried once more without telling
anyone; only a second failure reaches the student, and then its reason
goes to the log and /api/status (pyclassroom_sandbox_start_failures_total).
"""
import asyncio
import dataclasses
import logging
import os
import random
import time
from collections import deque
from dataclasses import dataclass

from .. import metrics
from ..config import Config
from .admission import Admission, Notify, Place, QueueFull
from .protocol import BadFrame, read_frame
from .sandbox import SandboxKind, StartedSandbox
from .spec import Limits

log = logging.getLogger(__name__)

READY_TIMEOUT = 20.0  # from the start (not the line) to the launcher's ready
ATTEMPTS = 2  # a failed start is tried once more before anyone is told
FIRST_GUESS = 0.3  # seconds a start takes, until this worker has seen one (a seed of 1 s told 8 s for 2)
WAITING_MAX = 4096  # starts in line on a worker: one per open IDE and attempt, far below this


@dataclass
class Sandboxed:
    """A sandbox whose launcher said ready, and how many runs it may still serve."""
    sandbox: StartedSandbox
    runs_left: int


class Starts:
    """Every sandbox start of this worker (see the module docstring)."""

    def __init__(self, kind: SandboxKind, cfg: Config, processes: int = 1) -> None:
        self.kind, self.cfg = kind, cfg
        self.at_once = at_once(cfg, processes)
        self.line = Admission(self.at_once, WAITING_MAX)
        self.took: deque[float] = deque(maxlen=20)  # seconds the latest starts took, for estimates

    async def start(self, home: str, uid: int | None, what: str = "", place: Place | None = None) -> Sandboxed | None:
        """A sandbox for `home`, its programs run as `uid`, once its launcher
        is ready; None (logged) when it could not start, twice. `place`: its
        place in the line, asked for ahead of need (to `hurry` it later) or
        with somebody to tell their position; `what` says whose it is in
        the log ("check ")."""
        metrics.SANDBOX_STARTING.set(len(self.line.waiting) + (self.line.running >= self.line.slots))
        try:
            await self.line.enter(None, place)
        except QueueFull:
            self._failed("line_full", what, "too many sandboxes wait to start")
            return None
        metrics.SANDBOX_STARTING.set(len(self.line.waiting))
        try:
            for attempt in range(1, ATTEMPTS + 1):
                began = time.monotonic()
                sandboxed, why, said = await self._start_once(home, uid)
                if sandboxed is not None:
                    took = time.monotonic() - began
                    self.took.append(took)
                    metrics.SANDBOX_START.observe(took)
                    return sandboxed
                if attempt < ATTEMPTS:
                    metrics.SANDBOX_START_RETRIES.inc()
                    log.warning("a %s %ssandbox did not start (%s: %s); trying once more",
                                self.kind.name, what, why, said)
            self._failed(why, what, said)
            return None
        finally:
            self.line.leave()

    def hurry(self, place: Place, notify: Notify) -> None:
        """Somebody now waits for the start at `place`: it goes first among
        those started ahead of need, and `notify(position)` hears where it is."""
        self.line.hurry(place, notify)

    def estimate(self, position: int) -> float:
        """Seconds until the start at `position` in the line is ready."""
        each = sum(self.took) / len(self.took) if self.took else FIRST_GUESS
        return round(each * (1 + position / self.at_once), 1)

    async def _start_once(self, home: str, uid: int | None) -> tuple[Sandboxed, None, None] | tuple[None, str, str]:
        """(Sandboxed, None, None), or (None, the reason's code, what was said)."""
        runs = runs_per_sandbox(self.cfg.RUN_SANDBOX_RUNS) if self.kind.reusable else 1
        settings = {"limits": dataclasses.asdict(Limits.of(self.cfg).program()), "nice": 10, "runs": runs}
        try:
            sandbox = await self.kind.prepare(home, uid, settings)
        except Exception as e:
            log.debug("sandbox start failed", exc_info=True)
            return None, "did_not_start", f"{type(e).__name__}: {e}"
        why = await not_ready(sandbox)
        if why is not None:
            await discard(sandbox)
            return None, why, sandbox.diagnostics() or "(it said nothing)"
        return Sandboxed(sandbox, runs), None, None

    def _failed(self, why: str | None, what: str, said: str | None) -> None:
        metrics.SANDBOX_START_FAILURES.labels(why).inc()
        log.error("a %s %ssandbox could not start (%s): %s", self.kind.name, what, why, said)


def at_once(cfg: Config, processes: int) -> int:
    """How many sandboxes one worker starts at a time: the setting, or its
    share of the host's CPUs (a start keeps about one CPU busy)."""
    if cfg.SANDBOX_STARTS_AT_ONCE:
        return max(1, cfg.SANDBOX_STARTS_AT_ONCE // processes)
    return max(1, (os.cpu_count() or 1) // processes)


def runs_per_sandbox(most: int) -> int:
    """How many runs a new sandbox serves: `most`, less up to a fifth at
    random, so that a class that opened the IDE together does not replace
    all its sandboxes at the same run."""
    return max(1, most - random.randrange(most // 5 + 1))


async def not_ready(sandbox: StartedSandbox, timeout: float = READY_TIMEOUT) -> str | None:
    """Wait for the launcher's `ready` frame: None once it came, else why not
    (`too_slow`, `ended`, `broken`)."""
    try:
        item = await asyncio.wait_for(read_frame(sandbox.stdout), timeout)
    except asyncio.TimeoutError:
        return "too_slow"
    except BadFrame:
        return "broken"
    if item is None:
        return "ended"
    if item[0] != b"R":
        return "broken"
    await sandbox.on_ready()
    return None


async def ready(sandbox: StartedSandbox) -> bool:
    """Is a sandbox back from a run ready to serve another?"""
    return await not_ready(sandbox) is None


async def discard(sandbox: StartedSandbox) -> None:
    await sandbox.kill()
    await sandbox.release()
