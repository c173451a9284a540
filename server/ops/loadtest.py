"""Load test: one process or several? Measures the real server with real
users in each process mode and says which to pick, per scenario and load.

    ./simple_load_test.sh [options]       (python -m server.ops.loadtest)

With no options it starts its own PostgreSQL and, per mode, the server
(TORNADO_PROCESSES=1, then one per CPU, at least 2) on a fresh database and
data folder, creates real users with real argon2id password hashes, checks
that one of them can log in and run a program (and stops, saying why, if
not), then runs the scenarios login, files, run and classroom at 30, 50 and
60 users, each after an uncounted warm-up. It prints, per scenario and
number of users, avg/median/min/max/p95/p99, requests/s and errors in each
mode, the difference in percent and a verdict, and writes report.txt,
results.json, results.csv and latency.png into --out. Server settings in
the environment reach the servers it starts (e.g. FS_DELAY_MS=30,
RUN_MAX_CONCURRENT=64); TORNADO_PROCESSES, DATABASE_URL, DATA_DIR, HOST and
PORT are its own.

Closed loop (default): N users, each waiting for its answer before the next
operation. Open loop (--rate R): operations start at fixed times, R per
second, each on a free user (N users cap what is outstanding), timed from
its scheduled start, so a stall shows in full; operations that found no
free user in time are errors. Percentiles come from an HDR histogram; only
verified answers are successes. The load generator's own CPU use is
reported, with a warning when it, not the server, may be the bottleneck.

--sweep START:STOP:STEP steps the number of users instead, with the perf
(/sys_perf_check?ms=10, PERF_CHECK=1) and files scenarios unless
--scenario says otherwise, and reports per step the client's latency and
the server's time per request by part (from Server-Timing: hash_wait, hash,
fs_wait, fs, db, app; queue = the rest of the client's wait); the part that
grows most with load is named as the bottleneck.
"""
import asyncio
import datetime
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time

import aiohttp
import tornado

from .. import __version__, config
from ..accounts.passwords import HASHER
from .cli import clean_up_on_sigterm, uninterrupted
from . import loadgen, loadtest_report as report
from .bench_files import _raise_file_limit
from .bench_login import (ROOT, Aborted, ServerUnderTest, admin_sql, insert_users, machine, make_credentials,
                          new_server_space, run_async, scratch, server_env)
from .loadtest_cell import SCENARIOS, run_cell, verify
from .loadtest_options import parse_args
from .loadtest_scenarios import Budget, Cell, SetupFailed

# The pieces: loadtest_options (the command line), loadtest_scenarios and
# loadtest_classroom (what the simulated users do), loadtest_cell (one
# measurement, and the check before measuring), loadtest_report (figures,
# tables, verdicts, files, charts); loadgen underneath (closed and open loop).

# Server settings recorded with the results (as the servers see them).
RECORDED_SETTINGS = ("HASH_THREADS", "FILE_THREADS", "DB_POOL_MAX", "FS_DELAY_MS", "SANDBOX", "RUN_MAX_CONCURRENT",
                     "RUN_QUEUE_MAX", "LOG_LEVEL")


# -- what was run, where -------------------------------------------------------------

def git_commit():
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": head or None, "dirty": bool(dirty)}


def versions():
    import hdrh
    import matplotlib
    return {"python": platform.python_version(), "tornado": tornado.version, "server": __version__,
            "aiohttp": aiohttp.__version__, "hdrhistogram": getattr(hdrh, "__version__", "?"),
            "matplotlib": matplotlib.__version__}


def server_settings():
    return {name: os.environ.get(name, config.BY_NAME[name].default) for name in RECORDED_SETTINGS}


async def remote_server_header(url, timeout):
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as http:
            async with http.get(url.rstrip("/") + "/healthz") as resp:
                return resp.headers.get("Server")
    except Exception as e:
        return f"unreachable ({loadgen.error_kind(e)})"


# -- measuring one mode ------------------------------------------------------------------

def say(text):
    print(text, file=sys.stderr, flush=True)


