"""What the run tests share: logged-in students, running a saved program
over the real WebSocket, servers per sandbox kind, and looking at the host
the way the kernel sees it (which processes a student still has, where the
scheduler ranks them, what the server counts)."""
import asyncio
import os
import re

import requests

from loadtest.run_client import RunClient
from tests.helpers import sql

LIMITS = dict(RUN_CPU_SECONDS=2, RUN_MEMORY_MB=300, RUN_PROCESSES=40, RUN_OUTPUT_KB=512,
              RUN_IDLE_SECONDS=60, RUN_WALL_SECONDS=60)


def student(server, name):
    """A logged-in student's requests client, with a username of this test's
    own (`client.username`: the server may be shared)."""
    from tests.conftest import People
    return People(server).student(name)


def save(client, path, code):
    r = client.request("PUT", "/api/files/home/" + path, data=code if isinstance(code, bytes) else code.encode(), headers={"If-Match": "*"})
    assert r.status_code == 200, r.text


def run(server, client, code, inputs=(), path="main.py", timeout=30, on=None, **extra):
    """Save `code`, run it, answer prompts with `inputs`: (exit message, RunClient)."""
    save(client, path, code)

    async def go():
        async with RunClient(server.url, client.http.cookies.get_dict()) as rc:
            if on:
                await rc.send(type="run", path=path, **extra)
                return await rc.until("exit", timeout, on=lambda m: on(rc, m)), rc
            return await rc.run(path, inputs, timeout=timeout, **extra), rc
    return asyncio.run(go())


# -- the host's view ----------------------------------------------------------------

def user_id(server, username):
    [(found,)] = sql(server.env["DATABASE_URL"], "SELECT id FROM users WHERE username = %s", username)
    return found


def sandbox_uid(server, username):
    """The host uid `username`'s programs run as (the server being root)."""
    return int(server.env.get("SANDBOX_UID_BASE", 200000)) + user_id(server, username)


def pids_of_uid(uid):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as f:
                    real_uid = int(re.search(r"^Uid:\s+(\d+)", f.read(), re.M).group(1))
            except (OSError, AttributeError):
                continue
            if real_uid == uid:
                found.append(int(entry))
    return found


def launcher_pids(uid):
    """The launchers among `uid`'s processes (not bubblewrap's own, not a
    program: a program is a fork of its launcher, so it is told apart by
    being the launcher's child)."""
    launchers = set()
    for pid in pids_of_uid(uid):
        try:
            with open(f"/proc/{pid}/cmdline") as f:
                argv = f.read().split("\0")
        except OSError:  # gone meanwhile (opened, then ESRCH on the read)
            continue
        if not argv[0].endswith("bwrap") and any(a.startswith('"""The launcher') for a in argv):
            launchers.add(pid)
    return {pid for pid in launchers if _ppid(pid) not in launchers}


def _ppid(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        return None


def wait_for(predicate, timeout=30, interval=0.1):
    """True once predicate() is (a hang guard, not a timing check)."""
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def no_processes_of(server, username, timeout=30):
    """True once no process of `username`'s sandbox uid is left on the host."""
    uid = sandbox_uid(server, username)
    return wait_for(lambda: not pids_of_uid(uid), timeout)


def only_ready_sandboxes_of(server, username, timeout=30):
    """True once `username` has nothing on the host but (at most) the
    launchers of sandboxes kept ready: no program, nothing it left."""
    uid = sandbox_uid(server, username)

    def clean():
        pids = set(pids_of_uid(uid))
        launchers = launcher_pids(uid)
        outer = {p for p in pids if _ppid(p) not in pids}  # bubblewrap's (or the launcher itself)
        return pids <= launchers | outer and len(launchers) <= 1
    return wait_for(clean, timeout)


def metric(server, name):
    text = requests.get(server.url + "/metrics", timeout=10).text
    found = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def lock_of(server, username):
    rows = sql(server.env["DATABASE_URL"], "SELECT run_id FROM active_runs WHERE username = %s", username)
    return rows[0][0] if rows else None


def assert_all_released(server, client):
    """After whatever a program did: nothing of it on the host, the run lock
    and the running count free, and the next run works."""
    username = client.username
    assert only_ready_sandboxes_of(server, username), f"{username} still has processes on the host"
    assert wait_for(lambda: metric(server, "pyclassroom_runs_active") == 0), "runs_active stays up"
    assert wait_for(lambda: lock_of(server, username) is None), "the run lock stays held"
    exit_, rc = run(server, client, "print('next run')\n", path="next.py")
    assert exit_["reason"] == "ok" and rc.output("stdout") == "next run\r\n", rc.messages


# Run inside a sandbox: which other processes are alive there. No /proc in
# the local sandbox: a signal 0 to each pid tells (EPERM also means alive).
REUSE_PROBE = """import builtins, os, sys
def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
seen = getattr(builtins, 'left_by_an_earlier_run', False)
builtins.left_by_an_earlier_run = True
others = [p for p in range(2, 4096) if p != os.getpid() and alive(p)]
try:
    runs = int(open('/tmp/runs').read()) + 1
except FileNotFoundError:
    runs = 1
open('/tmp/runs', 'w').write(str(runs))
print('run', runs, 'interpreter state from before:', seen, 'other processes:', others)
if sys.argv[1:] == ['leave-a-process']:
    import subprocess
    subprocess.Popen(['sleep', '300'], start_new_session=True)
if sys.argv[1:] == ['wait']:
    input()
"""


def probe(rc, *args):
    """Run REUSE_PROBE on an open socket: (exit message, its line)."""
    async def go():
        before = len(rc.messages)
        exit_ = await rc.run("probe.py", args=list(args), timeout=60)
        out = "".join(m["data"] for m in rc.messages[before:]
                      if m["type"] == "output" and m["stream"] == "stdout")
        return exit_, out.strip()
    return go()
