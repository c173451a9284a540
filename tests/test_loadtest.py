"""The load test (simple_load_test.sh, loadtest/), small and fast: its
report is complete, failures are errors and never successes, an open loop
shows a stall in full, and the sweep finds a slowed-down part. No assertion
is about how fast anything is: a stall is compared with the stall's own
length as the server reports it."""
import asyncio
import csv
import json
import os
import re
import secrets
import subprocess
import sys
import time

import aiohttp
import pytest

from loadtest import loadgen, report
from loadtest.cell import merged, run_cell
from loadtest.harness import ROOT, students
from loadtest.recording import Recorder
from loadtest.scenarios import Budget, Cell

SCRIPT = os.path.join(ROOT, "simple_load_test.sh")


def run_script(*args, env=None, timeout=420):
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def make_users(dsn, n):
    # Names of the test's own: a shared server's database keeps every test's users.
    return students(dsn, n, prefix=f"lt{secrets.token_hex(3)}-")


@pytest.fixture
def lenient_server(shared_servers):
    """One worker that never throttles 127.0.0.1, where every simulated user
    comes from: started once, shared by the tests of wrong passwords."""
    return shared_servers.get(1, LOGIN_FAILURES_PER_ADDRESS=100000)


# -- the whole script ------------------------------------------------------------------

