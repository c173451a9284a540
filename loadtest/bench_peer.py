"""PyClassroom against its peer, Jupyter Server, in one sitting, with the
same client: files (save + load) and runs (run -> first output).

    python -m loadtest.bench_peer [--processes 1,2] [--files 60,600]
                                  [--runs 10,30] [--duration 10] [--think 1]
                                  [--servers pyclassroom,jupyter]
                                  [--server-root DIR] [--json OUT]

Jupyter Server and ipykernel (pinned in loadtest/jupyter.py) are installed
into a scratch virtualenv the first time, cached under
~/.cache/pyclassroom-peer/ (--peer-cache), never into the project's. Each
server runs on 127.0.0.1: PyClassroom with each of --processes on a fresh
database and data folder (SANDBOX=local), Jupyter with a token and a
scratch root folder. The same aiohttp client, the same recorder (HDR
histograms) and the same closed loops measure both:

- files, at each of --files students for --duration s: every student saves
  its own 2-4 KiB file and loads it back, over and over; only the very
  text saved counts as a success. PyClassroom: PUT /api/files/home/<f>
  with If-Match, GET. Jupyter: PUT /api/contents/<f> {"type": "file",
  "format": "text", "content": ...}, GET ?format=text.
- runs, at each of --runs students for --duration s: every student runs a
  one-line program, waits for it to end, thinks --think s (+-50%) and runs
  it again; what is timed is run -> first output. PyClassroom: the saved
  program over its IDE's /ws/run, once every IDE's warm sandbox is
  reported; Jupyter: a kernel per student (started and answering before
  the clock starts), execute_request over its channels WebSocket, timed
  to the first `stream` message.

--servers pyclassroom (or jupyter) measures one alone, without ratios
(and without installing Jupyter).

It prints every figure and the ratios PyClassroom / Jupyter (operations or
runs per second, p50 and p95), and, at every load, p99 / p50: how fair each
server is to the slowest of its students. Everything is bounded in time and
removed on exit, error or Ctrl-C. The load generator shares the machine
with the servers; its CPU share is printed.
"""
import argparse
import os
import sys
import time

from .cli import bounds, int_list, measured, say, server_root_option, write_json
from .machine import describe, machine, raise_file_limit
from .recording import error_lines, fmt

PROGRAM = 'print("hello from the benchmark")\n'
EXPECT = "hello from the benchmark"
PROGRAM_PATH = "peer_hello.py"
KERNEL_STARTS_AT_ONCE = 4  # ipykernel starts are CPU-bound: a few at a time


# -- runs ------------------------------------------------------------------------------

async def run_loop(actors, run_once, duration, think, server_pids):
    """Every actor (an IDE or a kernel) at once, for `duration` s: `run_once(actor)`
    (seconds to the first output), a pause of `think` s +-50%, again.
    Returns a summary dict."""
    import asyncio
    import random

    from . import loadgen
    from .client import error_kind
    from .machine import CpuWatch
    from .recording import CPU_WARNING, Recorder
    first = Recorder()

    async def student(actor):
        end = time.monotonic() + duration
        while time.monotonic() < end:
            try:
                first.success(await run_once(actor))
            except Exception as e:  # every failure is a counted error
                first.error(error_kind(e))
                await actor.recover(e)
            await asyncio.sleep(think * random.uniform(0.5, 1.5))

    watch = CpuWatch(server_pids).start()
    window = await loadgen.together(actors, student)
    s = first.summary()
    return {"students": len(actors), "runs": s["count"], "errors": s["errors"], "errors_by_kind": s["errors_by_kind"],
            **{f"first_output_{k}": s[k] for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms")},
            "runs_per_s": round(s["count"] / window.wall, 2) if window.wall else 0.0,
            "loadgen_cpu": round(window.cpu_share, 3), "loadgen_cpu_warning": window.cpu_share > CPU_WARNING,
            **watch.stop()}


async def pyclassroom_runs(url, credentials, duration, think, timeout, server_pids):
    """Log in, save the program, open every IDE, wait for the warm sandboxes, run."""
    import asyncio
    import contextlib

    import aiohttp

    from .run_phases import ides, log_in, save_everywhere
    from .server_metrics import sandbox_starts, wait_for_sandboxes
    async with contextlib.AsyncExitStack() as stack:
        users = await log_in(url, credentials, stack, timeout)
        await save_everywhere(users, PROGRAM_PATH, PROGRAM)
        metrics_http = await stack.enter_async_context(
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)))
        before, _ = await sandbox_starts(metrics_http, url)
        sockets = await ides(url, users, stack, timeout)
        if before is not None:
            await wait_for_sandboxes(metrics_http, url, before + len(sockets))
        await asyncio.sleep(1.0)

        async def first_output(sock):
            return (await sock.checked_run(PROGRAM_PATH, EXPECT))["first"]
        return await run_loop(sockets, first_output, duration, think, server_pids)


