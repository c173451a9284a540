"""The load generator counts only verified answers as successes: run with
small numbers against the real server (no timing assertions)."""
import asyncio
import socket

import pytest

from loadtest import loadgen
from loadtest.client import CheckFailed, check_login_answer
from loadtest.harness import students
from loadtest.recording import Recorder
from loadtest.scenarios import run_login

CONCURRENCY = 3


@pytest.fixture
def server(start_server):
    # A wrong-password test must meet 401s, not the per-address throttle.
    return start_server(processes=1, LOGIN_FAILURES_PER_ADDRESS=100000)


def make_users(dsn, n=CONCURRENCY):
    return students(dsn, n, prefix="load")


def logins(url, credentials, rounds=1, warmup=1):
    return asyncio.run(run_login(url, credentials, rounds=rounds, warmup=warmup, timeout=30))


def test_correct_passwords_all_succeed(server, fresh_db):
    credentials = make_users(fresh_db)
    result = logins(server.url, credentials)
    summary = result.summary()
    assert summary["errors_by_kind"] == {}
    assert summary["count"] == CONCURRENCY * 1  # the warm-up round is not counted
    assert summary["by_worker"] == {str(server.pids[0]): CONCURRENCY}
    assert summary["housekeeping_errors"] == {}  # every session logged out
    assert summary["p50_ms"] > 0 and summary["max_ms"] >= summary["p99_ms"] >= summary["p50_ms"]
    assert result.logins_per_s > 0


def test_two_rounds_count_every_login(server, fresh_db):
    credentials = make_users(fresh_db)
    result = logins(server.url, credentials, rounds=2, warmup=0)
    assert result.recorder.errors == {}
    assert result.recorder.count == CONCURRENCY * 2


def test_wrong_passwords_are_errors_never_successes(server, fresh_db):
    credentials = make_users(fresh_db)
    wrong = [(username, password + "-wrong") for username, password in credentials]
    result = logins(server.url, wrong, warmup=0)
    assert result.recorder.count == 0
    assert result.recorder.errors == {"http_401": CONCURRENCY}
    assert result.summary()["p50_ms"] is None
    assert result.logins_per_s == 0


def test_unknown_users_are_errors(server, fresh_db):
    make_users(fresh_db)
    ghosts = [(f"ghost{i}", "some-password-1") for i in range(CONCURRENCY)]
    result = logins(server.url, ghosts, warmup=0)
    assert result.recorder.count == 0
    assert result.recorder.errors == {"http_401": CONCURRENCY}


def test_connection_refused_is_an_error():
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = logins(f"http://127.0.0.1:{port}", [("a", "b")] * 2, warmup=0)
    assert result.recorder.count == 0
    assert result.recorder.errors == {"setup_connection": 2}


@pytest.mark.parametrize("status, body, cookie, kind", [
    (200, b'{"user": {"username": "ada"}}', "tok", None),
    (401, b'{"error": "invalid_credentials"}', None, "http_401"),
    (429, b'{"error": "too_many_attempts"}', None, "http_429"),
    (502, b"<html>bad gateway</html>", None, "http_502"),
    (200, b"<html>a login page</html>", "tok", "bad_body"),
    (200, b'{"user": null}', "tok", "bad_body"),
    (200, b'{"user": {"username": "alan"}}', "tok", "wrong_user"),
    (200, b'{"user": {"username": "ada"}}', None, "no_session_cookie"),
])
def test_check_login_answer(status, body, cookie, kind):
    if kind is None:
        check_login_answer(status, body, "ada", cookie)
    else:
        with pytest.raises(CheckFailed) as info:
            check_login_answer(status, body, "ada", cookie)
        assert info.value.kind == kind


def test_recorder_keeps_errors_out_of_the_histogram():
    recorder = Recorder()
    recorder.success(0.010, worker=7)
    recorder.success(120.0)  # beyond the histogram's range: clamped, not lost
    recorder.error("http_401")

    async def fails():
        raise asyncio.TimeoutError()

    assert asyncio.run(loadgen.timed(recorder, fails)) is False
    assert recorder.count == 2
    assert recorder.errors == {"http_401": 1, "timeout": 1}
    assert recorder.summary()["by_worker"] == {"7": 1}
