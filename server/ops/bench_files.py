"""Benchmark of saving and loading files with 1 and 2 worker processes.

    python -m server.ops.bench_files [--processes 1,2] [--students 60,600]
                                     [--duration 10] [--json OUT]

Each simulated student is a real user with its own browser (cookie jar and
keep-alive connection, `loadgen.VirtualUser`). For --duration seconds every
student, all at once, loops: save its own file (PUT, 2-4 KiB of new random
text, If-Match of its last etag), then load it back (GET) and compare.
Only a verified answer is a success: a non-200, a wrong etag or different
content is an error, counted by kind, and adds no latency.

It brings up and tears down everything itself, also on Ctrl-C or an error:
an embedded PostgreSQL in a temporary folder, then per process count the
server as a subprocess on a fresh database and DATA_DIR, with
max(--students) real users (real argon2id hashes). Every request has a
timeout and the whole run is bounded by --max-seconds.

The load generator runs on the same machine and competes with the server
for CPU; its own CPU use is printed, with a warning near one core.

Reused rather than duplicated: `loadgen` (VirtualUser, Recorder, timed,
closed_loop) and `bench_login` (the server subprocess, users, machine info).
"""
import argparse
import asyncio
import contextlib
import json
import os
import random
import resource
import secrets
import shutil
import sys
import time
from collections import Counter

from ..files.store import etag_of
from .cli import clean_up_on_sigterm, int_list
from . import loadgen
from .bench_login import (Aborted, ServerUnderTest, admin_sql, insert_users, machine,
                          make_credentials, new_server_space, run_async, scratch, server_env)

FILE_BYTES = (2048, 4096)  # size range of each saved file
# Logins at once while setting up: each costs the server one argon2 hash, and
# its hash queue refuses (503) beyond 512 waiting per worker.
LOGIN_CONCURRENCY = 32
FIGURES = ("save_p50_ms", "save_p95_ms", "save_p99_ms", "load_p50_ms", "load_p95_ms", "load_p99_ms",
           "ops_per_s")


