"""The fast tier (`make test-fast`, `-m fast`) is what it says: read from
pytest's own report of the fixtures each selected test uses (not from the
markers conftest.py gives), no test of it reaches for PostgreSQL, a
server, Chromium, Docker, the fault file system or a root fixture; and it
is at least half of the suite. Under FAST_TIER=1 the tier's run also fails
any test that reaches for one of them (conftest.py)."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_OF_FAST_TIER = {"postgres_url", "fresh_db", "shared_servers", "start_server", "module_server", "browser",
                    "new_page", "docker_image", "faultfs", "sandbox", "cgroup2", "small_disk", "small_tmpfs",
                    "own_cpu_group", "private_postgres"}
USED_BY = re.compile(r"^-* fixtures used by (?P<test>\S+) -*$")
FIXTURE = re.compile(r"^(?P<name>\w+) -- ")


def pytest_collect(*args):
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:randomly",
                           *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_the_fast_tier_uses_no_fixture_of_the_slow_ones_and_is_half_the_suite():
    report = pytest_collect("-m", "fast", "--fixtures-per-test")
    reached, test, tests = [], None, 0
    for line in report.splitlines():
        if found := USED_BY.match(line):
            test, tests = found["test"], tests + 1
        elif (found := FIXTURE.match(line)) and found["name"] in OUT_OF_FAST_TIER:
            reached.append((test, found["name"]))
    assert tests > 0 and reached == []
    fast = int(re.search(r"^(\d+)/\d+ tests collected", report, re.M)[1])
    total = int(re.search(r"^\d+/(\d+) tests collected", report, re.M)[1])
    # Tests without fixtures have no "fixtures used by" section: counted apart.
    assert tests <= fast and fast * 2 >= total, (fast, total)


def test_the_slow_tier_holds_every_test_of_a_server_and_the_fast_one_none():
    slow = pytest_collect("-m", "not fast", "tests/test_first_start.py", "tests/test_runs.py", "tests/test_paths.py")
    fast = pytest_collect("-m", "fast", "tests/test_first_start.py", "tests/test_runs.py", "tests/test_paths.py")
    # test_first_start: a worker's secret (no server) is fast; the rest start servers.
    assert "tests/test_first_start.py::test_a_worker_without_a_usable_secret_refuses_to_start" in fast
    assert "tests/test_runs.py::" not in fast and "tests/test_runs.py::" in slow
    assert "tests/test_paths.py::" not in slow
