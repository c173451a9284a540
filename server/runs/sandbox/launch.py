"""What every kind of sandbox shares (see __init__.py for the interface):
the launcher (child/launcher.py) and its settings, the limits it sets, the
seccomp filter (child/seccomp_filter.py), the environment of student code,
the kernel's exit, and `LauncherProcess`, a launcher started as a child
process of the server (the `local` and `process` kinds' sandbox).
"""
import asyncio
import base64
import collections
import functools
import logging
import os
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from ...config import Config
from .. import cgroups
from ..disk_guard import GroupWrites

if TYPE_CHECKING:
    from . import HomeCopy

log = logging.getLogger(__name__)

CHILD = os.path.join(os.path.dirname(os.path.dirname(__file__)), "child")  # runs/child/: code run in the sandbox
with open(os.path.join(CHILD, "launcher.py"), encoding="utf-8") as _f:
    LAUNCHER_SOURCE = _f.read()
with open(os.path.join(CHILD, "testing.py"), encoding="utf-8") as _f:
    TESTING_SOURCE = _f.read()  # the attempts' code, sent in the `go` of an attempt's run (spec.py: RunSpec.to_frame)
with open(os.path.join(CHILD, "debugging.py"), encoding="utf-8") as _f:
    DEBUGGING_SOURCE = _f.read()  # the debugger, sent in a debug run's `go` (run.py: Run.execute)
with open(os.path.join(CHILD, "import_guard.py"), encoding="utf-8") as _f:
    IMPORT_GUARD_SOURCE = _f.read()  # a code check's no_import rules, enforced as its program runs (Run's `forbid`)
SECCOMP_BUILDER = os.path.join(CHILD, "seccomp_filter.py")
SANDBOX_HOME = "/home/student"
MPL_CACHE_IN_SANDBOX = "/opt/pyclassroom/matplotlib"
STREAM_LIMIT = 64 << 10  # bytes read ahead from a sandbox before its writes block
GROUP_NICE = 19  # a sandbox session's CPU group, where no cgroup ranks it: the lowest weight
TMP_BYTES = 64 << 20  # /tmp and /dev/shm: tmpfs, counted in the run's memory
SHM_BYTES = 64 << 20
# What the launcher (an interpreter) and the tmpfs files need on top of what
# the program itself may use: the run's memory limit is RUN_MEMORY_MB plus this.
MEMORY_HEADROOM_MB = 96
LAUNCHER_PROCESSES = 4  # the launcher (and bubblewrap's), plus slack for its fork
STDERR_TAIL = 4096  # of what the launcher or bubblewrap say, for the log when a sandbox fails
KILL_WAIT = 10.0  # seconds a killed launcher may take to be reaped


class SandboxError(RuntimeError):
    """The sandbox cannot work with these settings."""


@dataclass
class ProgramLimits:
    """What the launcher sets on each program (per process): a sandbox's
    own (its settings, from RUN_*) and a run's (spec.py: Limits.program),
    of which it keeps the lower."""
    cpu_seconds: int
    memory_bytes: int
    processes: int
    file_bytes: int
    open_files: int


def group_limits(cfg: Config) -> cgroups.GroupLimits:
    """What the run's cgroup holds everything it starts to."""
    return cgroups.GroupLimits(memory_bytes=(cfg.RUN_MEMORY_MB + MEMORY_HEADROOM_MB) << 20,
                          processes=cfg.RUN_PROCESSES + LAUNCHER_PROCESSES, cpus=1.0)


@dataclass
class Exit:
    """How the launcher ended, as the kernel (or the container engine) said;
    `lost`: the runner it ran on stopped answering, so nobody can say."""
    code: int | None = None
    signal: int | None = None
    oom_killed: bool = False
    lost: bool = False


