"""A cgroup for each sandbox: limits for the whole run, a kill that misses nothing.

A program can fork, double-fork and `setsid` its way out of any process
group, and six processes under a per-process memory limit hold six times
the limit. A cgroup holds every process the sandbox ever starts, whatever
they do, so the server

- limits the run as a whole: memory (tmpfs pages of /tmp and /dev/shm
  included), number of processes, CPU bandwidth (one core), and reads the
  CPU time and OOM kills of the run;
- ends it for good: v2 writes `cgroup.kill`; v1 freezes the group (no fork
  can race the kill), SIGKILLs every task and thaws it; either way it then
  reads the group until it is empty: the kernel, not a pipe's end of file,
  says that the run's processes are gone.

The sandboxes' parent group (`pyclassroom-sandboxes`, under the server's
own) is marked idle for the CPU (`cpu.idle`, the group form of SCHED_IDLE):
student code gets the CPU only when the server, PostgreSQL and the kernel's
file-system threads do not want it (measured: with 60 busy loops in
low-weight groups each step of a save waited a 4 ms scheduler tick; in the
idle group it took what it takes on an idle machine).

Needs root. On cgroup v1 (these machines) the `memory`, `pids` and
`freezer` hierarchies must be mounted (`cpu`, `cpuacct` are used when
there); on v2 the server moves itself into a leaf (`pyclassroom-server`)
so its own group may hand controllers down, as v2 requires. Everything
here blocks (cgroupfs writes may wait for the kernel): call it from a thread.
"""
import errno
import logging
import os
import signal
import time
from dataclasses import dataclass
from typing import TypedDict

log = logging.getLogger(__name__)

PARENT = "pyclassroom-sandboxes"
ASSIST_PARENT = "pyclassroom-assist"  # editing help's processes (server/assist/jail.py): not idle
ENDING = "pyclassroom-ending"  # v1: where a launcher starts, and a killed run's processes exit, at normal CPU priority
SERVER_LEAF = "pyclassroom-server"
V1_REQUIRED = ("memory", "pids", "freezer")
V1_OPTIONAL = ("cpu", "cpuacct")
V2_CONTROLLERS = ("memory", "pids", "cpu")
CPU_PERIOD_US = 100_000
KILL_TIMEOUT = 10.0


class Priority(TypedDict):
    """Groups.detect's arguments for one SANDBOX_CPU (`priority`)."""
    parent: str
    idle: bool


@dataclass(frozen=True)
class GroupLimits:
    memory_bytes: int
    processes: int
    cpus: float = 1.0


def _write(path: str, value: object) -> None:
    with open(path, "w") as f:
        f.write(str(value))


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _pids_in(path: str) -> list[int]:
    try:
        return [int(p) for p in _read(path).split()]
    except FileNotFoundError:
        return []


def _mounts() -> list[tuple[str, str, list[str]]]:
    """[(mount point, fs type, super options)] of cgroup file systems."""
    found: list[tuple[str, str, list[str]]] = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            dash = fields.index("-")
            fstype, options = fields[dash + 1], fields[dash + 3]
            if fstype in ("cgroup", "cgroup2"):
                found.append((fields[4].replace("\\040", " "), fstype, options.split(",")))
    return found


def _own_paths() -> dict[str, str]:
    """{controller or "": path} of this process's groups ("" is v2)."""
    own: dict[str, str] = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                own[name.replace("name=", "")] = path
    return own


def worker_tag(pid: int | None = None) -> str:
    """`w<pid>-<start time>`: names a worker for good (pids are reused)."""
    pid = pid or os.getpid()
    return f"w{pid}-{_start_time(pid)}"


def _start_time(pid: int) -> str | None:
    try:
        stat = _read(f"/proc/{pid}/stat")
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def tag_alive(tag: str) -> bool:
    """Is the worker `worker_tag` named still running?"""
    try:
        pid, started = tag[1:].split("-", 1)
        return _start_time(int(pid)) == started
    except ValueError:
        return False


