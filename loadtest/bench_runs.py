"""Benchmark of running programs over /ws/run, per sandbox kind, and of how
responsive the server stays while students' programs hog the CPU.

    python -m loadtest.bench_runs [--sandbox local,docker,process,remote]
                                  [--students 1,10,60] [--duration 10]
                                  [--processes 1] [--runners 0,1,2] [--json OUT]

Per sandbox kind (one that cannot work here is skipped, with the reason;
`remote` is measured once per --runners count: 0, a child runner per
worker as SANDBOX=remote alone starts them, or N runner processes of the
local kind, `remote/N` in the report, whose CPU counts as the server's),
one server is started as a subprocess on a fresh database and DATA_DIR,
with SANDBOX=<kind> and RUN_MAX_CONCURRENT high (--max-concurrent, default
200) so that admission never queues: what is measured is the sandbox and
the server, not the waiting line. Real users (real argon2id hashes) log in
once and are reused for every measurement on that server.

Runs, for each student count N: every student opens its WebSocket, as the
IDE does on page load, and the server pre-starts a sandbox for it; we wait
until the server's /metrics says N sandboxes started (bounded), plus
--settle seconds, so these are WARM starts. Each student has saved
ECHO_PROGRAM (prints a line, reads one input(), prints it back). For
--duration seconds every student loops: send `run`, time the first
`output` frame (run -> first output), answer the input with a token unique
to this run, wait for `exit`; the run is a success only if the reason is
"ok", stderr is empty and stdout holds "got <token>". Anything else is an
error, counted by kind, and adds no latency. Between runs each student
waits --think seconds +-50% (default 1), as a student reading the output
would: the server starts the next warm sandbox only after a run ends, so
without a pause the next run would wait for part of a sandbox start. Also
reported: run -> `started`, last output -> `exit`, the server's own mean
sandbox start time (from /metrics), and the CPU used meanwhile by the
server, the Docker daemon, the whole machine and this load generator.

Bare interpreter: in the same run, BARE_SAMPLES x `SANDBOX_PYTHON -c
"print(1)"`, timed from the subprocess start to its first stdout byte, at
the start and again right before each sandbox's runs (the ratio uses the
latter); the report gives local p50 / bare p50 (target within 2x) and the
docker p50 (target under 150 ms).

Responsiveness (--hogs, default 60; 0 skips it): --savers (5) other
students save their own 2-4 KiB file (PUT with If-Match) in a closed loop
for --duration seconds, first with no program running, then while --hogs
students each run `while True: pass`; p50/p95/p99 of both and their ratio
(target: p95 under 100 ms under load). The loops are then stopped (`kill`).

Everything is bounded in time (--timeout per run or request, --max-seconds
for all) and cleaned up on exit, error or Ctrl-C: servers, PostgreSQL,
temporary folders. The load generator runs on the same machine and
competes with the server and the sandboxes for CPU: its own CPU share is
printed, with a warning near one core.

The measurements are in `run_phases`, the report in `runs_report`.
"""
import argparse
import sys
import time

from server import config

from .cli import bounds, int_list, measured, say, server_root_option, write_json
from .machine import machine, raise_file_limit

SANDBOXES = ("local", "docker", "process", "remote")


def sandbox_list(text):
    values = [v.strip() for v in text.split(",") if v.strip()]
    bad = [v for v in values if v not in SANDBOXES]
    if not values or bad:
        raise argparse.ArgumentTypeError(f"expected some of {','.join(SANDBOXES)} separated by commas, not {text!r}")
    return values


