"""The `docker` sandbox: each run in a fresh container of SANDBOX_IMAGE.

The container runs the same launcher as the other sandboxes, with the
image's own python3, as the student's uid, with no network, a read-only
root, a small /tmp, no capabilities and cgroup limits on memory, CPU and
processes. Only the student's home is mounted, read-write, at SANDBOX_HOME.
Docker always mounts /proc, whose mountinfo names the home's path on the
host (runc refuses mounts over it): where the kernel has Landlock, the
launcher makes every file under /proc unreadable to itself and the
program before any student code runs.

Streams go through one attach connection to the daemon, opened before the
container starts so that nothing it prints is lost: Docker multiplexes
stdout and stderr on it (8-byte frame headers) and whatever is written to
it reaches the container's stdin. It is read with asyncio: the launcher's
stdout (its frames) into a StreamReader with the same back-pressure as a
child's pipe (while it holds more than STREAM_LIMIT unread bytes, the
socket is not read, so the daemon's copy blocks and then the program's own
writes do), its stderr (what it says of itself) into a bounded tail.

The Docker SDK is synchronous: every call runs in a small thread pool owned
by the sandbox, never on the event loop. No thread is held while a program
runs: the end of its output tells wait() when to ask the daemon.

Containers are labelled `pyclassroom.sandbox=1` with the worker that
started them, so a worker starting up can remove those a crashed one left
(`cleanup_leftovers`). StdinOnce is set, too: when the server's attach
connection goes away, the launcher sees the end of its input and a
sandbox still waiting for its program exits by itself.
"""
import asyncio
import collections
import json
import logging
import os
import signal
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable

from ...config import Config
from ..disk_guard import GroupWrites

if TYPE_CHECKING:
    from . import HomeCopy
from .launch import (SANDBOX_HOME, SHM_BYTES, STDERR_TAIL, STREAM_LIMIT, TMP_BYTES, Exit, OutputGate, environment,
                      group_limits, launcher_argv, seccomp_program)

log = logging.getLogger(__name__)

LABEL = "pyclassroom.sandbox"
OWNER_LABEL = "pyclassroom.owner"  # host/boot id/pid/start time of the worker that made it
PID_LABEL = "pyclassroom.server-pid"
API_TIMEOUT = 30  # seconds for one ordinary daemon call
PROBE_TIMEOUT = 5  # seconds for each call of works()
EXIT_GRACE = 10  # seconds the container may take to be "exited" after its output ended
KILL_DRAIN = 2  # seconds the output may take to end after a forced removal
STDOUT, STDERR = 1, 2  # stream numbers in Docker's frame headers
# Threads for the SDK's calls: each takes milliseconds (a start, up to about
# a second on a busy host) and none waits for a program to finish.
THREADS = 8
# matplotlib's font list, built into the image (deploy/sandbox.Dockerfile,
# scripts/build-sandbox-image); the launcher copies it into /tmp.
MPL_CACHE = "/opt/pyclassroom/matplotlib"


