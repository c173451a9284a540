"""The sandboxes that are child processes of the server: `local` and `process`.

- `local`: bubblewrap. New user, PID, network, IPC, UTS and mount
  namespaces and no further user namespaces; only system folders,
  read-only, plus the home and small private /tmp and /dev/shm; no /proc
  (its mountinfo would show where the home lives on the host); dies with
  its parent. As root, each student's code runs as its own host uid, so a
  fork bomb exhausts that student's process limit and nobody else's.
- `process`: a plain child process with the launcher's limits: for
  development only, it isolates nothing and says so loudly.

As root on a host with cgroups, each sandbox (bubblewrap's processes, the
launcher and all it ever starts) is moved into a cgroup of its own before
the launcher says ready, so no student code ever runs outside it.
"""
import asyncio
import json
import logging
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from ...config import Config
from ...traverse import blocked_parent
from .. import cgroups
from .launch import (MPL_CACHE_IN_SANDBOX, SANDBOX_HOME, SHM_BYTES, STREAM_LIMIT, TMP_BYTES, LauncherProcess,
                      SandboxError, environment, group_limits, launcher_argv, seccomp_program)

log = logging.getLogger(__name__)

INFO_TIMEOUT = 10.0
THREADS = 4


class ProcessKind:
    """Development only: a child process with limits and nothing else."""

    name = "process"
    reusable = False  # the launcher is not PID 1 of a namespace: it cannot clear up after a run
    copies_home = False
    hides_host_paths = False

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.groups = cgroups.Groups.detect(**cgroups.priority(cfg.SANDBOX_CPU))
        self.seccomp = seccomp_program(cfg.SANDBOX_PYTHON)
        self._pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="sandbox")

    def close(self) -> None:
        self._pool.shutdown(wait=False)

    def defences(self) -> dict[str, Any]:
        """What holds student code here, for the start-up log and /api/status."""
        return {"seccomp": self.seccomp is not None,
                "cgroup": self.groups.describe() if self.groups else None,
                "own_uid": os.geteuid() == 0,
                "namespaces": self.name == "local",
                "user_namespaces": "disabled" if self.name == "local" or self.seccomp else "allowed",
                "host_paths_hidden": self.hides_host_paths}

    def launcher_settings(self, settings: dict[str, Any], mpl_cache: str) -> dict[str, Any]:
        # As root the server ranks the sandbox itself (idle cgroup, or the
        # autogroup lowered at `ready`): the launcher need not try.
        return dict(settings, seccomp=self.seccomp, mpl_cache=mpl_cache, lower_group=os.geteuid() != 0)

    async def prepare(self, home: str, uid: int | None, settings: dict[str, Any]) -> LauncherProcess:
        """Start the launcher for `home` as `uid`, in a new cgroup when the
        host has them; `settings` are the launcher's (limits, runs)."""
        loop = asyncio.get_running_loop()
        group = await loop.run_in_executor(self._pool, self.groups.new, group_limits(self.cfg)) \
            if self.groups else None
        try:
            proc, launcher_pid = await self.start(home, uid, settings)
        except BaseException:
            if group:
                await loop.run_in_executor(self._pool, group.remove)
            raise
        if group is None:
            lower = launcher_pid if os.geteuid() == 0 else None
            return LauncherProcess(proc, None, self._pool, lower_at_ready=lower)
        sandbox = LauncherProcess(proc, group, self._pool)
        try:
            if launcher_pid is None:
                raise OSError("the sandbox did not start")
            # Before the launcher says ready: no student code exists yet.
            await loop.run_in_executor(self._pool, _enter, group, {proc.pid, launcher_pid})
        except OSError as e:
            await sandbox.kill()
            await sandbox.release()
            raise SandboxError(f"could not put the sandbox in its cgroup: {e}") from None
        return sandbox

    async def start(self, home: str, uid: int | None,
                    settings: dict[str, Any]) -> tuple[asyncio.subprocess.Process, int | None]:
        """(process, pid of the launcher, which forks nothing before `go`)."""
        argv = launcher_argv(self.cfg.SANDBOX_PYTHON,
                             json.dumps(self.launcher_settings(settings, mpl_cache(self.cfg))))
        proc = await self.spawn(argv, home, uid)
        return proc, proc.pid

    async def spawn(self, argv: Sequence[str], home: str, uid: int | None,
                    pass_fds: Sequence[int] = ()) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            *argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=home, env=environment(self.env_home(home)),
            start_new_session=True, limit=STREAM_LIMIT, close_fds=True, pass_fds=pass_fds,
            **_as_user(uid))

    def env_home(self, home: str) -> str:
        return home

    async def cleanup_leftovers(self) -> int:
        """Kill and remove the cgroups of sandboxes whose worker is gone."""
        if self.groups is None:
            return 0
        return await asyncio.get_running_loop().run_in_executor(self._pool, self.groups.cleanup_leftovers)