def runner_counts(text):
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v < 0 or v > 8 for v in values):
        raise argparse.ArgumentTypeError(f"expected counts from 0 to 8 separated by commas, not {text!r}")
    return values


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_runs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sandbox", type=sandbox_list, default=["local", "docker", "process"],
                        help="sandbox kinds to measure (default local,docker,process; remote: on runners)")
    parser.add_argument("--runners", type=runner_counts, default=[0],
                        help="for remote: runner processes, each count measured (default 0: a child runner "
                             "per worker)")
    parser.add_argument("--students", type=int_list, default=[1, 10, 60],
                        help="students running programs at once (default 1,10,60)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of each measurement (default 10)")
    parser.add_argument("--processes", type=int, default=1, help="server worker processes (default 1)")
    parser.add_argument("--think", type=float, default=1.0,
                        help="seconds each student waits between runs (default 1)")
    parser.add_argument("--settle", type=float, default=1.0,
                        help="extra seconds after the warm sandboxes are reported (default 1)")
    parser.add_argument("--hogs", type=int, default=60,
                        help="students running endless loops for the responsiveness measurement (default 60; 0: skip)")
    parser.add_argument("--savers", type=int, default=5, help="students saving files meanwhile (default 5)")
    parser.add_argument("--split-cpus", action="store_true",
                        help="as if runners had hosts of their own: the server and this load generator on half the "
                             "CPUs, the runners on the other half (for local: the server and its sandboxes on the "
                             "first half alone)")
    parser.add_argument("--max-concurrent", type=int, default=200, help="RUN_MAX_CONCURRENT (default 200)")
    parser.add_argument("--cpu-seconds", type=int, default=60, help="RUN_CPU_SECONDS (default 60)")
    server_root_option(parser)
    bounds(parser, max_seconds=1800, what="run or request")
    args = parser.parse_args(argv)
    if args.duration <= 0 or args.think < 0 or args.settle < 0 or args.hogs < 0 or args.savers < 1:
        parser.error("--duration must be positive, --think/--settle/--hogs at least 0, --savers at least 1")
    if args.processes < 1:
        parser.error("--processes must be at least 1")
    if args.max_concurrent < max(max(args.students), args.hogs) * 1:
        parser.error("--max-concurrent must be at least the largest of --students and --hogs, "
                     "or runs would queue")
    if args.cpu_seconds < args.duration + 5:
        parser.error("--cpu-seconds must exceed --duration by a margin, or the loops hit the CPU limit")
    return args



def measure(args, deadline, cfg):
    """(bare interpreter figures, results per sandbox kind, {kind skipped: why})."""
    # Here, not at the top: --help needs none of them (nor aiohttp, hdrh).
    from .harness import make_credentials, scratch
    from .machine import BARE_SAMPLES, bare_interpreter
    from .run_phases import measure as measure_sandbox, sandbox_problem
    results, skipped = [], {}
    with scratch("pyclassroom-bench-runs-") as (base, pg):
        kinds = []
        for kind in args.sandbox:
            why = sandbox_problem(kind, cfg)
            if why:
                skipped[kind] = why
                say(f"skipping sandbox {kind}: {why}")
            else:
                kinds.append(kind)
        say(f"bare interpreter: {BARE_SAMPLES} x {cfg.SANDBOX_PYTHON} -c 'print(1)' ...")
        bare = bare_interpreter(cfg.SANDBOX_PYTHON)
        if kinds:
            say("starting PostgreSQL and hashing passwords ...")
            admin_dsn = pg.start()
            credentials = make_credentials(max(max(args.students), args.hogs) + args.savers)
            for kind in kinds:
                for count in args.runners if kind == "remote" else [0]:
                    results.append(measure_sandbox(args, kind, admin_dsn, base, credentials, deadline,
                                                   cfg.SANDBOX_PYTHON, count))
    return bare, results, skipped


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    raise_file_limit()
    deadline = time.monotonic() + args.max_seconds
    cfg = config.load()  # SANDBOX_PYTHON, SANDBOX_IMAGE, SANDBOX_UID_BASE as the server will see them
    measurement, status = measured(lambda: measure(args, deadline, cfg))
    if status is not None:
        return status
    bare, results, skipped = measurement
    from .run_client import ECHO_PROGRAM, HOG_PROGRAM
    from .runs_report import report, targets
    info = machine()
    print(report(args, info, bare, cfg.SANDBOX_PYTHON, results, skipped))
    if args.json:
        settings = {k: getattr(args, k) for k in ("sandbox", "runners", "students", "duration", "processes", "think",
                                                  "split_cpus",
                                                  "settle",
                                                  "hogs", "savers", "max_concurrent", "cpu_seconds", "timeout",
                                                  "server_root")}
        settings.update({"sandbox_python": cfg.SANDBOX_PYTHON, "echo_program": ECHO_PROGRAM,
                         "hog_program": HOG_PROGRAM})
        write_json(args.json, {"settings": settings, "machine": info, "bare_interpreter": bare, "results": results,
                               "skipped": skipped, "targets": targets(results, bare)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
