"""What the tools' command lines share. Standard library only: a script's
`--help` must come back without loading the HTTP client or the histogram
libraries, and efs_bench runs on a file server's host with nothing more."""
import argparse
import contextlib
import json
import os
import signal
import sys
import time

REQUEST_TIMEOUT = 30.0  # seconds a tool allows one request or run by default


class Aborted(Exception):
    """The tool cannot go on; the message says why."""


def int_list(text):
    """argparse type: "1,8,32" -> [1, 8, 32] (positive whole numbers)."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive whole numbers separated by commas, not {text!r}")
    return values


def bounds(parser, max_seconds, what="request", timeout=REQUEST_TIMEOUT):
    """The options every benchmark has: its time limits, and --json."""
    parser.add_argument("--timeout", type=float, default=timeout,
                        help=f"seconds allowed per {what} (default {timeout:g})")
    parser.add_argument("--max-seconds", type=float, default=max_seconds,
                        help=f"bound on the whole run (default {max_seconds:g})")
    parser.add_argument("--json", metavar="OUT", help="also write every figure and setting to this file")


SERVER_ROOT_VARIABLE = "LOADTEST_SERVER_ROOT"  # what harness.server_root reads


class _ServerRoot(argparse.Action):
    def __call__(self, parser, namespace, value, option_string=None):
        root = os.path.abspath(value)
        if not os.path.isfile(os.path.join(root, "server", "__main__.py")):
            parser.error(f"{option_string}: {value!r} is not a checkout of PyClassroom (no server/__main__.py)")
        os.environ[SERVER_ROOT_VARIABLE] = root
        setattr(namespace, self.dest, root)


def server_root_option(parser):
    """--server-root DIR: the server under test runs from that checkout. It
    sets LOADTEST_SERVER_ROOT, which every tool's harness reads (so the
    variable alone does the same for a tool without the option)."""
    parser.add_argument("--server-root", metavar="DIR", action=_ServerRoot,
                        default=os.environ.get(SERVER_ROOT_VARIABLE) or None,
                        help="measure the server of this checkout (e.g. a git worktree of an earlier commit; "
                             f"default: ${SERVER_ROOT_VARIABLE}, else this one)")


def say(text):
    """Progress for the operator, on stderr: stdout holds the report."""
    print(text, file=sys.stderr, flush=True)


def _terminate(signum, frame):
    raise KeyboardInterrupt


def clean_up_on_sigterm():
    """Make SIGTERM behave like Ctrl-C, so a tool's cleanup (its servers,
    its PostgreSQL, its temporary folders) runs when it is stopped either way."""
    signal.signal(signal.SIGTERM, _terminate)


@contextlib.contextmanager
def uninterrupted():
    """Cleanup that a second Ctrl-C or a SIGTERM must not cut short, leaving
    servers or PostgreSQL running (each step is bounded in time)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN), signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])


def measured(work):
    """Run `work()` (which measures and returns its results) the way every
    benchmark stops: (results, None), or (None, exit status) after saying
    why on stderr: 1 when it had to give up, 130 when interrupted (its
    cleanup has run by then)."""
    clean_up_on_sigterm()
    try:
        return work(), None
    except Aborted as e:
        print(f"error: {e}", file=sys.stderr)
        return None, 1
    except KeyboardInterrupt:
        print("interrupted; cleaned up", file=sys.stderr)
        return None, 130


def write_json(path, document):
    """Every figure and setting of a run, for --json (values json cannot
    name, such as paths, as text)."""
    with open(path, "w") as f:
        json.dump(document, f, indent=2, default=str)
        f.write("\n")


def run_benchmark(args, measure, report, settings, more=None):
    """The body every benchmark's main() shares: `measure(args, deadline)`
    within --max-seconds (stopping as `measured` does), print
    `report(machine info, results)`, and for --json write the settings
    (`settings()`), the machine, the results and `more(results)`.
    (results, None), or (None, the exit status)."""
    from .machine import machine, raise_file_limit  # machine.py imports this module
    raise_file_limit()
    deadline = time.monotonic() + args.max_seconds
    results, status = measured(lambda: measure(args, deadline))
    if status is not None:
        return None, status
    info = machine()
    print(report(info, results))
    if args.json:
        write_json(args.json, {"settings": settings(), "machine": info, "results": results,
                               **(more(results) if more else {})})
    return results, None