def environment(home: str) -> dict[str, str]:
    """The whole environment of student code: nothing of the server's."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8",
            "TERM": "xterm-256color", "MPLCONFIGDIR": "/tmp/matplotlib", "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def launcher_argv(python: str, settings_json: str) -> list[str]:
    return [python, "-I", "-B", "-c", LAUNCHER_SOURCE, settings_json]


@functools.lru_cache(maxsize=None)
def seccomp_program(python: str) -> str | None:
    """The seccomp filter for student code as base64 BPF, built by libseccomp
    (Debian's python3-seccomp, in `python`); None where it cannot be built."""
    try:
        done = subprocess.run([python, "-I", SECCOMP_BUILDER], capture_output=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError) as e:
        why = getattr(e, "stderr", b"") or b""
        log.warning("no seccomp filter for student code (%s %s): install python3-seccomp",
                    e, why.decode(errors="replace").strip().splitlines()[-1:] or "")
        return None
    if not done.stdout or len(done.stdout) % 8:
        return None
    return base64.b64encode(done.stdout).decode("ascii")


class LauncherProcess:
    """A launcher started as a child process of the server (plain or inside
    bubblewrap), in its own cgroup when the host has them."""

    def __init__(self, proc: asyncio.subprocess.Process, group: cgroups.RunGroup | None, pool: ThreadPoolExecutor,
                 lower_at_ready: int | None = None) -> None:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None  # spawned with pipes
        self.proc = proc
        self.stdout = proc.stdout
        self._stdin, self._stderr_pipe = proc.stdin, proc.stderr
        self.group = group
        self._pool = pool  # the sandbox's threads: cgroup writes may wait for the kernel
        self.writes = GroupWrites.of(group)  # what the run wrote to files, for its disk guard
        self.copy: "HomeCopy | None" = None  # its programs write the home itself
        self._lower_at_ready = lower_at_ready  # the launcher's pid, if its autogroup is lowered
        self._settled = False  # its processes are in the run's idle group for the CPU (on_ready)
        self._stderr: collections.deque[int] = collections.deque(maxlen=STDERR_TAIL)
        self._stderr_task = asyncio.ensure_future(self._drain_stderr())
        self._killed: asyncio.Future[None] | None = None
        self.counts: tuple[int, float | None] | None = None  # (OOM kills, CPU seconds) when its last run ended (run.py)

    async def _drain_stderr(self) -> None:
        """Keep what the launcher or bubblewrap say (the tail of it): read
        all the time, so that they never block on a full pipe."""
        while True:
            chunk = await self._stderr_pipe.read(4096)
            if not chunk:
                return
            self._stderr.extend(chunk)

    def diagnostics(self) -> str:
        return bytes(self._stderr).decode(errors="replace").strip()

    async def on_ready(self) -> None:
        """The launcher said ready: its session exists now, and no student
        code runs before `go`. It started at normal CPU priority; from now
        on it is the student's: the lowest."""
        if self._lower_at_ready:
            lower_group(self._lower_at_ready, GROUP_NICE)
        if self.group is not None and not self._settled:
            self._settled = True
            await asyncio.get_running_loop().run_in_executor(self._pool, self.group.settle)

    def send(self, frame: bytes) -> None:
        try:
            self._stdin.write(frame)
        except (ConnectionResetError, BrokenPipeError, RuntimeError):
            pass  # the launcher is gone; its end is reported by wait()

    async def wait(self) -> Exit:
        status = await self.proc.wait()
        oom = self.group is not None and self.group.oom_kills() > 0
        return Exit(signal=-status, oom_killed=oom) if status < 0 else Exit(code=status, oom_killed=oom)

    def oom_kills(self) -> int:
        return self.group.oom_kills() if self.group else 0

    def cpu_seconds(self) -> float | None:
        return self.group.cpu_seconds() if self.group else None

    async def kill(self) -> None:
        """Kill the launcher and everything the sandbox started; return once
        they are gone (the cgroup is empty), whatever holds the pipes."""
        if self._killed is None:
            self._killed = asyncio.ensure_future(self._kill())
        await asyncio.shield(self._killed)

    async def _kill(self) -> None:
        loop = asyncio.get_running_loop()
        if self.group is not None:
            await loop.run_in_executor(self._pool, self.group.kill)
        elif self.proc.returncode is None:
            try:
                # Its own session (start_new_session) holds what did not leave it;
                # inside bubblewrap the PID namespace dies with its first process.
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            await asyncio.wait_for(self.proc.wait(), KILL_WAIT)
        except asyncio.TimeoutError:
            log.error("a killed sandbox (pid %d) was not reaped within %.0f s", self.proc.pid, KILL_WAIT)
        self.close()

    def close(self) -> None:
        """The sandbox is over: no more frames to it. (Its output pipes end by
        themselves: once the group is empty, no process holds them.)"""
        if not self._stdin.is_closing():
            self._stdin.close()
        self._stderr_task.cancel()

    async def release(self) -> None:
        """After the end: remove the cgroup."""
        if self.group is not None:
            await asyncio.get_running_loop().run_in_executor(self._pool, self.group.remove)


class OutputGate:
    """Open while the output reader may take more: for a launcher's output
    that comes over a connection of its own (docker.py, remote.py) rather
    than a pipe, with a pipe's back-pressure. The reader gets a valve
    for its transport: asyncio calls its pause_reading() when the reader
    holds more than twice its limit and resume_reading() once it is down to
    the limit; the pump reads the socket only while the gate is open."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.open.set()
        self.paused: set[_Valve] = set()

    def reader(self) -> asyncio.StreamReader:
        reader = asyncio.StreamReader(limit=STREAM_LIMIT // 2)  # pauses above STREAM_LIMIT
        reader.set_transport(cast(asyncio.ReadTransport, _Valve(self)))  # (it calls only these two)
        return reader


class _Valve:
    def __init__(self, gate: OutputGate) -> None:
        self.gate = gate

    def pause_reading(self) -> None:
        self.gate.paused.add(self)
        self.gate.open.clear()

    def resume_reading(self) -> None:
        self.gate.paused.discard(self)
        if not self.gate.paused:
            self.gate.open.set()


def lower_group(pid: int, nice: int) -> None:
    """As root, set the nice of `pid`'s autogroup (its session's CPU share),
    where there is no idle cgroup for sandboxes. The launcher could do it
    itself, but the kernel lets unprivileged processes do that once per
    100 ms machine-wide: 60 sandboxes starting together would queue for
    seconds, or run at full weight meanwhile."""
    try:
        with open(f"/proc/{int(pid)}/autogroup", "w") as f:
            f.write(str(nice))
    except OSError:
        pass  # already gone, or no autogroup scheduling: the launcher's nice still applies