class DockerKind:
    """Runs the launcher in a Docker container (see the module docstring)."""

    name = "docker"
    reusable = True
    copies_home = False

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.image = cfg.SANDBOX_IMAGE
        # Built by the host's libseccomp for the host's kernel; the launcher
        # loads it under Docker's default profile.
        self.seccomp = seccomp_program(cfg.SANDBOX_PYTHON)
        self.hides_host_paths = landlock_works()  # the containers share this kernel
        self.owner = _owner_id(os.getpid())
        self._pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="docker")
        self._client: Any = None  # (docker.APIClient) made on first use, in the pool: it talks to the daemon
        self._client_lock = threading.Lock()

    # -- the daemon, from the thread pool ---------------------------------

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(client, *args) in the pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(self._api(), *args))

    def _api(self) -> Any:
        with self._client_lock:
            if self._client is None:
                self._client = _connect(API_TIMEOUT)
            return self._client

    # -- SandboxKind (__init__.py) -------------------------------------------

    async def prepare(self, home: str, uid: int | None, settings: dict[str, Any] | str | bytes) -> "LauncherContainer":
        """Create a container for a run, attach to it, start it: its launcher
        will say `ready` on stdout and wait for its `go` frame. `settings`
        are the launcher's (limits, nice), as a dict or JSON text."""
        given: dict[str, Any] = json.loads(settings) if isinstance(settings, (str, bytes)) else settings
        # lower_group: autogroups do not apply inside a container's cgroup,
        # whose weight (cpu_shares) ranks it instead.
        settings_json = json.dumps(dict(given, mpl_cache=MPL_CACHE, lower_group=False, seccomp=self.seccomp,
                                        hide_proc=self.hides_host_paths))
        user = f"{uid}:{uid}" if uid is not None else f"{os.getuid()}:{os.getgid()}"
        starting = asyncio.ensure_future(self._call(self._create_and_start, home, user, settings_json))
        try:
            container, raw, cgroup_dirs = await asyncio.shield(starting)
        except asyncio.CancelledError:
            # The thread goes on regardless: remove what it makes.
            starting.add_done_callback(self._discard_started)
            raise
        try:
            reader, writer = await asyncio.open_connection(sock=raw, limit=STREAM_LIMIT)
        except BaseException:
            raw.close()
            await self._call(_remove, container)
            raise
        return LauncherContainer(self, container, reader, writer, cgroup_dirs)

    def _discard_started(self, starting: asyncio.Future[tuple[str, socket.socket, dict[str, str]]]) -> None:
        if not starting.cancelled() and starting.exception() is None:
            container, raw, _ = starting.result()
            raw.close()
            self._pool.submit(lambda: _remove(self._api(), container))

    def defences(self) -> dict[str, Any]:
        """What holds student code here, for the start-up log and /api/status."""
        return {"seccomp": self.seccomp is not None,
                "cgroup": "the container's: memory, processes, cpu per run, removed as a whole",
                "own_uid": True, "namespaces": True, "user_namespaces": "disabled",
                "host_paths_hidden": self.hides_host_paths}

    @staticmethod
    def works(cfg: Config) -> bool:
        """Does a Docker daemon answer here, with SANDBOX_IMAGE? (quick: a few
        seconds at most, also when nothing listens)"""
        try:
            api = _connect(PROBE_TIMEOUT)
            try:
                api.ping()
                api.inspect_image(cfg.SANDBOX_IMAGE)
            finally:
                api.close()
        except Exception as e:  # not installed, no daemon, no permission, no image...
            log.debug("the docker sandbox does not work here: %s", e)
            return False
        return True

    async def cleanup_leftovers(self) -> int:
        """Remove the sandbox containers whose worker is gone (crashed or
        killed before it could remove them); those of live workers, on this
        host or on another one sharing the daemon, are left alone.
        Returns how many were removed."""
        removed: int = await self._call(self._cleanup)
        return removed

    def close(self) -> None:
        """Let the threads and the daemon connection go (a worker's sandbox
        lives as long as the worker; tests make several)."""
        self._pool.shutdown(wait=False)
        if self._client is not None:
            self._client.close()

    # -- blocking parts (in the pool) -------------------------------------

    def _create_and_start(self, api: Any, home: str, user: str,
                          settings_json: str) -> tuple[str, socket.socket, dict[str, str]]:
        import docker
        cfg = self.cfg
        limits = group_limits(cfg)
        memory = limits.memory_bytes
        host_config = api.create_host_config(
            mounts=[docker.types.Mount(SANDBOX_HOME, home, type="bind", read_only=False)],
            network_mode="none",
            read_only=True,
            # tmpfs pages count as the container's memory
            tmpfs={"/tmp": f"size={TMP_BYTES},mode=1777"},
            shm_size=SHM_BYTES,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit=memory,
            memswap_limit=memory,  # the same: no swap
            nano_cpus=10 ** 9,  # one CPU
            cpu_shares=256,  # a quarter of the default weight: the server keeps answering
            pids_limit=limits.processes,
            oom_score_adj=500,  # if the host runs out of memory, sandboxes go first
            init=False,  # the launcher is PID 1 and handles its child itself
            # Output goes to the server only: no log file growing on the host.
            log_config=docker.types.LogConfig(type="none"),
        )
        container = api.create_container(
            self.image,
            command=launcher_argv("python3", settings_json),
            hostname="sandbox",
            user=user,
            working_dir=SANDBOX_HOME,
            environment=environment(SANDBOX_HOME),
            labels={LABEL: "1", PID_LABEL: str(os.getpid()), OWNER_LABEL: self.owner},
            stdin_open=True,
            tty=False,
            # detach=False makes the SDK set StdinOnce (see the module docstring).
            detach=False,
            use_config_proxy=False,  # nothing of the server's environment
            host_config=host_config,
        )["Id"]
        try:
            # Attach before starting, so no output can be missed. The daemon
            # answers the upgrade at once and the container says nothing
            # before it starts, so the SDK's HTTP reader cannot have buffered
            # any of the stream: the socket holds all of it.
            sdk_socket = api.attach_socket(container, params={
                "stream": 1, "stdin": 1, "stdout": 1, "stderr": 1, "logs": 0})
            raw = _take_socket(sdk_socket)
            try:
                api.start(container)
                # Where the engine put it: the run's OOM kills and CPU time are read there.
                cgroup_dirs = _cgroup_dirs(api.inspect_container(container)["State"]["Pid"])
            except BaseException:
                raw.close()
                raise
        except BaseException:
            _remove(api, container)
            raise
        return container, raw, cgroup_dirs

    def _finish(self, api: Any, container: str) -> dict[str, Any] | None:
        """After the output ended: the container's final state (None if it
        is already gone), and the container removed."""
        import docker
        import requests
        try:
            api.wait(container, timeout=EXIT_GRACE)
            state: dict[str, Any] | None = api.inspect_container(container)["State"]
        except docker.errors.NotFound:
            return None
        except requests.exceptions.RequestException:
            # Still running although its output ended: it is stopped, not waited for.
            log.warning("sandbox container %.12s did not exit after its output ended", container)
            state = None
        _remove(api, container)
        return state

    def _cleanup(self, api: Any) -> int:
        removed = 0
        for c in api.containers(all=True, filters={"label": LABEL}):
            owner = (c.get("Labels") or {}).get(OWNER_LABEL, "")
            if not self._orphaned(owner):
                continue
            log.info("removing the sandbox container %.12s left by %s", c["Id"], owner or "an unknown worker")
            _remove(api, c["Id"])
            removed += 1
        return removed


    def _orphaned(self, owner: str) -> bool:
        """Is the worker named by a container's owner label gone?"""
        if owner == self.owner:
            return False
        if owner and owner.split("/")[0] != socket.gethostname():
            return False  # another host's, sharing the daemon: its workers clean up after it
        return not _owner_alive(owner)  # no label at all counts as gone


