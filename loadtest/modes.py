"""Measuring the load test's modes (`loadtest.loadtest`): per process count
a server started on a fresh database and data folder, or per --url a
running deployment; every scenario at every load in each, after checking
that one user can log in and run a program. Also what was run, where:
versions, git commit, server settings.
"""
import asyncio
import datetime
import os
import platform
import subprocess

import aiohttp
import tornado

from server import __version__, config
from server.accounts.passwords import HASHER

from . import report
from .cell import SCENARIOS, run_cell, verify
from .cli import Aborted, say
from .client import error_kind
from .machine import machine
from .harness import ROOT, fresh_server, make_credentials, run_async, scratch
from .recording import fmt
from .scenarios import Budget, Cell, SetupFailed

# Server settings recorded with the results (as the servers see them).
RECORDED_SETTINGS = ("HASH_THREADS", "FILE_PROCESSES", "FILE_THREADS", "DB_POOL_MAX", "FS_DELAY_MS", "SANDBOX", "RUN_MAX_CONCURRENT",
                     "RUN_QUEUE_MAX", "LOG_LEVEL")


def measure(args, deadline):
    """(modes, records): the servers this run starts, or the deployments
    it was given, each measured in turn."""
    if args.url:
        return deployments(args, deadline)
    say(f"hashing {max(args.steps)} passwords (argon2id) ...")
    return isolated(args, make_credentials(max(args.steps)), deadline, "perf" in args.scenario)


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
            say(f"    {record['primary']}: p50 {fmt(row['p50_ms'])} ms, p95 {fmt(row['p95_ms'])} "
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
            say(f"{mode['label']}: starting the server (TORNADO_PROCESSES={processes}) ...")
            with fresh_server(admin_dsn, base, processes, credentials, f"loadtest_{processes}p",
                              **({"PERF_CHECK": "1"} if need_perf else {})) as (server, logins):
                mode.update(url=server.url, worker_pids=server.pids)
                try:
                    records += measure_mode(args, mode, logins, deadline, server.pids)
                except SetupFailed as e:
                    raise Aborted(f"{e}\nnothing was measured; the server said:\n{server.output()}") from None
                server.ensure_running()
            modes.append(mode)
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


async def remote_server_header(url, timeout):
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as http:
            async with http.get(url.rstrip("/") + "/healthz") as resp:
                return resp.headers.get("Server")
    except Exception as e:
        return f"unreachable ({error_kind(e)})"


# -- what was run, where -------------------------------------------------------------

def document(args, command, started, load_start, modes, records):
    """Everything results.json holds: the measurements, the verdicts or
    sweeps drawn from them, and what was run, where, how."""
    labels = [m["label"] for m in modes]
    sweeps = []
    if args.sweep:
        for name in args.scenario:
            for label in labels:
                steps = [report.sweep_step(r) for r in records if r["scenario"] == name and r["mode"] == label]
                part, text = report.bottleneck(steps)
                sweeps.append({"scenario": name, "mode": label, "steps": steps, "bottleneck": part, "verdict": text})
    found = [] if args.sweep else report.verdicts(records, labels)
    return {
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
