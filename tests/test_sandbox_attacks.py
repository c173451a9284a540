"""A student's program as an adversary that has read our source, run over
the real WebSocket in every sandbox that promises isolation (local and
docker). Each test tries an escape, asserts it failed, and then that
nothing of the student is left on the host, their run lock and the running
count are free, and their next run works.

Which defences a machine has (cgroups, seccomp) is in /api/status; a test
that needs one this machine lacks says so and is skipped.
"""
import asyncio
import json
import os

import aiohttp
import pytest

from loadtest.run_client import RunClient
from tests.runs_support import (assert_all_released, launcher_pids, lock_of, metric,
                                no_processes_of, probe, run, sandbox_uid, save, student, wait_for, REUSE_PROBE)
from loadtest.harness import ADMIN_PASSWORD

ESCAPES = r'''
import ctypes, errno, json, os, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)

def name(err):
    return errno.errorcode.get(err, str(err))

def call(nr, *args):
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return "ok" if result != -1 else name(ctypes.get_errno())

def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return name(e.errno)

def getfd():
    pidfd = os.pidfd_open(1)
    result = call(438, pidfd, 1, 0)  # pidfd_getfd: the launcher's stdout
    os.close(pidfd)
    if result != "ok":
        raise OSError(getattr(errno, result, 0), result)

def tiocsti():
    char = ctypes.c_char(b"x")
    if libc.ioctl(0, 0x5412, ctypes.byref(char)) != 0:
        raise OSError(ctypes.get_errno(), "TIOCSTI")

results = {
    "ptrace attach the launcher": call(101, 16, 1, 0, 0),
    "ptrace seize the launcher": call(101, 0x4206, 1, 0, 0),
    "read the launcher's memory": attempt(lambda: open("/proc/1/mem", "rb").read(1)),
    "write the launcher's memory": attempt(lambda: open("/proc/1/mem", "wb").write(b"x")),
    "list the launcher's descriptors": attempt(lambda: os.listdir("/proc/1/fd")),
    "take the launcher's descriptor": attempt(getfd),
    "new user namespace": call(272, 0x10000000),
    "mount": call(165, 0, 0, 0, 0, 0),
    "bpf": call(321, 0, 0, 0),
    "perf_event_open": call(298, 0, 0, -1, -1, 0),
    "keyctl": call(250, 0, 0, 0, 0, 0),
    "add_key": call(248, 0, 0, 0, 0, 0),
    "userfaultfd": call(323, 0),
    "io_uring_setup": call(425, 1, 0),
    "type into the terminal (TIOCSTI)": attempt(tiocsti),
}
held = []
for fd in range(4096):
    try:
        os.fstat(fd)
        held.append(fd)
    except OSError:
        pass
print("RESULTS", json.dumps(results), flush=True)
print("HELD", held, flush=True)

# Pose as the launcher on every descriptor held: its frames, the old
# sequences, and exit reasons made to be format strings.
forged = []
for status in ({"code": 0}, {"code": 0, "reason": "ok"}, {"reason": "{wall.__class__}"},
               {"reason": "{wall:>50000000}"}, {"reason": "{0}"}):
    body = json.dumps(status).encode()
    forged.append(b"X" + struct.pack(">I", len(body)) + body)
forged += [b"R" + struct.pack(">I", 0), b"\x1b]7012;exit;{\"code\": 0}\x07\x1b]7012;ready\x07",
           b"\x1b]7012;end\x07", b"{wall:>50000000}{0}{cpu.__class__}"]
for fd in held:
    for payload in forged:
        try:
            os.write(fd, payload)
            os.write(fd, payload[:3])  # and cut across writes
            time.sleep(0.01)
            os.write(fd, payload[3:])
        except OSError:
            pass
open("/tmp/runs", "w").write("1")  # the probe run after it counts on from here
time.sleep(0.5)
print("still running", flush=True)
os.write(1, b"\x1b]7011;image;never ended")  # an image sequence left open as it ends
sys.exit(3)
'''