class LauncherContainer:
    """A started container whose launcher waits for `go`: a StartedSandbox."""

    def __init__(self, kind: DockerKind, container: str, conn_reader: asyncio.StreamReader,
                 conn_writer: asyncio.StreamWriter, cgroup_dirs: dict[str, str]) -> None:
        self.kind = kind  # the DockerKind that started it
        self.container = container
        self._conn = conn_reader
        self._writer = conn_writer
        self._cgroup = cgroup_dirs  # {controller: the container's cgroup folder}, as far as found
        self.writes = _group_writes(cgroup_dirs)  # what the run wrote to files, for its disk guard
        self.copy: "HomeCopy | None" = None  # its programs write the home itself
        self._gate = OutputGate()
        self.stdout = self._gate.reader()
        self._stderr: collections.deque[int] = collections.deque(maxlen=STDERR_TAIL)
        self._pump_task = asyncio.ensure_future(self._pump())
        self._kill_task: asyncio.Future[None] | None = None
        self._exit: Exit | None = None
        self.counts: tuple[int, float | None] | None = None  # (OOM kills, CPU seconds) when its last run ended (run.py)

    async def on_ready(self) -> None:
        """Nothing to do: the container's cgroup sets its CPU weight."""

    def diagnostics(self) -> str:
        return bytes(self._stderr).decode(errors="replace").strip()

    async def _pump(self) -> None:
        """Split Docker's frames: stdout (the launcher's frames) to the reader,
        stderr (what the launcher says of itself) into a bounded tail."""
        try:
            while True:
                await self._gate.open.wait()  # back-pressure: see the module docstring
                header = await self._conn.readexactly(8)
                size = int.from_bytes(header[4:8], "big")
                payload = await self._conn.readexactly(size) if size else b""
                if header[0] == STDOUT and payload:
                    self.stdout.feed_data(payload)
                elif header[0] == STDERR:
                    self._stderr.extend(payload)
        except (asyncio.IncompleteReadError, OSError):
            pass  # the end of the stream, or the connection closed by kill()
        finally:
            self.stdout.feed_eof()

    def send(self, frame: bytes) -> None:
        """Queue `frame` for the launcher's stdin (never blocks)."""
        if not self._writer.is_closing():
            self._writer.write(frame)

    def oom_kills(self) -> int:
        return _cgroup_counter(self._cgroup.get("memory"), "memory.oom_control", "oom_kill") \
            or _cgroup_counter(self._cgroup.get(""), "memory.events", "oom_kill")

    def cpu_seconds(self) -> float | None:
        try:
            if "cpuacct" in self._cgroup:
                with open(os.path.join(self._cgroup["cpuacct"], "cpuacct.usage")) as f:
                    return int(f.read()) / 1e9
            if "" in self._cgroup:
                return _cgroup_counter(self._cgroup[""], "cpu.stat", "usage_usec") / 1e6
        except (OSError, ValueError):
            pass
        return None

    async def wait(self) -> Exit:
        """The launcher's exit, once its output has ended; the container is
        then removed."""
        if self._exit is None:
            await asyncio.shield(self._pump_task)
            state = None
            if self._kill_task is None:
                try:
                    state = await self.kind._call(self.kind._finish, self.container)
                except Exception:
                    log.exception("could not get the exit of sandbox container %.12s", self.container)
                    await self.kill()
            if self._kill_task is not None:
                await asyncio.shield(self._kill_task)
            self._close()
            self._exit = _exit_from(state)
        return self._exit

    async def kill(self) -> None:
        """Remove the container by force (the engine kills its whole cgroup
        and answers once it is gone); safe to call again and while wait()
        is pending (which then reports SIGKILL)."""
        if self._exit is not None:
            return  # wait() removed it already
        if self._kill_task is None:
            self._kill_task = asyncio.ensure_future(self._remove())
        await asyncio.shield(self._kill_task)

    async def release(self) -> None:
        """Nothing left to do: removing the container removed its cgroup."""

    async def _remove(self) -> None:
        try:
            await self.kind._call(_remove, self.container)
        except Exception:
            log.exception("could not remove the sandbox container %.12s", self.container)
        # The daemon ends the attach stream as the container goes; close it
        # ourselves if it does not, so that readers and wait() never hang.
        try:
            await asyncio.wait_for(asyncio.shield(self._pump_task), KILL_DRAIN)
        except asyncio.TimeoutError:
            pass
        self._close()

    def _close(self) -> None:
        if not self._writer.is_closing():
            self._writer.close()


