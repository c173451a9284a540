"""The CPU group of student code: below everything else on the machine.

As root, programs in the local and process sandboxes run in one cgroup
marked idle (`cpu.idle`, Linux 5.15+, the group form of SCHED_IDLE): the
kernel gives them the CPU only when nothing else wants it, and a waking
server thread, PostgreSQL backend or file-system kernel thread preempts
them at once. Weights alone do not do that: measured on 2 cores with 60
busy loops in low-weight groups, each step of a save (fsync, rename, fsync
of the folder) still waited a scheduler tick behind a loop, 4 ms each; in
the idle group the save took what it takes on an idle machine (0.3 ms).

It needs root and the cgroup v1 `cpu` controller mounted writable (as on
these machines). Elsewhere `create` returns None and each sandbox's
autogroup is lowered instead (sandbox.lower_group), which protects the
server but not the kernel's threads nor PostgreSQL's backends.
"""
import logging
import os

log = logging.getLogger(__name__)

NAME = "pyclassroom-sandboxes"
V1_ROOT = "/sys/fs/cgroup/cpu"


class CpuGroup:
    def __init__(self, path):
        self.path = path

    def add(self, *pids):
        """Move processes (all their threads) into the group; their children
        follow. False if the first cannot be moved (gone already). It may
        wait for the kernel (an RCU grace period): not on the IOLoop."""
        for i, pid in enumerate(pids):
            try:
                with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
                    f.write(str(pid))
            except OSError:
                if i == 0:
                    return False
        return True

    def __repr__(self):
        return f"CpuGroup({self.path!r})"


def own_v1_path():
    """This process's group in the v1 `cpu` hierarchy, e.g. "/"; None if no
    v1 `cpu` controller is mounted."""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if "cpu" in controllers.split(","):
                    return path
    except (OSError, ValueError):
        pass
    return None


def create():
    """The idle group for sandboxes, created under this process's own
    (idempotent, so every worker may call it); None where it cannot be."""
    if os.geteuid() != 0 or not os.path.exists(os.path.join(V1_ROOT, "cpu.shares")):
        return None
    own = own_v1_path()
    if own is None:
        return None
    path = os.path.join(V1_ROOT, own.lstrip("/"), NAME)
    try:
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "cpu.idle"), "w") as f:
            f.write("1")
    except OSError as e:
        log.debug("no idle CPU group for sandboxes (%s)", e)
        return None
    return CpuGroup(path)
