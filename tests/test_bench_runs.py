"""The run benchmark's core against the real server, small and fast: it
counts only verified runs as successes (no timing assertions)."""
import asyncio
import contextlib

import pytest

from loadtest import run_phases
from loadtest.harness import students
from loadtest.run_client import ECHO_PROGRAM


@pytest.fixture
def server(start_server):
    return start_server(SANDBOX="local", RUN_MAX_CONCURRENT=20)


def make_students(server, n):
    return students(server.env["DATABASE_URL"], n, prefix="runner")


def echo_phase(server, credentials, program, duration=2.0):
    """Log the students in, save `program` for each, run the echo loop."""
    async def go():
        async with contextlib.AsyncExitStack() as stack:
            users = await run_phases.log_in(server.url, credentials, stack, timeout=30)
            await run_phases.save_everywhere(users, run_phases.ECHO_PATH, program)
            return await run_phases.echo_phase(server.url, users, duration, think=0.2, settle=0.2, timeout=30)
    return asyncio.run(go())


def test_two_students_run_the_echo_program(server):
    result = echo_phase(server, make_students(server, 2), ECHO_PROGRAM)
    assert result["errors_by_kind"] == {} and result["errors"] == 0
    assert result["students"] == 2 and result["runs"] > 0
    assert result["warm_sandboxes_reported"] is True
    for figure in ("started", "first_output", "exit", "exit_after_output"):
        for p in ("p50_ms", "p95_ms", "p99_ms"):
            assert result[f"{figure}_{p}"] is not None, figure + p
    assert result["first_output_p50_ms"] <= result["exit_p50_ms"]
    assert result["runs_per_s"] > 0
    assert result["queued_messages"] == 0
    # After a run that ended by itself its sandbox is made ready for the next
    # one: every run but each student's first was served that way.
    assert result["server_sandbox_reuses"] >= result["runs"] - 2 >= 1


def test_a_wrong_echo_is_an_error_not_a_success(server):
    wrong = 'print("ready")\nx = input()\nprint("got", x[::-1])\n'
    result = echo_phase(server, make_students(server, 1), wrong, duration=1.0)
    assert result["runs"] == 0
    assert set(result["errors_by_kind"]) == {"wrong_output"} and result["errors"] > 0
    assert result["first_output_p50_ms"] is None and result["exit_p50_ms"] is None


def test_a_failing_program_is_counted_by_its_exit_reason(server):
    failing = 'print("ready")\nx = input()\nraise SystemExit(3)\n'
    result = echo_phase(server, make_students(server, 1), failing, duration=1.0)
    assert result["runs"] == 0
    assert set(result["errors_by_kind"]) == {"exit_error"}
