"""Where student code runs: one small interface, three kinds of sandbox.

A sandbox starts the launcher (launcher.py) ahead of time, with the
student's home as the only writable folder, and hands back a `Prepared`:
its stdout and stderr as asyncio streams, a way to send it frames, to wait
for it and to kill it. Everything else (the protocol, limits reported to the
user, timers, output) lives in session.py and is the same for every kind.

- `local`: bubblewrap. New user, PID, network, IPC, UTS and mount
  namespaces; only system folders, read-only, plus the home; dies with its
  parent. As root, each student's code runs as its own host uid, so a fork
  bomb exhausts that student's process limit and nobody else's.
- `process`: a plain child process with the launcher's rlimits: for
  development only, it isolates nothing and says so loudly.
- `docker`: see sandbox_docker.py.
"""
import asyncio
import json
import logging
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass

from ..traverse import blocked_parent
from . import cpu_group

log = logging.getLogger(__name__)

with open(os.path.join(os.path.dirname(__file__), "launcher.py"), encoding="utf-8") as _f:
    LAUNCHER_SOURCE = _f.read()
SANDBOX_HOME = "/home/student"
MPL_CACHE_IN_SANDBOX = "/opt/pyclassroom/matplotlib"
STREAM_LIMIT = 64 << 10  # bytes read ahead from a sandbox before its writes block
GROUP_NICE = 19  # a sandbox session's CPU group: the lowest weight there is
INFO_TIMEOUT = 10.0


class SandboxError(RuntimeError):
    """The sandbox cannot work with these settings."""


@dataclass
class Limits:
    cpu_seconds: int
    memory_bytes: int
    processes: int
    file_bytes: int
    open_files: int

    @classmethod
    def from_config(cls, cfg):
        return cls(cfg.RUN_CPU_SECONDS, cfg.RUN_MEMORY_MB << 20, cfg.RUN_PROCESSES,
                   cfg.RUN_FILE_MB << 20, cfg.RUN_OPEN_FILES)


@dataclass
class Exit:
    code: int = None
    signal: int = None
    reason: str = None  # what the sandbox itself knows, e.g. "memory_limit" after an OOM kill


