"""Login benchmark: how long a class logging in at once waits, with 1 and
with 2 worker processes, measured against the real server.

    python -m server.ops.bench_login [--processes 1,2] [--concurrency 30,60]
                                     [--rounds 3] [--warmup 1] [--json OUT]

It brings everything it needs and takes it all away again, also on Ctrl-C
or an error: an embedded PostgreSQL in a temporary folder, then per process
count the server as a subprocess (`python -m server`) on a fresh database,
with max(concurrency) real users holding real argon2id hashes of distinct
random passwords. Every step is bounded in time (30 s per request, and
--max-seconds for the whole run), so it always stops by itself.

The load generator runs on the same machine as the server, so it competes
with it for CPU: its own CPU share is printed, with a warning when it is
high enough to distort the figures.
"""
import argparse
import asyncio
import collections
import contextlib
import json
import os
import platform
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit, urlunsplit

import psycopg2

from .. import config
from ..accounts.passwords import HASHER, hash_password
from ..embedded_postgres import EmbeddedPostgres
from .cli import clean_up_on_sigterm, int_list, uninterrupted
from . import loadgen

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVING_RE = re.compile(r"serving (http://\S+) with (\d+) (?:worker )?process(?:es)? \(pids? ([\d, ]+)\)")
START_TIMEOUT = 120.0  # the server prints its serving line within this
STOP_TIMEOUT = 30.0


class Aborted(Exception):
    """The benchmark cannot go on; the message says why."""


# -- the server under test -------------------------------------------------------

