"""Benchmark of saving and loading files with 1 and 2 worker processes.

    python -m loadtest.bench_files [--processes 1,2] [--students 60,600]
                                   [--duration 10] [--py-spy] [--server-root DIR] [--json OUT]

Each simulated student is a real user with its own browser (cookie jar and
keep-alive connection, `client.VirtualUser`). For --duration seconds every
student, all at once, loops: save its own file (PUT, 2-4 KiB of new random
text, If-Match of its last etag), then load it back (GET) and compare.
Only a verified answer is a success: a non-200, a wrong etag or different
content is an error, counted by kind, and adds no latency.

It brings up and tears down everything itself, also on Ctrl-C or an error:
an embedded PostgreSQL in a temporary folder, then per process count the
server as a subprocess on a fresh database and DATA_DIR, with
max(--students) real users (real argon2id hashes). Every request has a
timeout and the whole run is bounded by --max-seconds.

With --py-spy (pip install py-spy), the one-worker server is sampled
during each loop and its CPU per operation (a save or a load) is given
for the worker and for its file processes; the worker's is split into
the session check, PostgreSQL, JSON, Tornado and asyncio, and handing
calls to the file processes.

--server-root measures the server of another checkout (say, a worktree
of the commit before a change) with this client, for a before/after in
one sitting.

The load generator runs on the same machine and competes with the server
for CPU; its own CPU use is printed, with a warning near one core.
"""
import argparse
import sys
from collections import Counter

from .cli import Aborted, bounds, int_list, run_benchmark, say, server_root_option
from .machine import describe
from .recording import error_lines, fmt

FIGURES = ("save_p50_ms", "save_p95_ms", "save_p99_ms", "load_p50_ms", "load_p95_ms", "load_p99_ms",
           "ops_per_s")


async def run_students(url, credentials, duration, path, timeout, watch=None):
    """Log every student in, then `save_and_load` their files. Returns a summary dict."""
    # Here, not at the top: --help needs none of them (nor aiohttp, hdrh).
    import contextlib

    from .client import Student, VirtualUser, log_in_all
    async with contextlib.AsyncExitStack() as stack:
        users, setup_errors = await log_in_all(lambda: VirtualUser(url, timeout), credentials, stack)
        summary = await save_and_load([Student(user, path) for user in users], duration, watch)
    summary["setup_errors"] = dict(setup_errors + Counter(summary["setup_errors"]))
    return {**summary, "students": len(credentials)}