def measure_mode(args, mode, credentials, deadline, server_pids=()):
    """Every scenario at every concurrency (or sweep step) against one
    server; returns the cell records."""
    username, password = credentials[0]
    times = run_async(verify(mode["url"], username, password, args.timeout), deadline)
    mode["verified"] = {"user": username, "first_output_ms": round(times["first"] * 1000, 1),
                        "exit_ms": round(times["exit"] * 1000, 1)}
    say(f"  checked: {username} logged in, saved and ran a program (first output "
        f"{times['first'] * 1000:.0f} ms, exit {times['exit'] * 1000:.0f} ms)")
    loop = f"open loop {args.rate:g}/s" if args.rate else "closed loop"
    records = []
    for name in args.scenario:
        for users in args.steps:
            amount = f"{args.duration:g} s" if args.requests is None else f"{args.requests} operations"
            how = "paced by --pace" if SCENARIOS[name].paced else loop
            say(f"  {mode['label']}: {name}, {users} users, {how}, {amount} after {args.warmup:g} s warm-up ...")
            cell = Cell(mode["url"], credentials[:users], args.timeout, args.rate, args.pace, args.perf_ms)
            load = os.getloadavg()[0]
            outcome = run_async(run_cell(name, cell, Budget(args.duration, args.requests), args.warmup,
                                         server_pids), deadline)
            record = report.cell_record(mode, name, users, outcome, loop)
            record["load_average"] = [round(load, 2), round(os.getloadavg()[0], 2)]  # this machine's, 1 min
            row = record["metrics"][record["primary"]]
            say(f"    {record['primary']}: p50 {report.fmt(row['p50_ms'], 0)} ms, p95 {report.fmt(row['p95_ms'], 0)} "
                f"ms, {row['rps']:.1f}/s, {record['errors']} errors, load generator {record['loadgen_cpu']:.0%} "
                "of a core")
            records.append(record)
    return records