def test_smoke_run_of_the_script_reports_both_modes_in_full(tmp_path):
    out = tmp_path / "out"
    # One counted second and no warm-up is enough for every row of both modes (classroom
    # fits every student's run in a short window); the closed loops run flat out, so each
    # second counted is CPU spent.
    result = run_script("--processes", "1,2", "--concurrency", "3", "--duration", "1", "--warmup", "0",
                        "--scenario", "login,files,run,classroom", "--pace", "30", "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    text = result.stdout
    scenarios = ["login", "files", "run", "classroom"]
    document = json.loads((out / "results.json").read_text())
    assert [m["label"] for m in document["modes"]] == ["1 process", "2 processes"]
    assert len(document["modes"][1]["worker_pids"]) == 2
    assert all(m["verified"]["first_output_ms"] > 0 for m in document["modes"])  # checked before measuring
    records = document["results"]
    assert sorted((r["mode"], r["scenario"]) for r in records) == sorted(
        (m, s) for m in ("1 process", "2 processes") for s in scenarios)
    for r in records:
        assert r["errors"] == 0, (r["scenario"], r["mode"], r["errors_by_kind"])
        for name, row in r["metrics"].items():
            assert row["errors"] == 0
            assert row["count"] > 0, (r["scenario"], r["mode"], name)
            for column in report.STAT_COLUMNS:
                assert row[column] is not None and row[column] > 0, (r["scenario"], r["mode"], name, column)
            assert row["min_ms"] <= row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"] <= row["max_ms"]
    # The printed table: every scenario in both modes, the difference and a verdict.
    for scenario in scenarios:
        lines = [line for line in text.splitlines() if line.startswith(f"{scenario:<10}     3  ")]
        assert lines, scenario
    assert text.count("  1 process  ") >= 4 and text.count("  2 processes  ") >= 4
    assert text.count("  difference  ") == 4
    assert len(re.findall(r"^ +-> pick|^ +-> within noise", text, re.M)) == 4
    assert all(v["pick"] in ("1 process", "2 processes") for v in document["verdicts"])
    assert "overall: pick" in text
    # Files: JSON (machine, versions, git, settings, command), CSV, chart.
    assert document["machine"]["cpus"] >= 1 and document["machine"]["memory_gib"] > 0
    assert set(document["versions"]) >= {"python", "tornado", "server"}
    assert "commit" in document["git"]
    assert document["settings"]["concurrency"] == [3] and document["settings"]["duration_s"] == 1
    assert "--scenario login,files,run,classroom" in document["command"]
    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == sum(len(r["metrics"]) for r in records)
    assert {row["mode"] for row in rows} == {"1 process", "2 processes"}
    assert (out / "latency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "report.txt").read_text().strip() == text.split("\nwritten: ")[0].strip()


def test_bad_options_are_one_line_errors():
    # The script's own check of what it needs (make) costs half a CPU second a call: the
    # first goes through it, the others straight to the module the script hands its options to.
    for n, args in enumerate((["--concurrency", "abc"], ["--scenario", "dance"], ["--sweep", "10:5:1"],
                              ["--url", "http://127.0.0.1:9"],
                              ["--url", "http://x", "--users", "u.csv", "--processes", "2"],
                              ["--duration", "5", "--requests", "10"], ["--rate", "0"])):
        result = run_script(*args, timeout=120) if n == 0 else subprocess.run(
            [sys.executable, "-m", "loadtest.loadtest", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.count("\n") == 1 and "error:" in result.stderr, (args, result.stderr)
        assert result.stderr.startswith("simple_load_test.sh: error: "), (args, result.stderr)


def test_a_running_deployment_is_measured_with_the_users_given(server2, tmp_path):
    server = server2  # the run's shared server with two workers: a deployment already running
    users = tmp_path / "users.csv"
    users.write_text("".join(f"{u},{p}\n" for u, p in make_users(server.env["DATABASE_URL"], 2)))
    result = run_script("--url", server.url, "--users", str(users), "--scenario", "files,login",
                        "--concurrency", "2", "--duration", "1", "--warmup", "0", "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [m["label"] for m in document["modes"]] == ["deployment"]
    assert document["modes"][0]["server_header"].startswith("TornadoServer/")
    assert {r["scenario"] for r in document["results"]} == {"files", "login"}
    assert all(r["errors"] == 0 and r["metrics"][r["primary"]]["count"] > 0 for r in document["results"])
    workers = set()
    for r in document["results"]:
        workers.update(r["metrics"][r["primary"]]["by_worker"])
    assert workers <= {str(pid) for pid in server.pids}
    assert document["verdicts"][0]["pick"] is None  # one deployment: nothing to compare


def test_a_deployment_whose_logins_fail_is_refused_before_measuring(lenient_server, tmp_path):
    server = lenient_server
    credentials = make_users(server.env["DATABASE_URL"], 2)
    users = tmp_path / "users.csv"
    users.write_text("username,password\n" + "".join(f"{u},{p}-wrong\n" for u, p in credentials))
    result = run_script("--url", server.url, "--users", str(users), "--concurrency", "2", "--duration", "1",
                        "--out", str(tmp_path / "out"))
    assert result.returncode == 1
    assert "could not log in" in result.stderr and "http_401" in result.stderr
    assert "nothing was measured" in result.stderr
    assert not (tmp_path / "out").exists()


# -- the load generator against a broken login -----------------------------------------

@pytest.mark.parametrize("rate", [None, 20.0], ids=["closed", "open"])
def test_wrong_passwords_are_errors_never_successes(lenient_server, rate):
    server = lenient_server
    wrong = [(u, p + "-wrong") for u, p in make_users(server.env["DATABASE_URL"], 3)]
    for scenario in ("login", "files"):
        cell = Cell(server.url, wrong, timeout=30, rate=rate)
        outcome = asyncio.run(run_cell(scenario, cell, Budget(duration=1.0), warmup=0))
        record = report.cell_record({"label": "1 process", "url": server.url}, scenario, 3, outcome, "x")
        primary = record["metrics"][record["primary"]]
        assert primary["count"] == 0 and primary["p95_ms"] is None, scenario
        assert record["errors"] > 0
        # a wrong password is refused (401; 429 once the username is throttled), never a success
        assert {k.split(": ")[-1].removeprefix("setup_") for k in record["errors_by_kind"]} <= {"http_401", "http_429"}
        found = report.verdict([record, {**record, "mode": "2 processes"}])
        assert found[0] == "1 process"  # equal errors, no latency: the simpler mode, and it says why
        assert "no successes" in found[1]


# -- open loop: a stall shows in full --------------------------------------------------

def test_open_loop_latency_includes_a_one_second_stall(start_server):
    server = start_server(processes=1, PERF_CHECK=1)
    rate = 50.0

    async def scenario():
        cell = Cell(server.url, [("", "")] * 40, timeout=30, rate=rate, perf_ms=1)

        async def stall():
            """The server's one IOLoop busy for 1 s of CPU; returns how long
            it was blocked, in ms, by the server's own account."""
            await asyncio.sleep(1.0)
            async with aiohttp.ClientSession() as http:
                async with http.get(server.url + "/sys_perf_check?ms=1000") as resp:
                    assert resp.status == 200
                    await resp.read()
                    return loadgen.parse_server_timing(resp.headers["Server-Timing"])["total"]

        return await asyncio.gather(run_cell("perf", cell, Budget(duration=3.0), warmup=0), stall())

    started = time.monotonic()
    outcome, stall_ms = asyncio.run(scenario())
    assert time.monotonic() - started < 60  # hang guard
    rec = outcome["recorders"]["request"]
    assert rec.errors == {}
    # The two requests due first after the loop blocked could be answered only
    # when it was free again: timed from their scheduled start, each waited the
    # whole stall but for two intervals of the schedule, and one more for what
    # the stall's request did before it blocked (HDR keeps 3 digits).
    interval_ms = 1000 / rate
    assert rec.percentile_ms(99) >= (stall_ms - 3 * interval_ms) * 0.999, (stall_ms, rec.summary())
    stats = outcome["open_loop"]
    assert stats["scheduled"] == 150 and stats["sent"] == 150 and stats["not_sent"] == 0
    assert stats["max_lag_ms"] >= 0 and stats["max_outstanding"] >= 10  # requests kept going out during the stall


def test_open_loop_counts_what_it_could_not_send():
    """Users that never come free: operations beyond them are `not_sent`
    errors, not silently skipped (no server needed)."""
    async def go():
        recorder = Recorder()

        async def operation(user, scheduled):
            await asyncio.sleep(0.5)
            recorder.success(time.perf_counter() - scheduled)

        stats = await loadgen.open_loop(["only user"], operation, 20.0, recorder, requests=6, max_wait=0.2)
        return recorder, stats

    recorder, stats = asyncio.run(go())
    assert stats.scheduled == 6 and stats.sent + stats.not_sent == 6
    assert stats.not_sent >= 3 and recorder.errors["not_sent"] == stats.not_sent
    assert stats.max_outstanding == 1 and stats.waited >= stats.not_sent


# -- the sweep names the slowed-down part ----------------------------------------------

def test_sweep_names_a_slow_file_system_as_the_bottleneck(tmp_path):
    out = tmp_path / "sweep"
    # Every file read and save waits 30 ms in one of only 2 file processes: more
    # users queue for them, and fs_wait is what grows.
    # Two steps are enough to see a part grow; the 30 ms wait makes each step's fs plain at once.
    result = run_script("--processes", "1", "--sweep", "2:8:6", "--scenario", "files", "--duration", "1",
                        "--warmup", "0", "--out", str(out), env={"FS_DELAY_MS": "30", "FILE_PROCESSES": "2"})
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads((out / "results.json").read_text())
    assert document["settings"]["server"]["FS_DELAY_MS"] == "30"
    (sweep,) = document["sweeps"]
    assert [s["users"] for s in sweep["steps"]] == [2, 8]
    for step in sweep["steps"]:
        assert step["errors"] == 0 and step["fs"] >= 25  # each request's fs call waited its 30 ms
    assert sweep["bottleneck"] in ("fs", "fs_wait"), sweep["verdict"]
    assert f"bottleneck: {sweep['bottleneck']}:" in result.stdout
    assert (out / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "sweep.csv").read_text().count("\n") == 3


# -- pieces ------------------------------------------------------------------------------

def record(mode, p95, errors=0, kinds=None):
    row = {"p95_ms": p95}
    return {"mode": mode, "primary": "x", "metrics": {"x": row}, "errors": errors,
            "errors_by_kind": kinds or ({"http_503": errors} if errors else {}), "loadgen_cpu": 0.1,
            "loadgen_cpu_warning": False}


@pytest.mark.parametrize("one, two, pick, words", [
    (record("1 process", 100.0), record("2 processes", 69.0), "2 processes", "p95 31% lower"),
    (record("1 process", 100.0), record("2 processes", 95.0), "1 process", "within noise"),
    (record("1 process", 100.0), record("2 processes", 120.0), "1 process", "p95 17% lower"),
    (record("1 process", 50.0, errors=3), record("2 processes", 900.0), "2 processes", "0 errors against 3"),
    (record("1 process", 900.0), record("2 processes", 50.0, errors=1), "1 process", "0 errors against 1"),
])
def test_verdict(one, two, pick, words):
    found, text = report.verdict([one, two])
    assert found == pick and words in text and pick in text


def test_an_aggregate_row_has_the_figures_of_the_rows_that_have_some():
    """A row with no successes (no run fell in a short window) adds nothing
    to the aggregate: hdrh would make its minimum 0 ms. Only the named rows'
    errors are summed (no server needed)."""
    saves, runs = Recorder(), Recorder()
    saves.success(0.004)
    saves.success(0.010)
    saves.error("timeout")
    runs.error("closed")
    row = merged({"save": saves, "run": runs}, ("run", "save"), ("run",))
    stats = report.row_stats(row, 1.0)
    assert stats["count"] == 2 and stats["min_ms"] == pytest.approx(4, rel=0.01)
    assert stats["max_ms"] == pytest.approx(10, rel=0.01)
    assert stats["errors_by_kind"] == {"closed": 1}


def test_server_timing_is_read_and_averaged():
    tally = loadgen.ServerTiming()
    tally.observe({"Server-Timing": "fs_wait;dur=2.00, fs;dur=30.50, db;dur=1.00, app;dur=0.50, total;dur=34.00"})
    tally.observe({"Server-Timing": "app;dur=1.50, total;dur=1.50"})
    tally.observe({})
    means = tally.means_ms()
    assert tally.responses == 2 and tally.without == 1
    assert means["fs"] == 15.25 and means["hash"] == 0 and means["app"] == 1.0 and means["total"] == 17.75


def test_bottleneck_is_the_part_that_grows():
    def step(users, fs_wait, client_avg):
        parts = {**{p: 1.0 for p in report.SWEEP_PARTS}, "fs_wait": fs_wait}
        total = sum(v for p, v in parts.items() if p != "queue")
        return {"users": users, "client_avg_ms": client_avg, "total": total, **parts}

    part, text = report.bottleneck([step(2, 0.0, 40.0), step(8, 90.0, 130.0)])
    assert part == "fs_wait" and "bottleneck: fs_wait: +90.0 ms" in text
    part, text = report.bottleneck([step(2, 0.0, 40.0), step(8, 0.2, 40.5)])
    assert part is None and "no bottleneck reached" in text


def test_the_classroom_counts_runs_that_waited_for_a_place(start_server, fresh_db):
    """A classroom p95 that is the wait in the server's line of runs must
    say so: with one place for six students, some runs queue."""
    server = start_server(processes=1, SANDBOX="local", RUN_MAX_CONCURRENT=1)
    cell = Cell(server.url, make_users(fresh_db, 6), timeout=30, pace=120)
    # Two seconds: every student arrives and runs within the first half (a short window's spread).
    outcome = asyncio.run(run_cell("classroom", cell, Budget(duration=2.0), warmup=0))
    record = report.cell_record({"label": "1 process", "url": server.url}, "classroom", 6, outcome, "x")
    assert record["errors"] == 0, record["errors_by_kind"]
    assert record["metrics"]["run first output"]["count"] > 0
    assert outcome["counts"]["queued_messages"] > 0
