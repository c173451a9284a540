"""Where student code runs: the sandbox kinds, and the interface every kind
and every started sandbox implements.

A kind (`SandboxKind`) is chosen once per server (SANDBOX: `resolve`) and
made in each worker (`create`); it starts sandboxes. A started sandbox
(`StartedSandbox`) is one launcher (child/launcher.py), started ahead of a
run with the student's home as the only writable folder, waiting for `go`.

    local    bubblewrap (local.py: LocalKind, whose sandboxes are LauncherProcess)
    process  a plain child process, for development (local.py: ProcessKind)
    docker   a container per sandbox (docker.py: DockerKind, LauncherContainer)
    remote   a sandbox on a runner, another process or host (remote.py: RemoteKind,
             RemoteSandbox; the runner itself is server/runner)

What they share (the launcher's source and settings, limits, the seccomp
filter, the kernel's exit) is in launch.py. A sandbox on another host
(remote) is one more pair of classes implementing these two protocols.
"""
import asyncio
import logging
from typing import Any, AsyncIterator, Protocol, runtime_checkable

from ...config import Config
from ..disk_guard import GroupWrites, WriteGuard
from .launch import Exit, SandboxError
from .local import LocalKind, ProcessKind, build_mpl_cache

__all__ = ["SandboxKind", "StartedSandbox", "HomeCopy", "Held", "SandboxError", "Exit", "resolve", "create",
           "announce", "describe"]

log = logging.getLogger(__name__)


Held = tuple[int, float, str]  # a home's file as a copy was given it: (size, modified, etag)


@runtime_checkable
class HomeCopy(Protocol):
    """The home of a sandbox that runs elsewhere (on a runner): a copy of
    the student's home there, which the job keeps in step (runs/shipping.py)."""

    held: dict[str, Held | None]  # path -> the home's file the copy holds; None: something else by that name

    async def adopt(self) -> None:
        """Before the copy is first given files: take over the copy of the
        same home that the runner kept from the sandbox before (only what
        differs is then sent); nothing to do after that, or where there is none."""

    async def put(self, files: list[dict[str, Any]], deleted: list[str], clear: bool = False) -> None:
        """Pieces of files ({"path", "data" in base64, "at", and on a file's
        last piece its "etag"}) into the copy, and `deleted` out of it
        (`clear`: everything in it, first); SandboxError when refused or lost."""

    def collect(self, room: int, max_file: int) -> AsyncIterator[dict[str, Any]]:
        """What the last run changed in the copy: its "file" pieces, then
        "collected" (skipped, deleted, partial); SandboxError when lost."""

    def guard(self, room: int, file_bytes: int, limit: int | None) -> WriteGuard:
        """The next run's write budget, watched on the runner (disk_guard.py):
        `room` bytes, then what the copy has left of `limit` bytes in all
        (None: nothing more)."""


@runtime_checkable
class StartedSandbox(Protocol):
    """One started sandbox: a launcher that waits for `go` (its frames:
    protocol.py), as run.py and the job drive it."""

    stdout: asyncio.StreamReader  # the launcher's frames
    counts: tuple[int, float | None] | None  # (OOM kills, CPU seconds) as its last run ended; set by run.py
    writes: GroupWrites | None  # its cgroup's write count and freezer (disk_guard.py), if it has one
    copy: HomeCopy | None  # None: its programs write the home itself; else a copy of it elsewhere

    def send(self, frame: bytes) -> None:
        """Queue a frame for the launcher; never blocks, never raises."""

    async def wait(self) -> Exit:
        """The launcher's exit, as the kernel (or the container engine) gave it."""

    async def kill(self) -> None:
        """Kill everything the sandbox ever started; return once the kernel
        says it is gone, whatever the program did to its pipes."""

    async def release(self) -> None:
        """After `kill`: give back what it held (its cgroup, its container)."""

    async def on_ready(self) -> None:
        """The launcher said ready: no student code runs before `go` (it
        may now go down to the students' CPU priority)."""

    def diagnostics(self) -> str:
        """What the launcher (or what started it) said of itself, for the log."""

    def oom_kills(self) -> int:
        """OOM kills the kernel counted in its cgroup so far."""

    def cpu_seconds(self) -> float | None:
        """CPU the kernel counted for its cgroup so far; None without one."""


