"""A busy server queues runs instead of failing them (server/runs/starts.py).

- The line (admission.Admission): places asked for ahead of need (a ready
  sandbox started before anyone pressed Run) go after those somebody waits
  for, and one hurried because its student pressed Run moves up; every
  place is told its position.
- A start that fails is tried once more without telling anyone; a second
  failure is logged with its reason and counted.
- Under real CPU starvation (a busy loop per CPU at normal priority beside
  a server, both in a cpu cgroup of the test's own, so that the idle
  sandboxes get next to nothing), a class pressing Run at once is served:
  every program runs and ends as it should, students whose start waits
  are told their place and an estimate, and nobody reads "could not
  start". (Before, each launcher started in the idle group, missed its
  deadline to be ready, and every run failed.)
"""
import asyncio
import os
import subprocess
import sys
import time

import pytest

from loadtest.run_client import RunClient
from server import config
from server.runs.admission import Admission, Place
from server.runs.sandbox import ProcessKind
from server.runs.starts import Starts, discard
from tests.runs_support import LIMITS, save, student

TIMEOUT = 120  # only catches a hang


# -- the line -----------------------------------------------------------------------

def test_places_ahead_of_need_wait_behind_those_somebody_waits_for_until_hurried():
    async def story():
        line = Admission(1, 100)
        told = {}
        admitted = []

        def teller(name):
            async def notify(position):
                told.setdefault(name, []).append(position)
            return notify

        async def arrive(name, place):
            await line.enter(teller(name), place)
            admitted.append(name)

        await line.enter(teller("first"))  # holds the only place
        warm_a, warm_b = Place(ahead=True), Place(ahead=True)
        tasks = [asyncio.create_task(arrive("warm-a", warm_a)), asyncio.create_task(arrive("warm-b", warm_b))]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(arrive("run", Place(teller("run")))))
        await asyncio.sleep(0)
        assert [line.position(p) for p in (warm_a, warm_b)] == [2, 3]  # the run went before both
        line.hurry(warm_b, teller("warm-b pressed Run"))
        await asyncio.sleep(0.3)  # positions are announced at most every 0.2 s
        assert line.position(warm_b) == 2 and line.position(warm_a) == 3
        assert told["warm-b pressed Run"][-1] == 2 and told["run"] == [1]
        for _ in range(3):
            line.leave()
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        assert admitted == ["run", "warm-b", "warm-a"]
        line.leave()
        assert line.running == 0 and not line.waiting
    asyncio.run(story())


# -- a start tried twice ---------------------------------------------------------------

@pytest.fixture
def flaky_python(tmp_path):
    """A SANDBOX_PYTHON that fails its first `fails` launcher starts, then
    is python3 (and always is for anything else, such as the seccomp builder)."""
    def make(fails):
        count = tmp_path / "count"
        count.write_text("0")
        script = tmp_path / "python"
        script.write_text(f"""#!/bin/sh
[ "$2" = "-B" ] || exec /usr/bin/python3 "$@"
n=$(cat {count}); echo $((n + 1)) > {count}
if [ "$n" -lt {fails} ]; then echo "not today (start $n)" >&2; sleep 1; exit 3; fi
exec /usr/bin/python3 "$@"
""")
        script.chmod(0o755)
        return str(script), count
    return make


def starts_with(tmp_path, python):
    cfg = config.load({"DATA_DIR": str(tmp_path / "data"), "SANDBOX": "process", "SANDBOX_PYTHON": python,
                       "DEMO": "0"})
    return Starts(ProcessKind(cfg), cfg)


def test_a_start_that_fails_once_is_tried_again_without_anyone_told(tmp_path, flaky_python, caplog):
    python, count = flaky_python(1)
    starts = starts_with(tmp_path, python)

    async def story():
        sandboxed = await starts.start(str(tmp_path), None, "test ")
        assert sandboxed is not None
        await discard(sandboxed.sandbox)
    asyncio.run(story())
    assert count.read_text().strip() == "2"
    assert "trying once more" in caplog.text and "not today (start 0)" in caplog.text
    assert "could not start" not in caplog.text
    assert starts.line.running == 0