class RunGroup:
    """One sandbox's cgroup: a directory per v1 hierarchy, or one on v2."""

    def __init__(self, version: int, dirs: dict[str, str], ending: str | None = None) -> None:
        self.version = version
        self.dirs = dirs  # {controller: path} on v1, {"": path} on v2
        self.ending = ending  # v1: the cpu group outside the idle parent, or None
        self.name = os.path.basename(next(iter(dirs.values())))

    def _dir(self, controller: str) -> str | None:
        return self.dirs.get(controller if self.version == 1 else "")

    def add(self, pid: int) -> None:
        """Move a process (all its threads) in; its children follow."""
        for path in self.dirs.values():
            _write(os.path.join(path, "cgroup.procs"), pid)

    def pids(self) -> set[int]:
        """Every process still in the group."""
        seen: set[int] = set()
        for path in self.dirs.values():
            seen.update(_pids_in(os.path.join(path, "cgroup.procs")))
        return seen

    def kill(self, timeout: float = KILL_TIMEOUT) -> bool:
        """Kill every process in the group; True once it is empty."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.version == 2:
                try:
                    _write(os.path.join(self.dirs[""], "cgroup.kill"), 1)
                except FileNotFoundError:
                    return True
            else:
                self._kill_v1()
            for _ in range(50):
                if not self.pids():
                    return True
                time.sleep(0.01)
        left = self.pids()
        if left:
            log.error("sandbox cgroup %s still holds processes %s after %.0f s of killing",
                      self.name, sorted(left), timeout)
        return not left

    def _kill_v1(self) -> None:
        """Freeze (so nothing forks while we kill), SIGKILL everything, thaw."""
        freezer = os.path.join(self.dirs["freezer"], "freezer.state")
        self._hurry()
        try:
            _write(freezer, "FROZEN")
            for _ in range(100):  # tasks in the middle of a system call take a moment
                if _read(freezer).strip() == "FROZEN":
                    break
                time.sleep(0.005)
        except FileNotFoundError:
            return
        self._hurry()  # what forked meanwhile
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _write(freezer, "THAWED")  # the queued SIGKILLs are delivered now

    def _hurry(self) -> None:
        """Take the run's processes out of the idle parent for the CPU (only:
        their memory, pids and freezer groups stay): a process must run to
        freeze and to exit, and an idle one waits while anything else on
        the host wants the CPU, which made a kill take seconds. A launcher
        starts there too (`starting`): it is the server's code, not yet the
        student's, and in the idle group a busy host starved it past its
        deadline to be ready."""
        if self.ending is None:
            return
        for pid in _pids_in(os.path.join(self.dirs["cpu"], "cgroup.procs")):
            try:
                _write(os.path.join(self.ending, "cgroup.procs"), pid)
            except OSError:
                pass  # gone meanwhile

    starting = _hurry

    def settle(self) -> None:
        """The launcher is ready (nothing of the student's has run yet): its
        processes go back into the run's own idle group for the CPU, where
        the program will run."""
        if self.ending is None:
            return
        for pid in self.pids():
            try:
                _write(os.path.join(self.dirs["cpu"], "cgroup.procs"), pid)
            except OSError:
                pass  # gone meanwhile: its end is reported by wait()

    def oom_kills(self) -> int:
        """Processes the kernel killed for want of memory in this group."""
        path = self._dir("memory")
        if path is None:  # no memory group
            return 0
        try:
            text = _read(os.path.join(path, "memory.oom_control" if self.version == 1 else "memory.events"))
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def cpu_seconds(self) -> float | None:
        """CPU time used by everything in the group so far; None if unknown."""
        try:
            if self.version == 1:
                return int(_read(os.path.join(self.dirs["cpuacct"], "cpuacct.usage"))) / 1e9
            for line in _read(os.path.join(self.dirs[""], "cpu.stat")).splitlines():
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) / 1e6
        except (OSError, KeyError, ValueError):
            pass
        return None

    def remove(self) -> None:
        """Remove the (empty) group's directories."""
        for path in self.dirs.values():
            try:
                os.rmdir(path)
            except FileNotFoundError:
                pass
            except OSError as e:
                if e.errno != errno.EBUSY:
                    raise
                log.warning("sandbox cgroup %s is not empty yet; left in place", path)


def priority(name: str) -> Priority:
    """Groups.detect's arguments for SANDBOX_CPU `name`: each priority has a
    parent of its own, so servers of both kinds on one host (the tests')
    never set each other's."""
    return {"parent": PARENT, "idle": True} if name == "idle" else {"parent": PARENT + "-low", "idle": False}


class Groups:
    """The sandboxes' parent group on this host, and the groups under it."""

    def __init__(self, version: int, parents: dict[str, str], limits_active: list[str], idle: bool = True) -> None:
        self.version = version
        self.parents = parents  # {controller: path of the parent} (v2: {"": path})
        self.limits_active = limits_active  # names of the limits the kernel enforces here
        self.idle = self._make_idle() if idle else False
        self.ending = self._make_ending()
        self._count = 0
        self.tag = worker_tag()

    @classmethod
    def detect(cls, parent: str = PARENT, idle: bool = True) -> "Groups | None":
        """The host's groups under `parent` (at idle CPU priority if `idle`),
        or None (not root, or no usable cgroups)."""
        if os.geteuid() != 0:
            return None
        try:
            mounts, own = _mounts(), _own_paths()
            v1: dict[str, str] = {}
            for point, fstype, options in mounts:
                if fstype == "cgroup":
                    for name in options:
                        if name in V1_REQUIRED + V1_OPTIONAL and name in own:
                            v1.setdefault(name, os.path.join(point, own[name].lstrip("/")))
            if all(name in v1 for name in V1_REQUIRED):
                return cls._v1(v1, parent, idle)
            v2 = [point for point, fstype, _ in mounts if fstype == "cgroup2"]
            if v2 and "" in own:
                path = own[""]
                if os.path.basename(path) == SERVER_LEAF:  # moved there by at_v2 before the fork
                    path = os.path.dirname(path)
                return cls.at_v2(os.path.join(v2[0], path.lstrip("/")), parent, idle)
        except OSError as e:
            log.warning("no per-run cgroups: %s", e)
        return None

    @classmethod
    def _v1(cls, own_dirs: dict[str, str], parent: str = PARENT, idle: bool = True) -> "Groups":
        parents: dict[str, str] = {}
        for name, path in own_dirs.items():
            parents[name] = os.path.join(path, parent)
            os.makedirs(parents[name], exist_ok=True)
        active = ["memory", "processes"] + (["cpu"] if "cpu" in parents else [])
        return cls(1, parents, active, idle)

    @classmethod
    def at_v2(cls, own_dir: str, parent: str = PARENT, idle: bool = True) -> "Groups":
        """v2 with `own_dir` as the server's group: the server moves into a
        leaf below it, so `own_dir` may hand its controllers down."""
        parent = os.path.join(own_dir, parent)
        available = _read(os.path.join(own_dir, "cgroup.controllers")).split()
        wanted = [c for c in V2_CONTROLLERS if c in available]
        if wanted and _read(os.path.join(own_dir, "cgroup.procs")).split():
            leaf = os.path.join(own_dir, SERVER_LEAF)
            os.makedirs(leaf, exist_ok=True)
            for pid in _read(os.path.join(own_dir, "cgroup.procs")).split():
                try:
                    _write(os.path.join(leaf, "cgroup.procs"), pid)
                except OSError:
                    pass  # a process that went away meanwhile
        os.makedirs(parent, exist_ok=True)
        for where in (own_dir, parent):
            try:
                _write(os.path.join(where, "cgroup.subtree_control"), " ".join("+" + c for c in wanted))
            except OSError as e:
                log.warning("cgroup v2: cannot hand %s down in %s (%s)", wanted, where, e)
                wanted = []
        active = [{"memory": "memory", "pids": "processes", "cpu": "cpu"}[c] for c in wanted]
        return cls(2, {"": parent}, active, idle)

    def _make_idle(self) -> bool:
        path = self.parents.get("cpu" if self.version == 1 else "")
        if path is None:  # no cpu group
            return False
        try:
            _write(os.path.join(path, "cpu.idle"), 1)
            return True
        except OSError:
            return False

    def _make_ending(self) -> str | None:
        if self.version != 1 or not self.idle:
            return None  # v2 kills with cgroup.kill, in the group as it is
        path = os.path.join(os.path.dirname(self.parents["cpu"]), ENDING)
        try:
            os.makedirs(path, exist_ok=True)
            return path
        except OSError:
            return None

    def new(self, limits: GroupLimits) -> RunGroup:
        """A new group for one sandbox, with `limits` set."""
        self._count += 1
        name = f"{self.tag}.{self._count}"
        dirs = {c: os.path.join(p, name) for c, p in self.parents.items()}
        for path in dirs.values():
            os.makedirs(path, exist_ok=True)
        group = RunGroup(self.version, dirs, self.ending)
        try:
            self._limit(group, limits)
        except OSError:
            group.remove()
            raise
        return group

    def _limit(self, group: RunGroup, limits: GroupLimits) -> None:
        quota = max(1000, int(CPU_PERIOD_US * limits.cpus))
        if self.version == 1:
            memory = group.dirs["memory"]
            _write(os.path.join(memory, "memory.limit_in_bytes"), limits.memory_bytes)
            if os.path.exists(os.path.join(memory, "memory.memsw.limit_in_bytes")):
                _write(os.path.join(memory, "memory.memsw.limit_in_bytes"), limits.memory_bytes)  # no swap
            _write(os.path.join(group.dirs["pids"], "pids.max"), limits.processes)
            if "cpu" in group.dirs:
                _write(os.path.join(group.dirs["cpu"], "cpu.cfs_period_us"), CPU_PERIOD_US)
                _write(os.path.join(group.dirs["cpu"], "cpu.cfs_quota_us"), quota)
            return
        path = group.dirs[""]
        for name, value in (("memory.max", limits.memory_bytes), ("memory.swap.max", 0),
                            ("pids.max", limits.processes), ("cpu.max", f"{quota} {CPU_PERIOD_US}")):
            if os.path.exists(os.path.join(path, name)):
                _write(os.path.join(path, name), value)

    def cleanup_leftovers(self) -> int:
        """Kill and remove the groups of workers that are gone (a crash, kill -9);
        returns how many there were."""
        removed = 0
        first = next(iter(self.parents.values()))
        for name in os.listdir(first):
            tag = name.split(".", 1)[0]
            if not name.startswith("w") or tag == self.tag or tag_alive(tag):
                continue
            group = RunGroup(self.version, {c: os.path.join(p, name) for c, p in self.parents.items()}, self.ending)
            group.kill()
            group.remove()
            removed += 1
        return removed

    def describe(self) -> str:
        return f"cgroup v{self.version}: " + ", ".join(self.limits_active or ["no limits"]) + \
            " per run, killed as a whole" + (", idle CPU priority" if self.idle else
                                             ", low CPU priority" if self._parent_name() == priority("low")["parent"]
                                             else "")

    def _parent_name(self) -> str:
        return os.path.basename(next(iter(self.parents.values())))