@runtime_checkable
class SandboxKind(Protocol):
    """A kind of sandbox, made once per worker: it starts sandboxes."""

    name: str  # local, process, docker
    reusable: bool  # a sandbox serves several runs (its launcher clears up after each)
    copies_home: bool  # its programs run on a copy of their home, not on the home (remote.py: a runner's)

    async def prepare(self, home: str, uid: int | None, settings: dict[str, Any]) -> StartedSandbox:
        """Start a sandbox for `home` whose programs run as `uid`;
        `settings` are the launcher's (limits, nice, runs). Raises
        SandboxError (or OSError) when it cannot start."""

    def defences(self) -> dict[str, Any]:
        """What holds student code here, for the start-up log and /api/status."""

    async def cleanup_leftovers(self) -> int:
        """Remove what sandboxes of a worker that is gone left; how many."""

    def close(self) -> None:
        """The worker stops: no more sandboxes."""


def resolve(cfg: Config) -> str:
    """The sandbox kind to use: SANDBOX, or for `auto` the best that works
    here. Called once, before the workers are forked."""
    if cfg.SANDBOX == "remote":
        from .docker import DockerKind
        from .remote import RemoteKind
        runner = cfg.RUNNER_SANDBOX
        if RemoteKind(cfg).child is None or runner in ("auto", "local") and LocalKind.works(cfg) \
                or runner in ("auto", "docker") and DockerKind.works(cfg):
            return "remote"
        # The embedded default (`make start`) on a host where no sandbox isolates.
        log.warning("SANDBOX=remote with no RUNNERS starts a child runner, which needs bubblewrap or Docker "
                    "(RUNNER_SANDBOX=%s); that does not work here, so the server picks what does (SANDBOX=auto)",
                    runner)
        cfg = cfg.but(SANDBOX="auto")
    if cfg.SANDBOX == "local" or (cfg.SANDBOX == "auto" and LocalKind.works(cfg)):
        LocalKind.probe_storage(cfg)
        kind = "local"
    elif cfg.SANDBOX != "auto":
        kind = cfg.SANDBOX
    else:
        from .docker import DockerKind
        kind = "docker" if DockerKind.works(cfg) else "process"
    if kind in ("local", "process"):
        build_mpl_cache(cfg)
    return kind


def create(cfg: Config) -> SandboxKind:
    if cfg.SANDBOX == "local":
        return LocalKind(cfg)
    if cfg.SANDBOX == "docker":
        from .docker import DockerKind
        return DockerKind(cfg)
    if cfg.SANDBOX == "remote":
        from .remote import RemoteKind
        return RemoteKind(cfg)
    return ProcessKind(cfg)


def announce(cfg: Config) -> str:
    """One line for the start-up log: where student code runs, what holds it
    and what is missing here (and why). Made before the workers are forked,
    which also gives a cgroup v2 host's server its leaf group."""
    sandbox = create(cfg)
    try:
        return describe(sandbox.name, sandbox.defences())
    finally:
        sandbox.close()


def describe(name: str, defences: dict[str, Any]) -> str:
    if name == "remote":
        runners = defences["runners"]
        where = ("a runner each worker starts as its child" if runners == ["local"] else
                 "the runners that register" if not runners else
                 "the runners " + ", ".join(runners) + " and those that register")
        return f"student programs run on {where} (each says what holds them there when it starts)"
    parts = [f"student programs run in the {name} sandbox"]
    if name == "process":
        parts.append("student code is NOT isolated from the server: use it for development only; "
                     "use local (bubblewrap) or docker for a class")
    parts.append("seccomp filter on" if defences["seccomp"] else
                 "NO seccomp filter (install python3-seccomp)")
    parts.append(defences["cgroup"] or "NO per-run cgroup (needs root and cgroups): memory is limited per "
                                       "process and a run is killed by its process group only")
    if not defences["own_uid"]:
        parts.append("all students' programs share the server's uid (run the server as root)")
    if not defences["host_paths_hidden"]:
        parts.append("the home's host path shows in /proc/self/mountinfo")
    return "; ".join(parts)