def _exit_from(state: dict[str, Any] | None) -> Exit:
    """Exit from a container's State; SIGKILL when it was removed first."""
    if state is None:
        return Exit(signal=signal.SIGKILL)
    code = state.get("ExitCode")
    oom = bool(state.get("OOMKilled"))
    # The launcher always exits 0 itself (the program's status is in its
    # exit frame): 128 + N means it was killed by signal N.
    if code is not None and code > 128:
        return Exit(signal=code - 128, oom_killed=oom)
    return Exit(code=code, oom_killed=oom)


def landlock_works() -> bool:
    """Has this kernel Landlock (which the launcher hides /proc with)?"""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION): its ABI version, or -1
    return bool(libc.syscall(ctypes.c_long(444), None, ctypes.c_long(0), ctypes.c_long(1)) >= 1)


def _cgroup_dirs(pid: int) -> dict[str, str]:
    """{controller ("" on v2): folder} of the cgroups of a host pid."""
    dirs: dict[str, str] = {}
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if not controllers:
                    dirs[""] = os.path.join("/sys/fs/cgroup", path.lstrip("/"))
                for name in controllers.split(","):
                    if name in ("memory", "cpuacct", "freezer"):
                        dirs[name] = os.path.join("/sys/fs/cgroup", name, path.lstrip("/"))
    except OSError:
        pass
    return {k: v for k, v in dirs.items() if os.path.isdir(v)}