def environment(home):
    """The whole environment of student code: nothing of the server's."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8",
            "TERM": "xterm-256color", "MPLCONFIGDIR": "/tmp/matplotlib", "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def launcher_argv(python, settings_json):
    return [python, "-I", "-B", "-c", LAUNCHER_SOURCE, settings_json]


class Prepared:
    """A launcher waiting for its `go` frame (a plain or bubblewrapped child)."""

    def __init__(self, proc, lower_at_ready=None):
        self.proc = proc
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.lower_at_ready = lower_at_ready  # the launcher's pid, if the server lowers its autogroup

    def on_ready(self):
        """The launcher said ready: its session exists now, and no student
        code runs before `go`."""
        if self.lower_at_ready:
            lower_group(self.lower_at_ready, GROUP_NICE)

    def send(self, frame):
        try:
            self.proc.stdin.write(frame)
        except (ConnectionResetError, BrokenPipeError, RuntimeError):
            pass  # the program is gone; its exit is reported by wait()

    async def wait(self):
        status = await self.proc.wait()
        if status < 0:
            return Exit(signal=-status)
        return Exit(code=status)

    async def kill(self):
        """Kill the launcher and everything it started."""
        if self.proc.returncode is None:
            try:
                # Its own process group (start_new_session) holds the whole tree;
                # inside bubblewrap, the PID namespace dies with it.
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        await self.proc.wait()


class ProcessSandbox:
    """Development only: a child process with rlimits and nothing else."""

    name = "process"
    isolated = False
    reusable = False  # the launcher is not PID 1 of a namespace: it cannot clear up after a run

    def __init__(self, cfg):
        self.cfg = cfg
        self.cpu_group = cpu_group.create()
        log.warning("SANDBOX=process: student code is NOT isolated from the server. "
                    "Use it for development only; use local (bubblewrap) or docker for a class.")

    def argv(self, home, settings):
        return launcher_argv(self.cfg.SANDBOX_PYTHON, json.dumps(dict(settings, mpl_cache=mpl_cache(self.cfg))))

    async def prepare(self, home, uid, settings):
        """Start the launcher for `home` as `uid`; `settings` are the
        launcher's (limits, nice). As root, the server ranks it below
        everything else itself: in the idle CPU group, or else by lowering
        its autogroup once it is ready (which root may do without the
        kernel's rate limit, and only once the launcher's session exists)."""
        if os.geteuid() == 0:
            settings = dict(settings, lower_group=False)
        proc, launcher_pid = await self.start(home, uid, settings)
        if os.geteuid() != 0 or launcher_pid is None:
            return Prepared(proc)
        if self.cpu_group and await asyncio.get_running_loop().run_in_executor(
                None, self.cpu_group.add, launcher_pid, proc.pid):  # (bubblewrap's own, if another)
            return Prepared(proc)
        return Prepared(proc, lower_at_ready=launcher_pid)

    async def start(self, home, uid, settings):
        """(process, pid of the launcher, which forks nothing before `go`)."""
        proc = await self.spawn(self.argv(home, settings), home, uid)
        return proc, proc.pid

    async def spawn(self, argv, home, uid, pass_fds=()):
        return await asyncio.create_subprocess_exec(
            *argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=home, env=environment(self.env_home(home)),
            start_new_session=True, limit=STREAM_LIMIT, close_fds=True, pass_fds=pass_fds,
            **_as_user(uid))

    def env_home(self, home):
        return home

    async def cleanup_leftovers(self):
        """Nothing outlives its parent here (see kill)."""


class LocalSandbox(ProcessSandbox):
    """bubblewrap: the student's home is the only writable thing it sees."""

    name = "local"
    isolated = True
    reusable = True
    # Read-only system files Python, numpy and matplotlib need; nothing else of /etc.
    ETC = ("alternatives", "fonts", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime",
           "mime.types", "matplotlibrc", "python3", "python3.11")

    def __init__(self, cfg):
        self.cfg = cfg
        self.bwrap = shutil.which("bwrap")
        self.cpu_group = cpu_group.create()

    def env_home(self, home):
        return SANDBOX_HOME

    async def start(self, home, uid, settings):
        """As ProcessSandbox.start; bubblewrap tells the launcher's pid (the
        sandbox's first process) on an --info-fd pipe."""
        info_r, info_w = os.pipe()
        try:
            proc = await self.spawn(self.argv(home, settings, info_fd=info_w), home, uid,
                                    pass_fds=(info_w,))
        finally:
            os.close(info_w)
        try:
            info = json.loads(await asyncio.wait_for(read_to_end(info_r, 4096), INFO_TIMEOUT))
            return proc, int(info["child-pid"])
        except (ValueError, KeyError, TypeError, OSError, asyncio.TimeoutError):
            return proc, None  # bubblewrap failed: the launcher never says ready, which is reported

    def argv(self, home, settings, info_fd=None):
        # --as-pid-1: the launcher is the sandbox's first process and session
        # leader, so the child pid that --info-fd reports is in its session.
        args = [self.bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--as-pid-1",
                "--cap-drop", "ALL", "--hostname", "sandbox",
                "--ro-bind", "/usr", "/usr"]
        for link in ("bin", "lib", "lib64", "sbin"):
            if os.path.islink("/" + link):
                args += ["--symlink", os.readlink("/" + link), "/" + link]
            elif os.path.isdir("/" + link):
                args += ["--ro-bind", "/" + link, "/" + link]
        for name in self.ETC:
            args += ["--ro-bind-try", "/etc/" + name, "/etc/" + name]
        args += ["--ro-bind-try", mpl_cache(self.cfg), MPL_CACHE_IN_SANDBOX,
                 "--proc", "/proc", "--dev", "/dev",
                 "--size", str(64 << 20), "--tmpfs", "/tmp",
                 "--bind", home, SANDBOX_HOME, "--chdir", SANDBOX_HOME,
                 "--remount-ro", "/",  # the sandbox's own root: nothing there to write but home and /tmp
                 "--uid", "1000", "--gid", "1000", "--clearenv"]
        if info_fd is not None:
            args += ["--info-fd", str(info_fd)]
        for key, value in environment(SANDBOX_HOME).items():
            args += ["--setenv", key, value]
        settings = json.dumps(dict(settings, mpl_cache=MPL_CACHE_IN_SANDBOX))
        return args + ["--"] + launcher_argv(self.cfg.SANDBOX_PYTHON, settings)

    @staticmethod
    def check_storage(cfg):
        """bubblewrap mounts a home as the student's uid, which must be able
        to walk down to it: refuse to start rather than fail every run."""
        if os.geteuid() == 0:
            blocked = blocked_parent(cfg.STORAGE_ROOT, cfg.SANDBOX_UID_BASE)
            if blocked:
                raise SandboxError(f"students' programs could not reach their files: {blocked} is "
                                   f"closed to other users (chmod o+x {blocked}, or choose another "
                                   "STORAGE_ROOT)")

    @staticmethod
    def works(cfg):
        """Can bubblewrap start a Python here? (False inside many containers.)"""
        if not shutil.which("bwrap") or not os.path.exists(cfg.SANDBOX_PYTHON):
            return False
        probe = [shutil.which("bwrap"), "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
                 "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--proc", "/proc",
                 "--dev", "/dev", cfg.SANDBOX_PYTHON, "-I", "-c", "print(6 * 7)"]
        try:
            kwargs = _as_user(cfg.SANDBOX_UID_BASE if os.geteuid() == 0 else None)
            done = subprocess.run(probe, capture_output=True, timeout=20, **kwargs)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.stdout.strip() == b"42"