async def save_and_load(students, duration, watch=None):
    """Each student creates its file (untimed; this also warms the
    connections up), then the timed closed loop: save, load and compare.
    `students` save(), load() and resync() as `client.Student` does (or
    the peer's `jupyter.ContentsStudent`). `watch` (a `Profile`) looks at
    the server during the loop. Returns a summary dict."""
    import asyncio

    from . import loadgen
    from .client import error_kind
    from .recording import CPU_WARNING, Recorder
    saves, loads = Recorder(), Recorder()
    created, setup_errors = [], Counter()
    for student, outcome in zip(students, await asyncio.gather(*(s.save() for s in students),
                                                               return_exceptions=True)):
        if isinstance(outcome, Exception):
            setup_errors[error_kind(outcome)] += 1
        else:
            created.append(student)
    if not created:
        raise Aborted(f"no student could save: {dict(setup_errors)}")

    async def cycle(student):
        ok = await loadgen.timed(saves, student.save) and await loadgen.timed(loads, student.load)
        if not ok:
            await student.resync()

    # The cycle recorder is not reported: saves and loads record themselves.
    if watch:
        watch.start()
    window = await loadgen.closed_loop(created, cycle, Recorder(), iterations=None, duration=duration)
    s, l = saves.summary(), loads.summary()
    ops = saves.count + loads.count
    profile = watch.stop(ops) if watch else None
    both = Recorder().merge(saves).merge(loads)
    return {
        "students": len(students), "active_students": len(created), "setup_errors": dict(setup_errors),
        "saves": saves.count, "loads": loads.count, "errors": saves.error_count + loads.error_count,
        "errors_by_kind": {**{"save_" + k: n for k, n in s["errors_by_kind"].items()},
                           **{"load_" + k: n for k, n in l["errors_by_kind"].items()}},
        **{f"save_{k}": s[k] for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms")},
        **{f"load_{k}": l[k] for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms")},
        **{f"op_{k}": both.percentile_ms(p) for k, p in (("p50_ms", 50), ("p95_ms", 95), ("p99_ms", 99))},
        "wall_s": round(window.wall, 3), "ops_per_s": round(ops / window.wall, 1) if window.wall else 0.0,
        "loadgen_cpu": round(window.cpu_share, 3), "loadgen_cpu_warning": window.cpu_share > CPU_WARNING,
        "by_worker": dict(Counter(s["by_worker"]) + Counter(l["by_worker"])),
        **({"profile": profile} if profile else {}),
    }


# What a save + load costs the server, by part: each py-spy sample goes to
# the part that names its innermost frame (loadtest/profile.py).
PARTS = [("(waiting for events)", ("EpollSelector.select",)),
         ("session check", ("server/accounts/sessions.py",)),
         ("PostgreSQL (asyncpg, our pool)", ("asyncpg/", "server/db.py")),
         ("JSON", ("json/",)),
         ("handing calls to the file processes", ("server/files/processes.py", "server/files/child/")),
         ("Tornado and asyncio", ("tornado/", "asyncio/", "selectors.py"))]


class Profile:
    """The server's CPU per operation over the loop: the worker's, split
    into PARTS with py-spy, and its file processes'."""

    def __init__(self, pid):
        self.pid = pid

    def start(self):
        from .machine import file_processes, process_cpu
        from .profile import Sampler
        self.children = file_processes([self.pid])
        self.sampler = Sampler(self.pid)
        self.cpu = process_cpu([self.pid]), process_cpu(self.children)

    def stop(self, ops):
        from .machine import process_cpu
        from .profile import split
        worker, children = process_cpu([self.pid]) - self.cpu[0], process_cpu(self.children) - self.cpu[1]
        shares = split(self.sampler.stop(), PARTS)
        busy = 1 - shares.pop(PARTS[0][0], 0.0)
        per_op = worker * 1000 / ops if ops else 0.0
        parts = {part: round(per_op * share / busy, 3) for part, share in shares.items()} if busy else {}
        parts["file processes (the store's calls)"] = round(children * 1000 / ops, 3) if ops else 0.0
        return {"cpu_ms_per_op": round(per_op + parts["file processes (the store's calls)"], 3),
                "ms_per_op": parts}


def measure(args, deadline):
    """Per process count one server on a fresh database and DATA_DIR, every
    student count in turn. Returns the results."""
    from .harness import each_load, run_async

    def one(server, logins, processes, count):
        say(f"  {processes} process(es), {count} students for {args.duration:g} s ...")
        watch = Profile(server.pids[0]) if args.py_spy and processes == 1 else None
        # A new file name per run: every run starts by creating its files.
        summary = run_async(run_students(server.url, logins, args.duration, f"bench-{count}.py", args.timeout,
                                         watch), deadline)
        return {"worker_pids": server.pids, **summary}
    return each_load("bench-files", args.processes, args.students, one)


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


def report(args, info, results, file_bytes):
    lines = [f"file save + load, each student: PUT its own {file_bytes[0]}-{file_bytes[1]} byte file "
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
        lines += error_lines(where, r["errors_by_kind"])
        if r["loadgen_cpu_warning"]:
            lines.append(f"WARNING, {where}: the load generator used {r['loadgen_cpu']:.0%} of a core; "
                         "it may be the bottleneck, so latencies may be too high and ops/s too low")
        if r["processes"] > 1:
            lines.append(f"operations per worker, {where}: "
                         + ", ".join(f"pid {pid} {n}" for pid, n in sorted(r["by_worker"].items())))
    for r in results:
        if "profile" in r:
            p = r["profile"]
            lines.append(f"the server's CPU per operation, {r['students']} students, 1 process: "
                         f"{p['cpu_ms_per_op']:.2f} ms, of which (py-spy)")
            lines += [f"  {part:<45} {ms:6.3f} ms" for part, ms in sorted(p["ms_per_op"].items(), key=lambda i: -i[1])]
    for count, figures in ratios(results).items():
        lines.append(f"2 processes / 1 process, {count} students: "
                     + ", ".join(f"{f.removesuffix('_ms')} {v:.2f}" for f, v in figures.items()))
    lines.append(describe(info))
    lines.append("the load generator runs on the same machine and competes with the server for CPU")
    return "\n".join(lines)


# -- main --------------------------------------------------------------------------

def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_files",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int_list, default=[1, 2], help="worker process counts (default 1,2)")
    parser.add_argument("--students", type=int_list, default=[60, 600],
                        help="students saving and loading at once (default 60,600)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of each measurement (default 10)")
    parser.add_argument("--py-spy", action="store_true",
                        help="split the one-worker server's CPU per operation into parts (needs py-spy)")
    server_root_option(parser)
    bounds(parser, max_seconds=1200)
    args = parser.parse_args(argv)
    if args.duration <= 0:
        parser.error("--duration must be positive")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    from .client import FILE_BYTES
    _, status = run_benchmark(
        args, measure, lambda info, results: report(args, info, results, FILE_BYTES),
        lambda: {**{k: getattr(args, k) for k in ("processes", "students", "duration", "timeout", "server_root")},
                 "file_bytes": list(FILE_BYTES)},
        lambda results: {"ratio_2_to_1": {str(n): r for n, r in ratios(results).items()}})
    return status or 0


if __name__ == "__main__":
    sys.exit(main())