async def jupyter_runs(server, count, duration, think, timeout):
    """A kernel per student, started (KERNEL_STARTS_AT_ONCE at a time) and
    answering before the clock starts; then the runs; then the kernels go."""
    import asyncio
    import contextlib

    from .jupyter import KernelStudent, kernels_session
    gate = asyncio.Semaphore(KERNEL_STARTS_AT_ONCE)
    async with contextlib.AsyncExitStack() as stack:
        http = await stack.enter_async_context(kernels_session(server, timeout))
        kernels = [KernelStudent(http, server, timeout) for _ in range(count)]
        stack.push_async_callback(lambda: asyncio.gather(*(k.close() for k in kernels)))

        async def start(kernel):
            async with gate:
                await kernel.open()
        async with asyncio.timeout(60 + 10 * count):
            await asyncio.gather(*(start(k) for k in kernels))
        return await run_loop(kernels, lambda k: k.first_output(PROGRAM, EXPECT), duration, think, [server.proc.pid])


# -- files -----------------------------------------------------------------------------

async def jupyter_files(server, count, duration, timeout):
    import contextlib

    from .bench_files import save_and_load
    from .jupyter import ContentsStudent, browser
    async with contextlib.AsyncExitStack() as stack:
        students = [ContentsStudent(await stack.enter_async_context(browser(server, timeout)), server,
                                    f"student{i:04d}-{count}.txt", f"student{i:04d}") for i in range(count)]
        return await save_and_load(students, duration)


# -- both servers ----------------------------------------------------------------------

def measure(args, deadline):
    """Every server, every load; returns the results (a dict per measurement)."""
    from server import config

    from .bench_files import run_students
    from .harness import fresh_server, make_credentials, run_async, scratch
    from .jupyter import JupyterServer, install
    from .machine import CpuWatch
    from .run_phases import sandbox_problem
    python = install(args.peer_cache) if "jupyter" in args.servers else None
    no_runs = sandbox_problem("local", config.load()) if args.runs and "pyclassroom" in args.servers else None
    if no_runs:
        say(f"skipping the runs: {no_runs}")
    runs = [] if no_runs else args.runs
    results = []

    def files(server, pids, label, count, measure_one):
        say(f"  {label}: files, {count} students for {args.duration:g} s ...")
        watch = CpuWatch(pids).start()
        summary = run_async(measure_one(), deadline)
        results.append({"server": label, "kind": "files", **summary, **watch.stop()})

    with scratch("pyclassroom-bench-peer-") as (base, pg):
        if "pyclassroom" in args.servers:
            say("starting PostgreSQL and hashing passwords ...")
            admin_dsn = pg.start()
            credentials = make_credentials(max(args.files + runs))
        for processes in args.processes if "pyclassroom" in args.servers else []:
            label = f"PyClassroom {processes}w"
            with fresh_server(admin_dsn, base, processes, credentials, f"bench_peer_{processes}p",
                              SANDBOX="local", RUN_MAX_CONCURRENT="200",
                              RUN_QUEUE_MAX="200") as (server, logins):
                for count in args.files:
                    files(server, server.pids, label, count, lambda: run_students(
                        server.url, logins[:count], args.duration, f"peer-{count}.py", args.timeout))
                for count in runs:
                    say(f"  {label}: runs, {count} students for {args.duration:g} s ...")
                    summary = run_async(pyclassroom_runs(server.url, logins[:count], args.duration, args.think,
                                                         args.timeout, server.pids), deadline)
                    results.append({"server": label, "kind": "runs", **summary})
                server.ensure_running()
        if python is None:
            return results, no_runs
        root = os.path.join(base, "jupyter-root")
        os.makedirs(root)
        jupyter = JupyterServer(python, root).start()
        try:
            for count in args.files:
                files(jupyter, [jupyter.proc.pid], "Jupyter", count,
                      lambda: jupyter_files(jupyter, count, args.duration, args.timeout))
            for count in runs:
                say(f"  Jupyter: runs, {count} students for {args.duration:g} s ...")
                summary = run_async(jupyter_runs(jupyter, count, args.duration, args.think, args.timeout), deadline)
                results.append({"server": "Jupyter", "kind": "runs", **summary})
        finally:
            jupyter.stop()
    return results, no_runs


