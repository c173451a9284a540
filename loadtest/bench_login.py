"""Login benchmark: how long a class logging in at once waits, with 1 and
with 2 worker processes, measured against the real server.

    python -m loadtest.bench_login [--processes 1,2] [--concurrency 30,60]
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
import os
import secrets
import statistics
import sys
import time

from .cli import Aborted, bounds, int_list, measured, say, server_root_option, write_json
from .machine import describe, machine
from .recording import error_lines, fmt


def hash_time_ms(samples=5):
    """Median milliseconds of one hash_password on this machine, now."""
    from server.accounts.passwords import hash_password
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        hash_password(secrets.token_urlsafe(12))
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


async def login_once(url, username, password):
    from .client import VirtualUser
    async with VirtualUser(url) as user:
        await user.sign_in(username, password)
        await user.logout()


def measure(args, deadline):
    """Per process count a server on a fresh database: one login checked,
    then the login rounds at every concurrency. Returns (hash_ms, results)."""
    # Here, not at the top: --help needs none of them (nor aiohttp, hdrh).
    from .client import error_kind
    from .harness import fresh_server, make_credentials, run_async, scratch
    from .scenarios import run_login
    results = []
    with scratch("pyclassroom-bench-") as (base, pg):
        say("starting PostgreSQL and hashing passwords ...")
        admin_dsn = pg.start()
        hash_ms = hash_time_ms()
        credentials = make_credentials(max(args.concurrency))
        for processes in args.processes:
            with fresh_server(admin_dsn, base, processes, credentials, f"bench_{processes}p") as (server, logins):
                try:
                    run_async(login_once(server.url, *logins[0]), deadline)
                except Aborted:
                    raise
                except Exception as e:  # whatever it is, measuring would be pointless
                    raise Aborted(f"a benchmark user cannot log in ({error_kind(e)}); server output:\n"
                                  + server.output()) from None
                for concurrency in args.concurrency:
                    say(f"  {processes} process(es), {concurrency} at once ...")
                    result = run_async(run_login(server.url, logins[:concurrency], args.rounds, args.warmup,
                                                 args.timeout), deadline)
                    results.append({"processes": processes, "worker_pids": server.pids, **result.summary()})
    return hash_ms, results


# -- report ------------------------------------------------------------------------

def p95_ratios(results):
    """{concurrency: p95 with 2 processes / p95 with 1}, where both were measured."""
    by = {(r["processes"], r["concurrency"]): r["p95_ms"] for r in results}
    return {c: round(by[2, c] / by[1, c], 3) for (p, c) in by
            if p == 1 and by.get((2, c)) and by[1, c]}


def report(settings, info, hash_ms, results):
    a = settings["argon2"]
    params = f"argon2id m={a['memory_kib'] // 1024} MiB t={a['time_cost']} p={a['parallelism']}"
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
        lines += error_lines(where, r["errors_by_kind"])
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
    lines.append(describe(info))
    lines.append("the load generator runs on the same machine and competes with the server for CPU")
    return "\n".join(lines)


# -- main --------------------------------------------------------------------------

def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_login", description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int_list, default=[1, 2], help="worker process counts (default 1,2)")
    parser.add_argument("--concurrency", type=int_list, default=[30, 60],
                        help="users logging in at once (default 30,60)")
    parser.add_argument("--rounds", type=int, default=3, help="counted rounds per concurrency (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="uncounted rounds first (default 1)")
    server_root_option(parser)
    bounds(parser, max_seconds=1800)
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0:
        parser.error("--rounds must be at least 1 and --warmup at least 0")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    deadline = time.monotonic() + args.max_seconds
    measurement, status = measured(lambda: measure(args, deadline))
    if status is not None:
        return status
    hash_ms, results = measurement
    from server import config
    from server.accounts.passwords import HASHER
    settings = {k: getattr(args, k) for k in ("processes", "concurrency", "rounds", "warmup", "timeout",
                                                  "server_root")}
    settings["argon2"] = {"type": "argon2id", "memory_kib": HASHER.memory_cost, "time_cost": HASHER.time_cost,
                          "parallelism": HASHER.parallelism}
    settings["server_env"] = {"HOST": "127.0.0.1", "LOGIN_FAILURES_PER_ADDRESS": "100000",
                              **{name: os.environ.get(name, config.BY_NAME[name].default)
                                 for name in ("HASH_THREADS", "DB_POOL_MAX", "LOG_LEVEL")}}
    info = machine()
    print(report(settings, info, hash_ms, results))
    if args.json:
        write_json(args.json, {"settings": settings, "machine": info, "hash_password_ms": hash_ms,
                               "results": results,
                               "p95_ratio_2_to_1": {str(c): r for c, r in p95_ratios(results).items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
