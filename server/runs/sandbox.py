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

log = logging.getLogger(__name__)

with open(os.path.join(os.path.dirname(__file__), "launcher.py"), encoding="utf-8") as _f:
    LAUNCHER_SOURCE = _f.read()
SANDBOX_HOME = "/home/student"
MPL_CACHE_IN_SANDBOX = "/opt/pyclassroom/matplotlib"
STREAM_LIMIT = 64 << 10  # bytes read ahead from a sandbox before its writes block


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

    def __init__(self, proc):
        self.proc = proc
        self.stdout = proc.stdout
        self.stderr = proc.stderr

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

    def __init__(self, cfg):
        self.cfg = cfg
        log.warning("SANDBOX=process: student code is NOT isolated from the server. "
                    "Use it for development only; use local (bubblewrap) or docker for a class.")

    def argv(self, home, settings):
        return launcher_argv(self.cfg.SANDBOX_PYTHON, json.dumps(dict(settings, mpl_cache=mpl_cache(self.cfg))))

    async def prepare(self, home, uid, settings):
        """Start the launcher for `home` as `uid`; `settings` are the
        launcher's (limits, nice)."""
        proc = await asyncio.create_subprocess_exec(
            *self.argv(home, settings), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=home, env=environment(self.env_home(home)),
            start_new_session=True, limit=STREAM_LIMIT, close_fds=True,
            **_as_user(uid))
        return Prepared(proc)

    def env_home(self, home):
        return home

    async def cleanup_leftovers(self):
        """Nothing outlives its parent here (see kill)."""


class LocalSandbox(ProcessSandbox):
    """bubblewrap: the student's home is the only writable thing it sees."""

    name = "local"
    isolated = True
    # Read-only system files Python, numpy and matplotlib need; nothing else of /etc.
    ETC = ("alternatives", "fonts", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime",
           "mime.types", "matplotlibrc", "python3", "python3.11")

    def __init__(self, cfg):
        self.cfg = cfg
        self.bwrap = shutil.which("bwrap")

    def env_home(self, home):
        return SANDBOX_HOME

    def argv(self, home, settings):
        args = [self.bwrap, "--unshare-all", "--die-with-parent", "--new-session",
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