def test_a_program_cannot_reach_its_launcher_nor_pose_as_it(isolated_server):
    server = isolated_server
    ada = student(server, "ada")
    save(ada, "escape.py", ESCAPES)
    save(ada, "probe.py", REUSE_PROBE)

    async def go():
        async with RunClient(server.url, ada.http.cookies.get_dict()) as rc:
            exit_ = await rc.run("escape.py", timeout=60)
            out = rc.output("stdout")
            _, line = await probe(rc)
            return exit_, out, line
    exit_, out, line = asyncio.run(go())
    results = json.loads(out.split("RESULTS ", 1)[1].split("\r\n", 1)[0])
    assert {k: v for k, v in results.items() if v == "ok"} == {}, results
    assert out.split("HELD ", 1)[1].split("\r\n", 1)[0] == "[0, 1, 2]"  # the terminal and stderr, nothing else
    # The run ended when the program did, with its own exit code, in words of our own.
    assert "still running" in out
    assert exit_["reason"] == "error" and exit_["code"] == 3
    assert exit_["message"] == "stopped with an error: it ended itself with the number 3, as sys.exit(3) does"
    # The sandbox serves the next run, with nothing of this one in it.
    assert line == "run 2 interpreter state from before: False other processes: []"
    assert_all_released(server, ada)


DAEMON = '''
import os, sys, time
# Out of the run's process group and session, twice forked, reparented:
# it writes a line every tenth of a second for a minute.
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for i in range(600):
            with open("heartbeat.txt", "a") as f:
                f.write("x")
            time.sleep(0.1)
        os._exit(0)
    os._exit(0)
print("daemon started", flush=True)
if sys.argv[1:] == ["stay"]:
    time.sleep(300)
'''


def _heartbeat_stopped(server, username):
    path = os.path.join(server.env["DATA_DIR"], "storage", "home", username, "heartbeat.txt")

    def size():
        try:
            return os.path.getsize(path)
        except FileNotFoundError:
            return 0
    before = size()
    asyncio.run(asyncio.sleep(1.0))
    return size() == before


def test_closing_the_socket_ends_daemons_that_left_the_process_group(isolated_server):
    server = isolated_server
    ada = student(server, "ada")
    save(ada, "daemon.py", DAEMON)

    async def go():
        async with RunClient(server.url, ada.http.cookies.get_dict()) as rc:
            await rc.send(type="run", path="daemon.py", args=["stay"])
            await rc.until("output", 60)
    asyncio.run(go())  # the socket closes with the program running
    assert no_processes_of(server, ada.username)
    # On a runner the program wrote a copy of the home, taken back as its job ends: after that, nothing writes.
    assert wait_for(lambda: lock_of(server, ada.username) is None)
    assert _heartbeat_stopped(server, ada.username)
    assert_all_released(server, ada)


def test_a_program_that_ends_leaves_no_daemon_behind(isolated_server):
    server = isolated_server
    ada = student(server, "ada")
    exit_, rc = run(server, ada, DAEMON, path="daemon.py")
    assert exit_["reason"] == "ok", rc.messages
    assert _heartbeat_stopped(server, ada.username)
    assert_all_released(server, ada)


MEMORY_SPREAD = '''
import os, time
children = []
for i in range(6):
    pid = os.fork()
    if pid == 0:
        block = bytearray(200 << 20)  # under the per-process limit; six of them are not
        for at in range(0, len(block), 4096):
            block[at] = 1
        time.sleep(2)  # long enough for all six to be there at once
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
print("all children ended", flush=True)
'''


def test_memory_is_limited_for_the_run_not_per_process(isolated_server):
    server = isolated_server
    if not _defences(server)["cgroup"]:
        pytest.skip("no per-run cgroup on this machine (needs root and cgroups)")
    ada = student(server, "ada")
    exit_, rc = run(server, ada, MEMORY_SPREAD, timeout=120)
    assert exit_["reason"] == "memory_limit", rc.messages
    assert "300 MB" in exit_["message"]
    assert_all_released(server, ada)