def isolated(args, credentials, deadline, need_perf):
    """Per process count: a server on a fresh database and data folder,
    measured, stopped. Returns (modes, records)."""
    modes, records = [], []
    with scratch("pyclassroom-loadtest-") as (base, pg):
        say("starting PostgreSQL ...")
        admin_dsn = pg.start()
        for processes in args.processes:
            mode = {"label": f"{processes} process{'es' if processes > 1 else ''}", "processes": processes}
            name = f"loadtest_{processes}p_{os.getpid()}"
            dsn, data_dir = new_server_space(admin_dsn, base, name, f"{processes}p")
            env = server_env(processes, dsn, data_dir)
            if need_perf:
                env["PERF_CHECK"] = "1"
            server = ServerUnderTest(env)
            try:
                say(f"{mode['label']}: starting the server (TORNADO_PROCESSES={processes}) ...")
                server.start()  # applies the migrations: the users table exists after
                mode.update(url=server.url, worker_pids=server.pids)
                insert_users(dsn, credentials)
                try:
                    records += measure_mode(args, mode, [(u, p) for u, p, _ in credentials], deadline, server.pids)
                except SetupFailed as e:
                    raise Aborted(f"{e}\nnothing was measured; the server said:\n{server.output()}") from None
                if server.proc.poll() is not None:
                    raise Aborted("the server died during the measurements:\n" + server.output())
                modes.append(mode)
            finally:
                with uninterrupted():
                    server.stop()
                    admin_sql(admin_dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                    shutil.rmtree(data_dir, ignore_errors=True)
    return modes, records


def deployments(args, deadline):
    modes, records = [], []
    for i, url in enumerate(args.url, 1):
        label = "deployment" if len(args.url) == 1 else f"site {i}"
        mode = {"label": label, "processes": None, "url": url.rstrip("/"),
                "server_header": asyncio.run(remote_server_header(url, args.timeout))}
        say(f"{label}: {url}")
        try:
            records += measure_mode(args, mode, args.credentials, deadline)
        except SetupFailed as e:
            raise Aborted(f"{e}\nnothing was measured") from None
        modes.append(mode)
    return modes, records


# -- the report --------------------------------------------------------------------------

def write_out(args, document, modes, records, sweeps):
    os.makedirs(args.out, exist_ok=True)
    labels = [m["label"] for m in modes]
    files = {"json": os.path.join(args.out, "results.json"), "csv": os.path.join(args.out, "results.csv")}
    report.write_csv(files["csv"], records)
    if sweeps:
        files["sweep_csv"] = os.path.join(args.out, "sweep.csv")
        files["chart"] = os.path.join(args.out, "sweep.png")
        report.write_sweep_csv(files["sweep_csv"], sweeps)
        report.sweep_chart(files["chart"], sweeps)
    else:
        files["chart"] = os.path.join(args.out, "latency.png")
        report.latency_chart(files["chart"], records, labels)
    files["report"] = os.path.join(args.out, "report.txt")
    document["files"] = files
    report.write_json(files["json"], document)
    return files


def text_report(args, document, modes, records, found, sweeps):
    info, labels = document["machine"], [m["label"] for m in modes]
    amount = f"{args.duration:g} s" if args.requests is None else f"{args.requests} operations"
    loop = f"open loop at {args.rate:g} operations/s" if args.rate else "closed loop"
    paced = " (classroom: its own schedule)" if "classroom" in args.scenario else ""
    lines = [f"PyClassroom load test: {' vs '.join(labels)}; {loop}{paced}, {amount} per measurement after a "
             f"{args.warmup:g} s warm-up (not counted)"]
    for m in modes:
        extra = f", worker pids {m['worker_pids']}" if m.get("worker_pids") else ""
        lines.append(f"  {m['label']}: {m['url']}{extra}; checked first: {m['verified']['user']} logged in and "
                     f"ran a program")
    lines.append("scenarios (the verdict compares the row in brackets):")
    for name in args.scenario:
        r = next(r for r in records if r["scenario"] == name)
        lines.append(f"  {name} [{r['primary']}]: {r['about']}")
    lines.append("")
    if sweeps:
        lines += report.sweep_lines(sweeps)
    else:
        lines += report.comparison_table(records, labels, found)
        lines.append("")
        best = report.overall(found, labels)
        if best:
            lines += [best, ""]
        lines.append("every row: ms of verified successes (HDR histogram); errors = failed or wrong answers, "
                     "never counted as latencies")
        lines.append("")
        lines += report.details_table(records)
    lines.append("")
    load = document["load_average"]
    lines.append(f"machine: {info['cpus']} CPUs ({info['usable_cpus']} usable, {info['cpu_model']}), "
                 f"{info['memory_gib']} GiB memory, {info['platform']}; load average {load['start']:.1f} at the "
                 f"start, {load['end']:.1f} at the end")
    if max(load["start"], load["end"]) > info["cpus"]:
        lines.append(f"WARNING: the load average exceeded the {info['cpus']} CPUs: other work competed with the "
                     "test, so the figures are noisier and slower than on a quiet machine")
    v = document["versions"]
    lines.append(f"versions: Python {v['python']}, Tornado {v['tornado']}, server {v['server']}; git "
                 f"{(document['git']['commit'] or '?')[:12]}{' (uncommitted changes)' if document['git']['dirty'] else ''}")
    if not args.url:
        lines.append(f"argon2id m={HASHER.memory_cost // 1024} MiB t={HASHER.time_cost} p={HASHER.parallelism}; "
                     "server settings: " + ", ".join(f"{k}={v}" for k, v in document["settings"]["server"].items()))
    lines.append("the load generator runs on the same machine and competes with the server for CPU"
                 if not args.url else "the load generator ran on this machine, the deployment elsewhere")
    lines.append(f"command: {document['command']}")
    return "\n".join(lines)


# -- main --------------------------------------------------------------------------


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv, __doc__)
    started = datetime.datetime.now()
    args.out = args.out or f"loadtest-{started:%Y%m%d-%H%M%S}"
    command = shlex.join([os.environ.get("LOADTEST_ARGV0", f"{sys.executable} -m server.ops.loadtest"), *argv])
    clean_up_on_sigterm()
    _raise_file_limit()
    deadline = time.monotonic() + args.max_seconds
    load_start = os.getloadavg()[0]
    cpus = os.cpu_count() or 1
    if load_start > cpus:
        say(f"note: load average {load_start:.1f} on {cpus} CPUs: other work is running; figures will be noisy")
    try:
        if args.url:
            modes, records = deployments(args, deadline)
        else:
            say(f"hashing {max(args.steps)} passwords (argon2id) ...")
            credentials = make_credentials(max(args.steps))
            modes, records = isolated(args, credentials, deadline, "perf" in args.scenario)
    except Aborted as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; cleaned up", file=sys.stderr)
        return 130
    labels = [m["label"] for m in modes]
    sweeps = []
    if args.sweep:
        for name in args.scenario:
            for label in labels:
                steps = [report.sweep_step(r) for r in records if r["scenario"] == name and r["mode"] == label]
                part, text = report.bottleneck(steps)
                sweeps.append({"scenario": name, "mode": label, "steps": steps, "bottleneck": part, "verdict": text})
    found = [] if args.sweep else report.verdicts(records, labels)
    document = {
        "command": command, "cwd": os.getcwd(), "started": started.isoformat(timespec="seconds"),
        "finished": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": machine(), "load_average": {"start": load_start, "end": os.getloadavg()[0]},
        "versions": versions(), "git": git_commit(),
        "settings": {"processes": args.processes, "urls": args.url, "concurrency": args.concurrency,
                     "sweep": args.sweep, "duration_s": args.duration, "requests": args.requests,
                     "warmup_s": args.warmup, "scenarios": args.scenario, "rate": args.rate, "pace": args.pace,
                     "perf_ms": args.perf_ms, "timeout_s": args.timeout, "noise": report.NOISE,
                     "argon2": {"memory_kib": HASHER.memory_cost, "time_cost": HASHER.time_cost,
                                "parallelism": HASHER.parallelism},
                     "server": {} if args.url else server_settings()},
        "modes": modes, "verdicts": found, "overall": report.overall(found, labels) if found else None,
        "sweeps": sweeps, "results": records,
    }
    text = text_report(args, document, modes, records, found, sweeps)
    files = write_out(args, document, modes, records, sweeps)
    with open(files["report"], "w") as f:
        f.write(text + "\n")
    print(text)
    print(f"written: {', '.join(files[k] for k in ('report', 'json', 'csv', 'chart'))}"
          + (f", {files['sweep_csv']}" if "sweep_csv" in files else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
