"""The fast tier (`make test-fast`, `-m fast`) is what it says: checked
against the fixtures pytest itself resolved for each test (not against the
markers conftest.py gives), no test of it reaches for PostgreSQL, a
server, Chromium, Docker, the fault file system or a root fixture; and it
is at least half of the suite. Under FAST_TIER=1 the tier's run also fails
any test that reaches for one of them (conftest.py)."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_OF_FAST_TIER = {"postgres_url", "fresh_db", "shared_servers", "start_server", "module_server", "browser",
                    "new_page", "docker_image", "faultfs", "sandbox", "cgroup2", "small_disk", "small_tmpfs",
                    "own_cpu_group", "private_postgres"}


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    """Every test of the suite, as one collection (no test runs) reports it:
    its tier and the fixtures pytest resolved for it."""
    report = tmp_path_factory.mktemp("tiers") / "tiers.json"
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:randomly",
                           "--tier-report", str(report)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return {t["test"]: t for t in json.loads(report.read_text())}


def test_the_fast_tier_uses_no_fixture_of_the_slow_ones_and_is_half_the_suite(collected):
    fast = [t for t in collected.values() if t["fast"]]
    reached = [(t["test"], name) for t in fast for name in t["fixtures"] if name in OUT_OF_FAST_TIER]
    assert fast and reached == []
    assert len(fast) * 2 >= len(collected), (len(fast), len(collected))


def test_the_slow_tier_holds_every_test_of_a_server_and_the_fast_one_none(collected):
    def tier(module):
        return {t["fast"] for name, t in collected.items() if name.startswith(f"tests/{module}.py::")}
    # test_first_start: a worker's secret (no server) is fast; the rest start servers.
    assert collected["tests/test_first_start.py::test_a_worker_without_a_usable_secret_refuses_to_start"]["fast"]
    assert tier("test_first_start") == {True, False}
    assert tier("test_runs") == {False} and tier("test_paths") == {True}