FILL_TMPFS = '''
import errno
def fill(folder):
    # Files of 8 MiB (each under the file-size limit) until the space runs out.
    written = 0
    try:
        for n in range(128):
            with open(f"{folder}/big{n}", "wb") as f:
                for _ in range(8):
                    f.write(b"x" * (1 << 20))
                    written += 1 << 20
    except OSError as e:
        return written >> 20, errno.errorcode[e.errno]
    return written >> 20, None
print("shm", *fill("/dev/shm"))
print("tmp", *fill("/tmp"))
'''


def test_dev_shm_and_tmp_are_small_and_private(isolated_server):
    server = isolated_server
    ada = student(server, "ada")
    exit_, rc = run(server, ada, FILL_TMPFS, timeout=120)
    assert exit_["reason"] == "ok", rc.messages
    lines = dict(line.split(" ", 1) for line in rc.output("stdout").splitlines())
    for place in ("shm", "tmp"):
        megabytes, error = lines[place].split()
        assert error == "ENOSPC" and int(megabytes) <= 64, lines
    assert_all_released(server, ada)


def test_many_tabs_share_one_ready_sandbox(isolated_server):
    server = isolated_server
    ada = student(server, "ada")
    save(ada, "hello.py", "print('from the last tab')\n")
    uid = sandbox_uid(server, ada.username)
    started_before = metric(server, "pyclassroom_sandbox_start_seconds_count")

    async def go():
        cookies = ada.http.cookies.get_dict()
        tabs = []
        for _ in range(40):
            tab = RunClient(server.url, cookies)
            await tab.__aenter__()
            tabs.append(tab)
        await asyncio.sleep(2)  # time for any sandbox a tab would start
        launchers = await asyncio.to_thread(launcher_pids, uid)
        closed = [t for t in tabs if t.ws.closed or await _closed_soon(t)]
        exit_ = await tabs[-1].run("hello.py")
        for tab in tabs:
            await tab.__aexit__(None, None, None)
        return launchers, len(closed), closed[0].ws.close_code if closed else None, exit_, tabs[-1].output()
    launchers, closed, code, exit_, out = asyncio.run(go())
    assert len(launchers) <= 1
    assert metric(server, "pyclassroom_sandbox_start_seconds_count") - started_before <= 2
    assert closed == 40 - 8 and code == 4002  # RUN_SOCKETS_PER_USER: the oldest tabs gave way
    assert exit_["reason"] == "ok" and out == "from the last tab\r\n"
    assert_all_released(server, ada)


async def _closed_soon(tab):
    try:
        msg = await tab.ws.receive(timeout=0.05)
    except asyncio.TimeoutError:
        return False
    return msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSING)


@pytest.mark.parametrize("how", ["deactivate", "logout", "reset_password"])
def test_an_ended_session_stops_the_program_and_closes_every_socket(two_workers_server, how):
    server = two_workers_server
    ada = student(server, "ada")
    save(ada, "wait.py", "print('waiting', flush=True)\ninput()\n")
    admin = server.client()
    admin.login_ok("admin", ADMIN_PASSWORD)

    async def go():
        cookies = ada.http.cookies.get_dict()
        tabs = [RunClient(server.url, cookies) for _ in range(4)]  # on both workers, most likely
        for tab in tabs:
            await tab.__aenter__()
        await tabs[0].send(type="run", path="wait.py")
        await tabs[0].until("output", 60)
        if how == "deactivate":
            r = await asyncio.to_thread(admin.post, f"/api/admin/users/{ada.username}/active", json={"active": False})
        elif how == "reset_password":
            r = await asyncio.to_thread(admin.post, f"/api/admin/users/{ada.username}/password")
        else:
            r = await asyncio.to_thread(ada.post, "/api/logout")
        assert r.status_code == 200, r.text
        exit_ = await tabs[0].until("exit", 30)
        codes = []
        for tab in tabs:
            msg = await tab.ws.receive(timeout=30)
            while msg.type == aiohttp.WSMsgType.TEXT:
                msg = await tab.ws.receive(timeout=30)
            codes.append(tab.ws.close_code)
            await tab.__aexit__(None, None, None)
        return exit_, codes
    exit_, codes = asyncio.run(go())
    assert exit_["reason"] == "logged_out"
    assert codes == [4401] * 4
    assert no_processes_of(server, ada.username)
    assert wait_for(lambda: metric(server, "pyclassroom_runs_active") == 0)