class Student:
    """One student editing one file in its own home, through one browser."""

    def __init__(self, user, username, path, timing=None):
        self.user = user
        self.timing = timing  # a loadgen.ServerTiming that sees each save's answer
        self.username = username
        self.url = f"{user.base_url}/api/files/home/{path}"
        self.etag = None   # of the last acknowledged save; None: the file is new
        self.saved = None  # its text
        self.count = 0

    def new_text(self):
        self.count += 1
        header = f"# {self.username}, save {self.count}\n"
        size = random.randint(*FILE_BYTES)
        return header + os.urandom(size // 2).hex()[:size - len(header)]

    async def save(self):
        """PUT new text; a success is a 200 whose etag is that of our text."""
        text = self.new_text()
        headers = {"X-XSRFToken": self.user.xsrf}
        if self.etag:
            headers["If-Match"] = f'"{self.etag}"'
        async with self.user.http.put(self.url, data=text.encode(), headers=headers) as resp:
            body = await resp.read()
        if self.timing:
            self.timing.observe(resp.headers)
        loadgen.check_status(resp.status, 200)
        etag = _json(body).get("etag")
        if etag != etag_of(text.encode()):
            raise loadgen.CheckFailed("wrong_etag", f"{etag!r}")
        self.etag, self.saved = etag, text
        return loadgen.worker_pid(resp)

    async def load(self):
        """GET the file back; a success is exactly what we saved last."""
        async with self.user.http.get(self.url) as resp:
            body = await resp.read()
        loadgen.check_status(resp.status, 200)
        answer = _json(body)
        if answer.get("content") != self.saved:
            raise loadgen.CheckFailed("content_mismatch")
        if answer.get("etag") != self.etag:
            raise loadgen.CheckFailed("etag_mismatch")
        return loadgen.worker_pid(resp)

    async def resync(self):
        """After a failure our idea of the file may be stale (a save that
        timed out may still have landed): fetch what the server holds,
        untimed, so that the next save is not a certain 409."""
        with contextlib.suppress(Exception):
            async with self.user.http.get(self.url) as resp:
                body = await resp.read()
            if resp.status == 200:
                answer = _json(body)
                self.etag, self.saved = answer.get("etag"), answer.get("content")
            elif resp.status == 404:
                self.etag = self.saved = None


def _json(body):
    try:
        answer = json.loads(body)
    except ValueError:
        raise loadgen.CheckFailed("bad_body", repr(body[:200])) from None
    if not isinstance(answer, dict):
        raise loadgen.CheckFailed("bad_body", repr(body[:200]))
    return answer


async def run_students(url, credentials, duration, path, timeout):
    """Log every student in, create its file, then the timed closed loop.
    Returns a summary dict."""
    saves, loads, setup_errors = loadgen.Recorder(), loadgen.Recorder(), Counter()
    gate = asyncio.Semaphore(LOGIN_CONCURRENCY)

    async def prepare(user, username, password):
        async with gate:
            await user.fetch_xsrf()  # GET /api/me hands out the _xsrf cookie
            await user.login(username, password)
        student = Student(user, username, path)
        await student.save()  # creates the file (untimed; also warms connections up)
        return student

    async with contextlib.AsyncExitStack() as stack:
        users = [await stack.enter_async_context(loadgen.VirtualUser(url, timeout)) for _ in credentials]
        outcomes = await asyncio.gather(*(prepare(user, name, password)
                                          for user, (name, password, _) in zip(users, credentials)),
                                        return_exceptions=True)
        students = []
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                setup_errors[loadgen.error_kind(outcome)] += 1
            else:
                students.append(outcome)
        if not students:
            raise Aborted(f"no student could log in and save: {dict(setup_errors)}")

        async def cycle(student):
            ok = await loadgen.timed(saves, student.save) and await loadgen.timed(loads, student.load)
            if not ok:
                await student.resync()

        # The cycle recorder is not reported: saves and loads record themselves.
        window = await loadgen.closed_loop(students, cycle, loadgen.Recorder(), iterations=None,
                                           duration=duration)
    s, l = saves.summary(), loads.summary()
    ops = saves.count + loads.count
    return {
        "students": len(credentials), "active_students": len(students), "setup_errors": dict(setup_errors),
        "saves": saves.count, "loads": loads.count, "errors": saves.error_count + loads.error_count,
        "errors_by_kind": {**{"save_" + k: n for k, n in s["errors_by_kind"].items()},
                           **{"load_" + k: n for k, n in l["errors_by_kind"].items()}},
        **{f"save_{k}": s[k] for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms")},
        **{f"load_{k}": l[k] for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms")},
        "wall_s": round(window.wall, 3), "ops_per_s": round(ops / window.wall, 1) if window.wall else 0.0,
        "loadgen_cpu": round(window.cpu_share, 3), "loadgen_cpu_warning": window.cpu_share > loadgen.CPU_WARNING,
        "by_worker": dict(Counter(s["by_worker"]) + Counter(l["by_worker"])),
    }


def measure(args, processes, admin_dsn, base, credentials, deadline):
    """One server with `processes` workers on a fresh database and DATA_DIR,
    every student count in turn, then stop it and drop everything."""
    name = f"bench_files_{processes}p_{secrets.token_hex(4)}"
    dsn, data_dir = new_server_space(admin_dsn, base, name, f"{processes}p")
    server = ServerUnderTest(server_env(processes, dsn, data_dir))
    try:
        server.start()  # applies the migrations: the users table exists after
        insert_users(dsn, credentials)
        results = []
        for count in args.students:
            print(f"  {processes} process(es), {count} students for {args.duration:g} s ...",
                  file=sys.stderr, flush=True)
            # A new file name per run: every run starts by creating its files.
            summary = run_async(run_students(server.url, credentials[:count], args.duration,
                                             f"bench-{count}.py", args.timeout), deadline)
            results.append({"processes": processes, "worker_pids": server.pids, **summary})
            if server.proc.poll() is not None:
                raise Aborted("the server died:\n" + server.output())
        return results
    finally:
        server.stop()
        admin_sql(admin_dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        shutil.rmtree(data_dir, ignore_errors=True)


# -- report ------------------------------------------------------------------------

def ratios(results):
    """{students: {figure: 2-process value / 1-process value}} where both ran."""
    by = {(r["processes"], r["students"]): r for r in results}
    out = {}
    for (p, n), one in by.items():
        two = by.get((2, n))
        if p == 1 and two:
            out[n] = {f: round(two[f] / one[f], 2) for f in FIGURES if one[f] and two[f] is not None}
    return out


def fmt(value):
    return "-" if value is None else f"{value:.1f}"


def report(args, info, results):
    lines = [f"file save + load, each student: PUT its own {FILE_BYTES[0]}-{FILE_BYTES[1]} byte file "
             f"(If-Match), then GET and compare; {args.duration:g} s closed loop",
             f"{'procs':>5} {'students':>8} {'saves':>7} {'loads':>7} {'errors':>6}  "
             f"{'save p50':>8} {'p95':>6} {'p99':>6}  {'load p50':>8} {'p95':>6} {'p99':>6} (ms)  "
             f"{'ops/s':>7}  {'gen cpu':>7}"]
    for r in results:
        lines.append(f"{r['processes']:>5} {r['students']:>8} {r['saves']:>7} {r['loads']:>7} {r['errors']:>6}  "
                     f"{fmt(r['save_p50_ms']):>8} {fmt(r['save_p95_ms']):>6} {fmt(r['save_p99_ms']):>6}  "
                     f"{fmt(r['load_p50_ms']):>8} {fmt(r['load_p95_ms']):>6} {fmt(r['load_p99_ms']):>6}       "
                     f"{r['ops_per_s']:>7.1f}  {r['loadgen_cpu']:>7.0%}")
    lines.append("")
    for r in results:
        where = f"{r['processes']} process(es), {r['students']} students"
        if r["setup_errors"]:
            lines.append(f"setup errors (students left out), {where}: {r['setup_errors']}")
        if r["errors_by_kind"]:
            lines.append(f"errors, {where}: " + ", ".join(f"{k} {n}" for k, n in r["errors_by_kind"].items()))
        if r["loadgen_cpu_warning"]:
            lines.append(f"WARNING, {where}: the load generator used {r['loadgen_cpu']:.0%} of a core; "
                         "it may be the bottleneck, so latencies may be too high and ops/s too low")
        if r["processes"] > 1:
            lines.append(f"operations per worker, {where}: "
                         + ", ".join(f"pid {pid} {n}" for pid, n in sorted(r["by_worker"].items())))
    for count, figures in ratios(results).items():
        lines.append(f"2 processes / 1 process, {count} students: "
                     + ", ".join(f"{f.removesuffix('_ms')} {v:.2f}" for f, v in figures.items()))
    lines.append(f"machine: {info['cpus']} CPUs ({info['usable_cpus']} usable, {info['cpu_model']}), "
                 f"{info['memory_gib']} GiB memory, Python {info['python']}, {info['platform']}")
    lines.append("the load generator runs on the same machine and competes with the server for CPU")
    return "\n".join(lines)


# -- main --------------------------------------------------------------------------

def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m server.ops.bench_files",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int_list, default=[1, 2], help="worker process counts (default 1,2)")
    parser.add_argument("--students", type=int_list, default=[60, 600],
                        help="students saving and loading at once (default 60,600)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of each measurement (default 10)")
    parser.add_argument("--timeout", type=float, default=loadgen.REQUEST_TIMEOUT,
                        help="seconds allowed per request (default 30)")
    parser.add_argument("--max-seconds", type=float, default=1200, help="bound on the whole run (default 1200)")
    parser.add_argument("--json", metavar="OUT", help="also write every figure and setting to this file")
    args = parser.parse_args(argv)
    if args.duration <= 0:
        parser.error("--duration must be positive")
    return args



def _raise_file_limit():
    """Each student holds a connection, on our side and on the server's
    (which inherits this limit): allow as many open files as we may."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    clean_up_on_sigterm()
    _raise_file_limit()
    deadline = time.monotonic() + args.max_seconds
    try:
        with scratch("pyclassroom-bench-files-") as (base, pg):
            print("starting PostgreSQL and hashing passwords ...", file=sys.stderr, flush=True)
            admin_dsn = pg.start()
            credentials = make_credentials(max(args.students))
            results = []
            for processes in args.processes:
                results += measure(args, processes, admin_dsn, base, credentials, deadline)
    except Aborted as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; cleaned up", file=sys.stderr)
        return 130
    info = machine()
    print(report(args, info, results))
    if args.json:
        settings = {k: getattr(args, k) for k in ("processes", "students", "duration", "timeout")}
        settings["file_bytes"] = list(FILE_BYTES)
        with open(args.json, "w") as f:
            json.dump({"settings": settings, "machine": info, "results": results,
                       "ratio_2_to_1": {str(n): r for n, r in ratios(results).items()}}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