def lower_group(pid, nice):
    """As root, set the nice of `pid`'s autogroup (its session's CPU share).
    The launcher could do it itself, but the kernel lets unprivileged
    processes do that once per 100 ms machine-wide: 60 sandboxes starting
    together would queue for seconds, or run at full weight meanwhile."""
    try:
        with open(f"/proc/{int(pid)}/autogroup", "w") as f:
            f.write(str(nice))
    except OSError:
        pass  # already gone, or no autogroup scheduling: the launcher's nice still applies


async def read_to_end(fd, limit):
    """All of a pipe's bytes (at most `limit`), without blocking the loop."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                open(fd, "rb", buffering=0))
    data = b""
    try:
        while len(data) < limit:
            chunk = await reader.read(limit - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        transport.close()
    return data


def run_uid(cfg, user_id):
    """The host uid a user's programs run as: their own when the server is
    root (so one student's processes cannot touch another's), else ours."""
    return cfg.SANDBOX_UID_BASE + user_id if os.geteuid() == 0 else None


def _as_user(uid):
    """subprocess arguments that drop to `uid` (its own group, no others)."""
    if uid is None:
        return {}
    return {"user": uid, "group": uid, "extra_groups": []}


def resolve(cfg):
    """The sandbox kind to use: SANDBOX, or for `auto` the best that works
    here. Called once, before the workers are forked."""
    if cfg.SANDBOX == "local" or (cfg.SANDBOX == "auto" and LocalSandbox.works(cfg)):
        LocalSandbox.check_storage(cfg)
        kind = "local"
    elif cfg.SANDBOX != "auto":
        kind = cfg.SANDBOX
    else:
        from .sandbox_docker import DockerSandbox
        kind = "docker" if DockerSandbox.works(cfg) else "process"
    if kind in ("local", "process"):
        build_mpl_cache(cfg)
    return kind


def priority_note(kind):
    """How student code ranks below the server, for the start-up log."""
    if kind == "docker":
        return ", each container with a low CPU weight"
    group = cpu_group.create() if os.geteuid() == 0 else None
    if group:
        return f", at idle CPU priority (cgroup {group.path})"
    return ", below the server by scheduling group nice (no idle CPU group here: needs root and cgroup v1 cpu)"


def mpl_cache(cfg):
    return os.path.join(cfg.DATA_DIR, "sandbox", "matplotlib")


def build_mpl_cache(cfg):
    """Build matplotlib's font list once for all runs (the launcher copies it
    into each sandbox). Nothing secret is in this folder: sandboxes see it."""
    folder = mpl_cache(cfg)
    if os.path.isdir(folder) and os.listdir(folder):
        return
    os.makedirs(folder, exist_ok=True)
    os.chmod(folder, 0o755)
    try:
        subprocess.run([cfg.SANDBOX_PYTHON, "-I", "-c", "import matplotlib.font_manager"],
                       env={"MPLCONFIGDIR": folder, "HOME": folder, "PATH": "/usr/bin:/bin"},
                       capture_output=True, timeout=300, check=True)
    except (OSError, subprocess.SubprocessError) as e:
        log.warning("no matplotlib font cache for sandboxes (%s): plots will start slowly", e)
    for name in os.listdir(folder):
        os.chmod(os.path.join(folder, name), 0o644)


def create(cfg):
    if cfg.SANDBOX == "local":
        return LocalSandbox(cfg)
    if cfg.SANDBOX == "docker":
        from .sandbox_docker import DockerSandbox
        return DockerSandbox(cfg)
    return ProcessSandbox(cfg)