def _defences(server):
    """What /api/status says holds programs (on runners: as the child runner
    said when it started, at the first program)."""
    if server.env["SANDBOX"] == "remote":
        exit_, _ = run(server, student(server, "defences"), "print(1)\n")
        assert exit_["reason"] == "ok", exit_
    admin = server.client()
    admin.login_ok("admin", ADMIN_PASSWORD)
    return admin.get("/api/status").json()["defences"]


MOUNTS = '''
import ctypes, os, struct
for path in ("/proc/self/mountinfo", "/proc/1/mountinfo", "/proc/self/mounts", "/proc/mounts",
             f"/proc/{os.getpid()}/mountinfo", f"/proc/{os.getppid()}/mountinfo"):
    try:
        print(open(path).read())
    except OSError as e:
        print(path, "not readable:", type(e).__name__)
# The kernel's other way to the same facts: listmount(2) and statmount(2).
libc = ctypes.CDLL(None, use_errno=True)
ids = (ctypes.c_uint64 * 64)()
found = libc.syscall(ctypes.c_long(458), struct.pack("<IIQQ", 24, 0, 2**64 - 1, 0), ids, ctypes.c_long(64),
                     ctypes.c_long(0))
print("listmount:", found if found >= 0 else "refused")
for mount_id in list(ids)[:max(found, 0)]:
    buf = ctypes.create_string_buffer(1 << 14)  # the mount's root and point (STATMOUNT_MNT_ROOT | _MNT_POINT)
    if libc.syscall(ctypes.c_long(457), struct.pack("<IIQQ", 24, 0, mount_id, 0x18), buf, ctypes.c_long(1 << 14),
                    ctypes.c_long(0)) == 0:
        print("statmount:", buf.raw.replace(b"\\0", b" ").decode("latin-1"))
'''


def test_nothing_in_the_sandbox_names_the_hosts_paths(isolated_server):
    server = isolated_server
    if not _defences(server)["host_paths_hidden"]:
        pytest.skip(f"{server.env['SANDBOX']}: the engine mounts /proc, whose mountinfo names the home's path "
                    "on the host (put STORAGE_ROOT on a file system of its own)")
    ada = student(server, "ada")
    exit_, rc = run(server, ada, MOUNTS)
    assert exit_["reason"] == "ok", rc.messages
    out = rc.output()
    # Neither the home's path on the host nor the storage root's.
    assert server.env["DATA_DIR"] not in out and "/storage/home" not in out
    assert ada.username not in out
    assert "not readable" in out


def test_the_server_says_which_defences_this_machine_gives(isolated_server):
    """The start-up log and /api/status name the defences in force, as the
    machine allows them: seccomp where python3-seccomp is, per-run cgroups
    as root with cgroups."""
    import subprocess
    from server.runs import cgroups
    server = isolated_server
    kind = server.env["SANDBOX"]
    if kind == "remote":  # the sandbox of the worker's child runner
        kind = server.env["RUNNER_SANDBOX"]
    defences = _defences(server)
    has_seccomp = subprocess.run(["/usr/bin/python3", "-c", "import seccomp"], capture_output=True).returncode == 0
    assert defences["seccomp"] == has_seccomp
    if kind == "local":
        assert bool(defences["cgroup"]) == (cgroups.Groups.detect() is not None)
        assert defences["host_paths_hidden"] and defences["user_namespaces"] == "disabled"
    else:
        from server.runs.sandbox.docker import landlock_works
        assert defences["cgroup"] and defences["host_paths_hidden"] == landlock_works()
    assert defences["own_uid"] == (os.geteuid() == 0)
    line = server.wait_for_line(r"student programs run in the")
    assert ("seccomp filter on" in line) == has_seccomp