# -- report ----------------------------------------------------------------------------

def ratios(results):
    """[(kind, students, PyClassroom label, {figure: ours / Jupyter's})]."""
    peer = {(r["kind"], r["students"]): r for r in results if r["server"] == "Jupyter"}
    figures = {"files": ("ops_per_s", "op_p50_ms", "op_p95_ms", "op_p99_ms"),
               "runs": ("runs_per_s", "first_output_p50_ms", "first_output_p95_ms")}
    out = []
    for r in results:
        theirs = peer.get((r["kind"], r["students"]))
        if r["server"] != "Jupyter" and theirs:
            out.append((r["kind"], r["students"], r["server"],
                        {f: round(r[f] / theirs[f], 2) for f in figures[r["kind"]] if r[f] and theirs[f]}))
    return out


def fairness(result):
    """p99 / p50 of one measurement (1.0: the slowest student is served as the median one)."""
    p50, p99 = (result["op_p50_ms"], result["op_p99_ms"]) if result["kind"] == "files" else \
        (result["first_output_p50_ms"], result["first_output_p99_ms"])
    return round(p99 / p50, 2) if p50 and p99 else None


def report(args, info, results, no_runs):
    lines = [f"files: each student saves its own 2-4 KiB file and loads it back, closed loop, {args.duration:g} s "
             "(op = a save or a load)",
             f"{'server':<16}{'students':>8}{'ops/s':>9}{'p50':>8}{'p95':>8}{'p99':>8}{'max':>9}{'p99/p50':>8}"
             f"{'errors':>7}{'srv cpu':>8}{'gen cpu':>8}"]
    for r in (r for r in results if r["kind"] == "files"):
        lines.append(f"{r['server']:<16}{r['students']:>8}{r['ops_per_s']:>9.1f}{fmt(r['op_p50_ms']):>8}"
                     f"{fmt(r['op_p95_ms']):>8}{fmt(r['op_p99_ms']):>8}"
                     f"{fmt(max(r['save_max_ms'] or 0, r['load_max_ms'] or 0)):>9}"
                     f"{fmt(fairness(r), '.2f'):>8}{r['errors']:>7}{fmt(r['server_cpu'], '.0%'):>8}"
                     f"{r['loadgen_cpu']:>8.0%}")
    if no_runs:
        lines.append(f"runs: skipped ({no_runs})")
    elif args.runs:
        lines += ["", f"runs: each student runs a one-line program, waits for its end, thinks {args.think:g} s "
                  f"+-50%, again; timed: run -> first output; {args.duration:g} s",
                  f"{'server':<16}{'students':>8}{'runs/s':>9}{'p50':>8}{'p95':>8}{'p99':>8}{'max':>9}"
                  f"{'p99/p50':>8}{'errors':>7}{'srv cpu':>8}{'gen cpu':>8}"]
        for r in (r for r in results if r["kind"] == "runs"):
            lines.append(f"{r['server']:<16}{r['students']:>8}{r['runs_per_s']:>9.1f}"
                         f"{fmt(r['first_output_p50_ms']):>8}{fmt(r['first_output_p95_ms']):>8}"
                         f"{fmt(r['first_output_p99_ms']):>8}{fmt(r['first_output_max_ms']):>9}"
                         f"{fmt(fairness(r), '.2f'):>8}{r['errors']:>7}{fmt(r['server_cpu'], '.0%'):>8}"
                         f"{r['loadgen_cpu']:>8.0%}")
    if ratios(results):
        lines += ["", "PyClassroom / Jupyter (throughput: higher is better; latency: lower is better):"]
    for kind, count, server, figures in ratios(results):
        lines.append(f"  {kind} {count:>4} students, {server}: "
                     + ", ".join(f"{f.removesuffix('_ms')} {v:.2f}x" for f, v in figures.items()))
    lines.append("")
    for r in results:
        where = f"{r['server']}, {r['kind']}, {r['students']} students"
        if r.get("setup_errors"):
            lines.append(f"setup errors (students left out), {where}: {r['setup_errors']}")
        lines += error_lines(where, r["errors_by_kind"])
        if r["loadgen_cpu_warning"]:
            lines.append(f"WARNING, {where}: the load generator used {r['loadgen_cpu']:.0%} of a core; "
                         "it may be the bottleneck")
    if "jupyter" in args.servers:
        from .jupyter import IPYKERNEL, JUPYTER_SERVER
        lines.append(f"peer: jupyter_server {JUPYTER_SERVER}, ipykernel {IPYKERNEL}")
    if args.server_root:
        lines.append(f"PyClassroom's server ran from {args.server_root}")
    lines.append("srv cpu: the server's processes (not kernels or sandboxes), of one core")
    lines.append(describe(info))
    lines.append("the load generator runs on the same machine and competes with the servers for CPU")
    return "\n".join(lines)