def test_a_start_that_fails_twice_is_logged_with_its_reason(tmp_path, flaky_python, caplog):
    python, count = flaky_python(2)
    starts = starts_with(tmp_path, python)
    assert asyncio.run(starts.start(str(tmp_path), None, "test ")) is None
    assert count.read_text().strip() == "2"  # twice, not more
    failed = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(failed) == 1 and "(ended)" in failed[0].getMessage() and "not today (start 1)" in failed[0].getMessage()
    assert starts.line.running == 0


# -- a class under CPU starvation ----------------------------------------------------------

CPU_V1 = "/sys/fs/cgroup/cpu"


@pytest.fixture
def own_cpu_group():
    """A cpu cgroup (v1) for one server: this test process is moved into it
    while the server starts (the server and its sandboxes' parent inherit
    it), then moved back; removed at the end."""
    if os.geteuid() != 0 or not os.path.isfile(os.path.join(CPU_V1, "cgroup.procs")):
        pytest.skip("needs root and the cgroup v1 cpu hierarchy")
    own = next(line.split(":", 2)[2] for line in open("/proc/self/cgroup").read().splitlines()
               if "cpu" in line.split(":")[1].split(","))
    home = os.path.join(CPU_V1, own.lstrip("/"))
    group = os.path.join(home, f"pyclassroom-test-busy-{os.getpid()}")
    os.makedirs(group, exist_ok=True)

    def move(to):
        with open(os.path.join(to, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    yield group, move, home
    move(home)
    for root, dirs, _ in os.walk(group, topdown=False):
        for d in dirs:
            try:
                os.rmdir(os.path.join(root, d))
            except OSError:
                pass
    try:
        os.rmdir(group)
    except OSError:
        pass


def test_a_class_pressing_run_on_a_starved_host_waits_in_line_and_is_served(start_server, own_cpu_group):
    group, move, home = own_cpu_group
    hogs = []
    move(group)
    try:
        # One start at a time, so that the line is long.
        server = start_server(SANDBOX="local", SANDBOX_CPU="idle", SANDBOX_STARTS_AT_ONCE=1, RUN_MAX_CONCURRENT=40,
                              **LIMITS)
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    finally:
        move(home)
    try:
        students = [student(server, f"busy{n}") for n in range(8)]
        for n, s in enumerate(students):
            save(s, "hello.py", f"print('hello from', {n}, sum(range(1000)))\n")

        async def press_run(s):
            async with RunClient(server.url, s.http.cookies.get_dict()) as rc:
                # The IDE opened just now: its ready sandbox is still waiting to start.
                await rc.send(type="run", path="hello.py")
                while True:
                    message = await rc.receive(TIMEOUT)
                    if message["type"] in ("exit", "error"):
                        return message, rc.messages, rc.output()

        async def lesson():
            return await asyncio.gather(*(press_run(s) for s in students))
        began = time.monotonic()
        results = asyncio.run(lesson())
        print(f"{len(students)} runs on a starved host took {time.monotonic() - began:.1f} s")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()

    for n, (end, messages, output) in enumerate(results):
        assert end["type"] == "exit", (n, end)
        assert end["code"] == 0 and end["reason"] == "ok", (n, end)
        assert f"hello from {n} 499500" in output, (n, output)
    queued = [m for _, messages, _ in results for m in messages if m["type"] == "queued"]
    assert queued, "with one start at a time, somebody waited in line"
    assert all(m["position"] >= 1 and m["estimate"] > 0 for m in queued), queued

    admin = server.client()
    admin.login_ok("admin", server.env["ADMIN_PASSWORD"])
    status = admin.get("/api/status").json()
    assert status["sandbox_starts"]["failed"] == {}, status["sandbox_starts"]
    assert status["sandbox_starts"]["waiting"] == 0
    log = server.output()
    assert "could not start" not in log and "Traceback" not in log, log[-3000:]