class LocalKind(ProcessKind):
    """bubblewrap: the student's home is the only writable thing it sees."""

    name = "local"
    reusable = True
    copies_home = False
    hides_host_paths = True
    # Read-only system files Python, numpy and matplotlib need; nothing else of /etc.
    ETC = ("alternatives", "fonts", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime",
           "mime.types", "matplotlibrc", "python3", "python3.11")

    def __init__(self, cfg: Config) -> None:
        self.bwrap = shutil.which("bwrap")
        super().__init__(cfg)

    def env_home(self, home: str) -> str:
        return SANDBOX_HOME

    async def start(self, home: str, uid: int | None,
                    settings: dict[str, Any]) -> tuple[asyncio.subprocess.Process, int | None]:
        """As ProcessKind.start; bubblewrap tells the launcher's pid (the
        sandbox's first process) on an --info-fd pipe."""
        info_r, info_w = os.pipe()
        try:
            proc = await self.spawn(self.argv(home, settings, info_fd=info_w), home, uid, pass_fds=(info_w,))
        finally:
            os.close(info_w)
        try:
            info = json.loads(await asyncio.wait_for(read_to_end(info_r, 4096), INFO_TIMEOUT))
            return proc, int(info["child-pid"])
        except (ValueError, KeyError, TypeError, OSError, asyncio.TimeoutError):
            return proc, None  # bubblewrap failed: reported as a sandbox that did not start

    def argv(self, home: str, settings: dict[str, Any], info_fd: int | None = None) -> list[str]:
        # --as-pid-1: the launcher is the sandbox's first process and session
        # leader. No /proc: its mountinfo would name the home's host path.
        assert self.bwrap is not None  # (this kind is chosen only where `works` found bubblewrap)
        args = [self.bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
                "--new-session", "--as-pid-1", "--cap-drop", "ALL", "--hostname", "sandbox",
                "--ro-bind", "/usr", "/usr"]
        for link in ("bin", "lib", "lib64", "sbin"):
            if os.path.islink("/" + link):
                args += ["--symlink", os.readlink("/" + link), "/" + link]
            elif os.path.isdir("/" + link):
                args += ["--ro-bind", "/" + link, "/" + link]
        for name in self.ETC:
            args += ["--ro-bind-try", "/etc/" + name, "/etc/" + name]
        args += ["--ro-bind-try", mpl_cache(self.cfg), MPL_CACHE_IN_SANDBOX,
                 "--dev", "/dev",
                 "--size", str(SHM_BYTES), "--perms", "1777", "--tmpfs", "/dev/shm",
                 "--size", str(TMP_BYTES), "--perms", "1777", "--tmpfs", "/tmp",
                 "--bind", home, SANDBOX_HOME, "--chdir", SANDBOX_HOME,
                 "--remount-ro", "/",  # the sandbox's own root: nothing there to write but home and /tmp
                 "--uid", "1000", "--gid", "1000", "--clearenv"]
        if info_fd is not None:
            args += ["--info-fd", str(info_fd)]
        for key, value in environment(SANDBOX_HOME).items():
            args += ["--setenv", key, value]
        settings_json = json.dumps(self.launcher_settings(settings, MPL_CACHE_IN_SANDBOX))
        return args + ["--"] + launcher_argv(self.cfg.SANDBOX_PYTHON, settings_json)

    @staticmethod
    def probe_storage(cfg: Config) -> None:
        """bubblewrap mounts a home as the student's uid, which must be able
        to walk down to it: refuse to start rather than fail every run."""
        if os.geteuid() == 0:
            blocked = blocked_parent(cfg.STORAGE_ROOT, cfg.SANDBOX_UID_BASE)
            if blocked:
                raise SandboxError(f"students' programs could not reach their files: {blocked} is "
                                   f"closed to other users (chmod o+x {blocked}, or choose another "
                                   "STORAGE_ROOT)")

    @staticmethod
    def works(cfg: Config) -> bool:
        """Can bubblewrap start a Python here? (False inside many containers.)"""
        bwrap = shutil.which("bwrap")
        if not bwrap or not os.path.exists(cfg.SANDBOX_PYTHON):
            return False
        probe = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
                 "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
                 "--dev", "/dev", cfg.SANDBOX_PYTHON, "-I", "-c", "print(6 * 7)"]
        try:
            kwargs = _as_user(cfg.SANDBOX_UID_BASE if os.geteuid() == 0 else None)
            done = subprocess.run(probe, capture_output=True, timeout=20, **kwargs)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return bool(done.stdout.strip() == b"42")


def _enter(group: cgroups.RunGroup, pids: set[int]) -> None:
    for pid in sorted(pids):
        group.add(pid)
    group.starting()  # at normal CPU priority until ready (LauncherProcess.on_ready settles it)


async def read_to_end(fd: int, limit: int) -> bytes:
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


def _as_user(uid: int | None) -> dict[str, Any]:
    """subprocess arguments that drop to `uid` (its own group, no others)."""
    if uid is None:
        return {}
    return {"user": uid, "group": uid, "extra_groups": []}


def mpl_cache(cfg: Config) -> str:
    return os.path.join(cfg.DATA_DIR, "sandbox", "matplotlib")


def build_mpl_cache(cfg: Config) -> None:
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
