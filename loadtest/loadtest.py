"""Load test: one process or several? Measures the real server with real
users in each process mode and says which to pick, per scenario and load.

    ./simple_load_test.sh [options]       (python -m loadtest.loadtest)

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
the server's time per request by part (from Server-Timing: wait, hash_wait, hash,
fs_wait, fs, db, app; queue = the rest of the client's wait); the part that
grows most with load is named as the bottleneck.
"""
import datetime
import os
import shlex
import sys
import time

from .cli import measured, say
from .machine import raise_file_limit
from .options import parse_args

# The pieces: options (the command line), modes (the servers or deployments
# measured), cell (one measurement, the check before measuring, the
# scenarios by name), scenarios and classroom (what the simulated users do),
# report and charts (figures, tables, verdicts, files); loadgen underneath
# (closed and open loop), client and run_client (HTTP and /ws/run).


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv, __doc__)
    from . import modes, report  # after the options: --help needs neither (nor aiohttp, hdrh, matplotlib)
    started = datetime.datetime.now()
    args.out = args.out or f"loadtest-{started:%Y%m%d-%H%M%S}"
    command = shlex.join([os.environ.get("LOADTEST_ARGV0", f"{sys.executable} -m loadtest.loadtest"), *argv])
    raise_file_limit()
    deadline = time.monotonic() + args.max_seconds
    load_start = os.getloadavg()[0]
    cpus = os.cpu_count() or 1
    if load_start > cpus:
        say(f"note: load average {load_start:.1f} on {cpus} CPUs: other work is running; figures will be noisy")
    result, status = measured(lambda: modes.measure(args, deadline))
    if status is not None:
        return status
    document = modes.document(args, command, started, load_start, *result)
    text = report.text_report(args, document)
    files = report.write_out(args, document, text)
    print(text)
    print(f"written: {', '.join(files[k] for k in ('report', 'json', 'csv', 'chart'))}"
          + (f", {files['sweep_csv']}" if "sweep_csv" in files else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