class ServerUnderTest:
    """`python -m server` as a subprocess, ready once it prints its serving line."""

    def __init__(self, env):
        self.env = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
        self.proc = None
        self.url = None
        self.pids = []
        self.tail = collections.deque(maxlen=40)  # last output lines, for error messages
        self._serving = threading.Event()

    def start(self):
        # Its own session: a Ctrl-C on the terminal reaches only us, and we
        # stop the server in order (SIGTERM, then wait).
        self.proc = subprocess.Popen([sys.executable, "-m", "server"], cwd=ROOT, env=self.env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()
        if not self._serving.wait(START_TIMEOUT) or self.proc.poll() is not None:
            raise Aborted("the server did not start:\n" + self.output())
        return self

    def _read(self):
        # Always drained, so a chatty server never blocks on a full pipe.
        for line in self.proc.stdout:
            self.tail.append(line)
            m = SERVING_RE.search(line)
            if m and not self._serving.is_set():
                self.url = m.group(1)
                self.pids = [int(p) for p in m.group(3).split(",")]
                self._serving.set()

    def output(self):
        return "".join(self.tail)

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its workers too
            self.proc.wait()


# -- database and users ----------------------------------------------------------

def with_database(dsn, name):
    return urlunsplit(urlsplit(dsn)._replace(path="/" + name))


def admin_sql(dsn, statement):
    conn = psycopg2.connect(dsn, connect_timeout=30)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(statement)
    finally:
        conn.close()


def make_credentials(count):
    """[(username, password, hash)]: distinct random passwords, real hashes,
    hashed in parallel (argon2 releases the GIL)."""
    pairs = [(f"bench{i:04d}", secrets.token_urlsafe(12)) for i in range(count)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        hashes = list(pool.map(hash_password, [password for _, password in pairs]))
    return [(username, password, h) for (username, password), h in zip(pairs, hashes)]


def insert_users(dsn, credentials):
    conn = psycopg2.connect(dsn, connect_timeout=30)
    try:
        with conn, conn.cursor() as cur:
            cur.executemany("INSERT INTO users (username, display_name, role, password_hash) "
                            "VALUES (%s, %s, 'student', %s)",
                            [(username, f"Bench Student {username[5:]}", h) for username, _, h in credentials])
    finally:
        conn.close()


def hash_time_ms(samples=5):
    """Median milliseconds of one hash_password on this machine, now."""
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        hash_password(secrets.token_urlsafe(12))
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


@contextlib.contextmanager
def scratch(prefix):
    """(folder, its EmbeddedPostgres, not started) for one benchmark run. On
    the way out, however it goes, PostgreSQL stops and the folder goes,
    uninterrupted. The folder is 0755: PostgreSQL runs as 'postgres' when we
    are root, and students' uids walk through it to their homes."""
    base = tempfile.mkdtemp(prefix=prefix)
    os.chmod(base, 0o755)
    pg = EmbeddedPostgres(base)
    try:
        yield base, pg
    finally:
        with uninterrupted():
            pg.stop()
            shutil.rmtree(base, ignore_errors=True)


def new_server_space(admin_dsn, base, name, label):
    """(dsn, DATA_DIR) for one server under test: a new database `name` and
    a new folder in `base`. The folder is 0755: as root, the students'
    sandbox uids walk through it to their homes (the server refuses to
    start otherwise)."""
    dsn = with_database(admin_dsn, name)
    data_dir = tempfile.mkdtemp(prefix=f"data-{label}-", dir=base)
    os.chmod(data_dir, 0o755)
    admin_sql(admin_dsn, f'CREATE DATABASE "{name}"')
    return dsn, data_dir


def machine():
    info = {"cpus": os.cpu_count(), "usable_cpus": len(os.sched_getaffinity(0)),
            "python": platform.python_version(), "platform": platform.platform()}
    with open("/proc/meminfo") as f:
        kib = int(re.search(r"MemTotal:\s+(\d+) kB", f.read()).group(1))
    info["memory_gib"] = round(kib / 1024 ** 2, 1)
    with open("/proc/cpuinfo") as f:
        model = re.search(r"model name\s*:\s*(.+)", f.read())
    info["cpu_model"] = model.group(1).strip() if model else "unknown"
    return info


# -- one measurement ---------------------------------------------------------------

def server_env(processes, dsn, data_dir):
    return {
        "TORNADO_PROCESSES": str(processes), "PORT": "0", "HOST": "127.0.0.1",
        "DATABASE_URL": dsn, "DATA_DIR": data_dir, "STORAGE_ROOT": "",
        "COOKIE_SECRET": secrets.token_urlsafe(48),
        "ADMIN_PASSWORD": secrets.token_urlsafe(16),
        # Every virtual user comes from 127.0.0.1: never throttle that address.
        "LOGIN_FAILURES_PER_ADDRESS": "100000",
    }


def run_async(coro, deadline):
    """Run `coro`, giving up when the whole run's deadline passes."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise Aborted("--max-seconds reached")
    try:
        return asyncio.run(asyncio.wait_for(coro, remaining))
    except asyncio.TimeoutError:
        raise Aborted("--max-seconds reached during a measurement") from None


async def login_once(url, username, password):
    async with loadgen.VirtualUser(url) as user:
        await user.fetch_xsrf()
        await user.login(username, password)
        await user.logout()


def measure(args, processes, admin_dsn, base, credentials, deadline):
    """Start a server with `processes` workers on a fresh database, run the
    login scenario at every concurrency, stop it. Returns summaries."""
    name = f"bench_{processes}p_{secrets.token_hex(4)}"
    dsn, data_dir = new_server_space(admin_dsn, base, name, f"{processes}p")
    server = ServerUnderTest(server_env(processes, dsn, data_dir))
    try:
        server.start()  # applies the migrations, so the users table exists after
        insert_users(dsn, credentials)
        username, password, _ = credentials[0]
        try:
            run_async(login_once(server.url, username, password), deadline)
        except Aborted:
            raise
        except Exception as e:  # whatever it is, measuring would be pointless
            raise Aborted(f"a benchmark user cannot log in ({loadgen.error_kind(e)}); server output:\n"
                          + server.output()) from None
        results = []
        for concurrency in args.concurrency:
            print(f"  {processes} process(es), {concurrency} at once ...", file=sys.stderr, flush=True)
            pairs = [(u, p) for u, p, _ in credentials[:concurrency]]
            result = run_async(loadgen.run_login(server.url, pairs, args.rounds, args.warmup, args.timeout),
                               deadline)
            results.append({"processes": processes, "worker_pids": server.pids, **result.summary()})
        return results
    finally:
        server.stop()
        admin_sql(admin_dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- report ------------------------------------------------------------------------

def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def p95_ratios(results):
    """{concurrency: p95 with 2 processes / p95 with 1}, where both were measured."""
    by = {(r["processes"], r["concurrency"]): r["p95_ms"] for r in results}
    return {c: round(by[2, c] / by[1, c], 3) for (p, c) in by
            if p == 1 and by.get((2, c)) and by[1, c]}


def report(settings, info, hash_ms, results):
    params = f"argon2id m={HASHER.memory_cost // 1024} MiB t={HASHER.time_cost} p={HASHER.parallelism}"
    lines = [f"login latency, N real logins at once ({params}), "
             f"{settings['rounds']} rounds after {settings['warmup']} warm-up",
             f"{'processes':>9}  {'concurrency':>11}  {'logins':>6}  {'errors':>6}  {'p50 ms':>7}  "
             f"{'p95 ms':>7}  {'p99 ms':>7}  {'max ms':>7}  {'logins/s':>8}  {'loadgen cpu':>11}"]
    for r in results:
        lines.append(f"{r['processes']:>9}  {r['concurrency']:>11}  {r['count']:>6}  {r['errors']:>6}  "
                     f"{fmt(r['p50_ms'], '7.1f')}  {fmt(r['p95_ms'], '7.1f')}  {fmt(r['p99_ms'], '7.1f')}  "
                     f"{fmt(r['max_ms'], '7.1f')}  {r['logins_per_s']:>8.1f}  {r['loadgen_cpu']:>10.0%}")
    lines.append("")
    for r in results:
        where = f"{r['processes']} process(es), {r['concurrency']} at once"
        if r["errors_by_kind"]:
            lines.append(f"errors, {where}: " + ", ".join(f"{k} {n}" for k, n in r["errors_by_kind"].items()))
        if r["housekeeping_errors"]:
            lines.append(f"failed logouts, {where}: {r['housekeeping_errors']}")
        if r["loadgen_cpu_warning"]:
            lines.append(f"WARNING, {where}: the load generator used {r['loadgen_cpu']:.0%} of a core; "
                         "it may be the bottleneck, so these latencies may be too high")
        if r["processes"] > 1:
            lines.append(f"logins per worker, {where}: "
                         + ", ".join(f"pid {pid} {n}" for pid, n in r["by_worker"].items()))
    for concurrency, ratio in p95_ratios(results).items():
        lines.append(f"p95 with 2 processes / p95 with 1, {concurrency} at once: {ratio:.2f}")
    lines.append(f"one hash_password: {hash_ms:.1f} ms (median of 5, this run)")
    lines.append(f"machine: {info['cpus']} CPUs ({info['usable_cpus']} usable, {info['cpu_model']}), "
                 f"{info['memory_gib']} GiB memory, Python {info['python']}, {info['platform']}")
    lines.append("the load generator runs on the same machine and competes with the server for CPU")
    return "\n".join(lines)


# -- main --------------------------------------------------------------------------


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m server.ops.bench_login", description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int_list, default=[1, 2], help="worker process counts (default 1,2)")
    parser.add_argument("--concurrency", type=int_list, default=[30, 60],
                        help="users logging in at once (default 30,60)")
    parser.add_argument("--rounds", type=int, default=3, help="counted rounds per concurrency (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="uncounted rounds first (default 1)")
    parser.add_argument("--timeout", type=float, default=loadgen.REQUEST_TIMEOUT,
                        help="seconds allowed per request (default 30)")
    parser.add_argument("--max-seconds", type=float, default=1800, help="bound on the whole run (default 1800)")
    parser.add_argument("--json", metavar="OUT", help="also write every figure and setting to this file")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0:
        parser.error("--rounds must be at least 1 and --warmup at least 0")
    return args



def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    clean_up_on_sigterm()
    deadline = time.monotonic() + args.max_seconds
    try:
        with scratch("pyclassroom-bench-") as (base, pg):
            print("starting PostgreSQL and hashing passwords ...", file=sys.stderr, flush=True)
            admin_dsn = pg.start()
            hash_ms = hash_time_ms()
            credentials = make_credentials(max(args.concurrency))
            results = []
            for processes in args.processes:
                results += measure(args, processes, admin_dsn, base, credentials, deadline)
    except Aborted as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; cleaned up", file=sys.stderr)
        return 130
    settings = {k: getattr(args, k) for k in ("processes", "concurrency", "rounds", "warmup", "timeout")}
    settings["argon2"] = {"type": "argon2id", "memory_kib": HASHER.memory_cost, "time_cost": HASHER.time_cost,
                          "parallelism": HASHER.parallelism}
    settings["server_env"] = {"HOST": "127.0.0.1", "LOGIN_FAILURES_PER_ADDRESS": "100000",
                              **{name: os.environ.get(name, config.BY_NAME[name].default)
                                 for name in ("HASH_THREADS", "DB_POOL_MAX", "LOG_LEVEL")}}
    info = machine()
    print(report(settings, info, hash_ms, results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"settings": settings, "machine": info, "hash_password_ms": hash_ms, "results": results,
                       "p95_ratio_2_to_1": {str(c): r for c, r in p95_ratios(results).items()}}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