WRITE_PAST_QUOTA = '''
import sys, time
# Files under the file-size limit, together past the home's quota.
for n in range(int(sys.argv[1])):
    with open(f"big{n}.bin", "wb") as f:
        f.write(b"x" * (1536 << 10))
    time.sleep(float(sys.argv[2]))
print("wrote them all", flush=True)
'''


def test_a_program_writing_past_the_quota_is_told_and_the_next_save_and_run_refused(start_server):
    server = start_server(SANDBOX="local", QUOTA_BYTES=5 << 20, RUN_FILE_MB=2)
    ada = student(server, "ada")
    save(ada, "fill.py", WRITE_PAST_QUOTA)

    async def fill():
        async with RunClient(server.url, ada.http.cookies.get_dict()) as rc:
            # A run that writes nothing has its home walked at once; the
            # next one, within MEASURE_EVERY, has its walk put off a moment.
            first = await rc.run("fill.py", args=["0", "0"])
            exit_ = await rc.run("fill.py", args=["8", "0"])
            return first, exit_, await rc.until("notice", 30)
    first, exit_, notice = asyncio.run(fill())
    # Stopped as it went past (disk_guard.py), and told after the run.
    assert first["reason"] == "ok" and exit_["reason"] == "disk_limit"
    assert "over its quota" in notice["message"] and "Delete at least" in notice["message"]
    # The next save and the next run are refused, saying how much to delete.
    save_answer = ada.request("PUT", "/api/files/home/new.py", data=b"print(1)\n", headers={"If-Match": "*"})
    assert save_answer.status_code == 507 and "Delete at least" in save_answer.json()["message"]

    async def run_again():
        async with RunClient(server.url, ada.http.cookies.get_dict()) as rc:
            await rc.send(type="run", path="fill.py", args=["1", "0"])
            return await rc.until("error", 60)
    refused = asyncio.run(run_again())
    assert refused["error"] == "quota_exceeded" and "Delete at least" in refused["message"]
    # The teacher sees it in the roster.
    from tests.conftest import People
    teacher = People(server).teacher("teacher1")
    roster = {s["username"]: s for s in teacher.get("/api/roster").json()["students"]}
    assert roster[ada.username]["over_quota"] and roster[ada.username]["disk_bytes"] > 5 << 20
    # Deleting brings the student back.
    for entry in ada.get("/api/files/home/").json()["entries"]:
        if entry["name"].startswith("big"):
            assert ada.request("DELETE", "/api/files/home/" + entry["name"]).status_code == 200
    exit_, rc = run(server, ada, "print('back')\n", path="back.py")
    assert exit_["reason"] == "ok" and rc.output("stdout") == "back\r\n", rc.messages
    assert_all_released(server, ada)


def test_a_program_that_keeps_writing_is_stopped_at_the_quota(start_server):
    server = start_server(SANDBOX="local", QUOTA_BYTES=5 << 20, RUN_FILE_MB=2, RUN_CPU_SECONDS=60)
    ada = student(server, "ada")
    exit_, rc = run(server, ada, WRITE_PAST_QUOTA, args=["400", "0.2"], path="fill.py", timeout=120)
    assert exit_["reason"] == "disk_limit", rc.messages
    home = os.path.join(server.env["DATA_DIR"], "storage", "home", ada.username)
    written = sum(os.path.getsize(os.path.join(home, n)) for n in os.listdir(home) if n.startswith("big"))
    assert written < 400 * (1536 << 10)  # stopped long before it was done
