"""The sandboxes' cgroups, on this machine's hierarchy and on a cgroup v2
file system mounted for the test: a process tree that left its process
group and session is killed as a whole, and the group is then empty."""
import os
import subprocess
import sys
import tempfile

import pytest

from server.runs import cgroups

if os.geteuid() != 0:
    pytest.skip("cgroups are made by root", allow_module_level=True)

# Forks a child that leaves the session, which forks a grandchild; all of
# them sleep. Prints the grandchild's pid.
TREE = """
import os, sys, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    pid = os.fork()
    if pid == 0:
        time.sleep(300)
        os._exit(0)
    os.write(w, str(pid).encode())
    time.sleep(300)
    os._exit(0)
print(os.read(r, 32).decode(), flush=True)
time.sleep(300)
"""


def tree_in(group):
    """Start TREE, put it in `group` before it forks: (Popen, grandchild pid)."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read(1); exec(sys.argv[1])", TREE],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    group.add(proc.pid)
    proc.stdin.write("go")
    proc.stdin.flush()
    return proc, int(proc.stdout.readline())


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def check_kill(groups):
    group = groups.new(cgroups.GroupLimits(memory_bytes=256 << 20, processes=16))
    proc, grandchild = tree_in(group)
    try:
        assert len(group.pids()) == 3
        assert group.kill()
        assert group.pids() == set()
        assert proc.wait(10) == -9
        assert not alive(grandchild)
        group.remove()
        assert not any(os.path.exists(p) for p in group.dirs.values())
    finally:
        proc.kill()


def test_this_machines_groups_kill_a_whole_tree_and_hold_the_limits():
    groups = cgroups.Groups.detect()
    if groups is None:
        pytest.skip("no cgroups this server can use here")
    check_kill(groups)
    group = groups.new(cgroups.GroupLimits(memory_bytes=300 << 20, processes=44, cpus=1.0))
    try:
        if groups.version == 1:
            with open(os.path.join(group.dirs["memory"], "memory.limit_in_bytes")) as f:
                assert int(f.read()) == 300 << 20
            with open(os.path.join(group.dirs["pids"], "pids.max")) as f:
                assert f.read().strip() == "44"
        assert groups.idle  # student code at idle CPU priority
    finally:
        group.remove()


@pytest.fixture
def cgroup2():
    """A cgroup v2 file system, mounted for the test: the server's "own" group
    is a fresh one in it (this machine's controllers are v1's)."""
    point = tempfile.mkdtemp(prefix="cgroup2-")
    if subprocess.run(["mount", "-t", "cgroup2", "none", point], capture_output=True).returncode:
        os.rmdir(point)
        pytest.skip("cannot mount a cgroup v2 file system here")
    own = os.path.join(point, f"test-{os.getpid()}")
    os.makedirs(own, exist_ok=True)
    try:
        yield own
    finally:
        for path in sorted((os.path.join(d, n) for d, ns, _ in os.walk(own) for n in ns), reverse=True):
            os.rmdir(path)
        os.rmdir(own)
        subprocess.run(["umount", point])
        os.rmdir(point)


def test_v2_kills_a_whole_tree_with_cgroup_kill(cgroup2):
    groups = cgroups.Groups.at_v2(cgroup2)
    assert groups.version == 2
    check_kill(groups)


def test_v2_leftovers_of_a_dead_worker_are_killed_and_removed(cgroup2):
    groups = cgroups.Groups.at_v2(cgroup2)
    left = cgroups.RunGroup(2, {"": os.path.join(groups.parents[""], "w999999999-1.1")})
    os.makedirs(left.dirs[""])
    proc, grandchild = tree_in(left)
    mine = groups.new(cgroups.GroupLimits(memory_bytes=64 << 20, processes=8))
    try:
        assert groups.cleanup_leftovers() == 1
        assert proc.wait(10) == -9 and not alive(grandchild)
        assert not os.path.exists(left.dirs[""]) and os.path.exists(mine.dirs[""])
    finally:
        proc.kill()
        mine.remove()
