"""The options of the load test (`loadtest.loadtest`): parsed, checked,
defaults filled in; a bad one is a one-line error and exit status 2.
The scenarios are loaded only to check a --scenario given: --help needs none."""
import argparse
import csv
import os

from .cli import REQUEST_TIMEOUT, int_list

DEFAULT_SCENARIOS = ["login", "files", "run", "classroom"]
SWEEP_SCENARIOS = ["perf", "files"]
PROG = "simple_load_test.sh"


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        self.exit(2, f"{PROG}: error: {message} (see --help)\n")


def scenario_list(text):
    from .cell import SCENARIOS
    values = [v.strip() for v in text.split(",") if v.strip()]
    bad = [v for v in values if v not in SCENARIOS]
    if not values or bad:
        raise argparse.ArgumentTypeError(f"unknown scenario {','.join(bad) or text!r}: choose from "
                                         + ",".join(SCENARIOS))
    return list(dict.fromkeys(values))


def sweep_range(text):
    try:
        start, stop, step = (int(v) for v in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START:STOP:STEP, e.g. 10:200:10, not {text!r}") from None
    if not 1 <= start <= stop or step < 1:
        raise argparse.ArgumentTypeError(f"need 1 <= START <= STOP and STEP >= 1, not {text!r}")
    return list(range(start, stop + 1, step))


def positive(kind):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if value <= 0:
            raise argparse.ArgumentTypeError(f"expected a positive number, not {text!r}")
        return value
    return parse


def non_negative(text):
    try:
        value = float(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, not {text!r}")
    return value


def default_processes():
    return [1, max(2, os.cpu_count() or 1)]


def parse_args(argv, doc):
    p = Parser(prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
               description=doc.split("\n\n")[0].strip(), epilog="\n\n".join(doc.split("\n\n")[2:]))
    p.add_argument("--url", action="append", metavar="URL",
                   help="measure this running deployment instead of starting servers (no server started); "
                        "repeat to compare deployments; needs --users")
    p.add_argument("--users", metavar="CSV", help="with --url: a CSV file of username,password (a header row "
                   "is allowed), one distinct account per simulated user")
    p.add_argument("--processes", type=int_list, help="TORNADO_PROCESSES of the servers started, compared in this "
                   f"order (default 1,{default_processes()[1]}: 1 and the CPU count, at least 2)")
    p.add_argument("--concurrency", type=int_list, default=[30, 50, 60],
                   help="simulated users at once, each measured in turn (default 30,50,60)")
    amount = p.add_mutually_exclusive_group()
    amount.add_argument("--duration", type=positive(float), metavar="SECONDS",
                        help="counted seconds per measurement (default 10; 5 per step with --sweep)")
    amount.add_argument("--requests", type=positive(int), metavar="N",
                        help="counted operations per measurement instead of a duration")
    p.add_argument("--warmup", type=non_negative, metavar="SECONDS",
                   help="uncounted seconds before each measurement (default 3; 1 with --sweep)")
    p.add_argument("--scenario", type=scenario_list, metavar="LIST",
                   help="scenarios, comma-separated: login (a class logging in at once, real password checks), "
                        "files (save then load a 2-4 KiB file, content checked), run (run a program that prints "
                        "and reads one input(), to first output and to exit), classroom (students log in, open "
                        "files, autosave while typing, run every half minute), perf (/sys_perf_check, needs "
                        "PERF_CHECK=1 on a deployment). Default login,files,run,classroom; perf,files with --sweep")
    p.add_argument("--rate", type=positive(float), metavar="R",
                   help="open loop: R operations per second at fixed scheduled times, timed from the scheduled "
                        "start; the users (--concurrency) cap what is outstanding (classroom keeps its own pace)")
    p.add_argument("--pace", type=positive(float), default=10.0,
                   help="classroom: how many times faster than a real class time runs (default 10)")
    p.add_argument("--sweep", type=sweep_range, metavar="START:STOP:STEP",
                   help="step the number of users (e.g. 10:200:10) and name the server part that grows most "
                        "with load (Server-Timing) as the bottleneck")
    p.add_argument("--perf-ms", type=positive(int), default=10,
                   help="perf scenario: milliseconds of CPU work per request (default 10)")
    p.add_argument("--out", metavar="DIR", help="folder for report.txt, results.json/.csv and the charts "
                   "(default loadtest-<timestamp>)")
    p.add_argument("--timeout", type=positive(float), default=REQUEST_TIMEOUT,
                   help="seconds allowed per request or run (default 30)")
    p.add_argument("--max-seconds", type=positive(float), default=3600,
                   help="bound on the whole run (default 3600)")
    args = p.parse_args(argv)
    if args.url and args.processes:
        p.error("--processes starts servers; with --url the deployment's own process mode is measured")
    if args.url and not args.users:
        p.error("--url needs --users users.csv (username,password per line)")
    if args.users and not args.url:
        p.error("--users is for --url; without it the test creates its own users")
    if args.perf_ms > 1000:
        p.error("--perf-ms can be at most 1000 (the server's limit)")
    args.processes = args.processes or ([] if args.url else default_processes())
    args.scenario = args.scenario or (SWEEP_SCENARIOS if args.sweep else DEFAULT_SCENARIOS)
    if args.duration is None and args.requests is None:
        args.duration = 5.0 if args.sweep else 10.0
    if args.warmup is None:
        args.warmup = 1.0 if args.sweep else 3.0
    args.steps = args.sweep or args.concurrency
    args.credentials = read_users(p, args.users, max(args.steps)) if args.users else None
    return args


def read_users(parser, path, needed):
    """[(username, password)] from a CSV file; a bad file is an option error."""
    try:
        with open(path, newline="") as f:
            rows = [row for row in csv.reader(f) if row and any(cell.strip() for cell in row)]
    except OSError as e:
        parser.error(f"cannot read --users {path}: {e.strerror}")
    if rows and [c.strip().lower() for c in rows[0][:2]] == ["username", "password"]:
        rows = rows[1:]
    users = []
    for number, row in enumerate(rows, 1):
        if len(row) < 2 or not row[0].strip() or not row[1]:
            parser.error(f"--users {path}: row {number} is not username,password")
        users.append((row[0].strip(), row[1]))
    if len({u for u, _ in users}) < needed:
        parser.error(f"--users {path} has {len({u for u, _ in users})} distinct accounts; {needed} simulated "
                     "users need as many (each runs programs as its own student)")
    return users