def _group_writes(dirs: dict[str, str]) -> GroupWrites | None:
    """The container's write count and freezer, where its cgroup was found
    (the server reads and freezes it as root, beside the engine)."""
    if "" in dirs:
        return GroupWrites(2, {"": dirs[""]})
    if "freezer" in dirs and "memory" in dirs:
        return GroupWrites(1, {"freezer": dirs["freezer"], "memory": dirs["memory"]})
    return None


def _cgroup_counter(folder: str | None, name: str, key: str) -> int:
    """The value of `key` in a flat-keyed cgroup file, 0 if unknown."""
    if not folder:
        return 0
    try:
        with open(os.path.join(folder, name)) as f:
            for line in f:
                k, _, v = line.partition(" ")
                if k == key:
                    return int(v)
    except (OSError, ValueError):
        pass
    return 0


def _connect(timeout: float) -> Any:
    """A low-level client for the daemon the environment names (DOCKER_HOST,
    else the local socket), with `timeout` on every call."""
    import docker
    api = docker.APIClient(version="auto", timeout=timeout, **docker.utils.kwargs_from_env())
    if api.base_url.startswith("https"):
        # The attach stream is read directly from the socket, which TLS would
        # hide: use the daemon's Unix socket (or plain TCP on a private network).
        api.close()
        raise RuntimeError("the docker sandbox does not support a TLS DOCKER_HOST")
    return api


def _take_socket(sdk_socket: Any) -> socket.socket:
    """Our own non-blocking socket for the SDK's attach stream, which is
    closed on its side (it must not go back to a connection pool)."""
    inner = getattr(sdk_socket, "_sock", sdk_socket)  # socket.SocketIO wraps the socket
    raw = socket.socket(fileno=os.dup(inner.fileno()))
    raw.setblocking(False)
    response = getattr(sdk_socket, "_response", None)
    for part in (sdk_socket, inner, response):
        try:
            if part is not None:
                part.close()
        except Exception:
            pass  # closing someone else's half: nothing to do about it
    return raw


def _remove(api: Any, container: str) -> None:
    """Remove a container by force; one that is already gone is fine."""
    import docker
    try:
        api.remove_container(container, force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as e:
        if e.status_code != 409:  # 409: its removal is already in progress
            raise


def _owner_id(pid: int) -> str:
    """host/boot id/pid/start time: names one process for good, even across
    reboots and pid reuse."""
    return "/".join([socket.gethostname(), _boot_id(), str(pid), _start_time(pid) or "?"])


def _owner_alive(owner: str) -> bool:
    """Is the worker `owner` (from _owner_id, on this host) still running?"""
    try:
        _host, boot, pid_text, started = owner.split("/")
        pid = int(pid_text)
    except ValueError:
        return False  # not one of ours: a leftover of unknown origin
    return boot == _boot_id() and _start_time(pid) == started


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return "?"


def _start_time(pid: int) -> str | None:
    """The process's start time (clock ticks since boot), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22; the name may hold spaces and ')'