# -- main ------------------------------------------------------------------------------

SERVERS = ("pyclassroom", "jupyter")


def servers(text):
    """argparse type: "pyclassroom,jupyter", either or both."""
    chosen = tuple(name for name in SERVERS if name in text.split(","))
    if not chosen or set(text.split(",")) - set(SERVERS):
        raise argparse.ArgumentTypeError(f"expected pyclassroom, jupyter or both, not {text!r}")
    return chosen

def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_peer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int_list, default=[1, 2],
                        help="PyClassroom worker process counts (default 1,2)")
    parser.add_argument("--files", type=lambda t: [] if t in ("", "0") else int_list(t), default=[60, 600],
                        help="students saving and loading at once (default 60,600; 0: no files)")
    parser.add_argument("--runs", type=lambda t: [] if t in ("", "0") else int_list(t), default=[10, 30],
                        help="students running programs at once (default 10,30; 0: no runs)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of each measurement (default 10)")
    parser.add_argument("--think", type=float, default=1.0,
                        help="seconds a student waits between runs, +-50%% (default 1)")
    parser.add_argument("--servers", type=servers, default=SERVERS,
                        help="which servers to measure (default pyclassroom,jupyter; one alone: no ratios)")
    parser.add_argument("--peer-cache", default=None,
                        help="folder of the peer's virtualenvs (default ~/.cache/pyclassroom-peer)")
    server_root_option(parser)
    bounds(parser, max_seconds=3600, what="request or run")
    args = parser.parse_args(argv)
    if args.duration <= 0 or args.think < 0:
        parser.error("--duration must be positive and --think at least 0")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    raise_file_limit()
    deadline = time.monotonic() + args.max_seconds
    measurement, status = measured(lambda: measure(args, deadline))
    if status is not None:
        return status
    results, no_runs = measurement
    info = machine()
    print(report(args, info, results, no_runs))
    if args.json:
        from .jupyter import IPYKERNEL, JUPYTER_SERVER
        settings = {k: getattr(args, k) for k in ("servers", "processes", "files", "runs", "duration", "think",
                                                  "timeout", "server_root")}
        settings.update({"program": PROGRAM, "jupyter_server": JUPYTER_SERVER, "ipykernel": IPYKERNEL})
        write_json(args.json, {"settings": settings, "machine": info, "results": results, "runs_skipped": no_runs,
                               "ratios": [{"kind": k, "students": n, "server": s, **f}
                                          for k, n, s, f in ratios(results)]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
