"""A class presses Run together on a host whose CPUs are already busy: how
many runs start, finish, fail or wait, and at what load (issue 30, item 9).

    python -m loadtest.bench_busy [--students 30] [--hogs N] [--processes 1]
                                  [--server-root DIR] [--json OUT]

One fresh server (SANDBOX=local with SANDBOX_CPU=idle, the production
default: an older server ignores the setting; RUN_MAX_CONCURRENT above the
class, so only the sandboxes' starts can make a run wait) and --students
real students, each with SAVED_PROGRAM saved. Then --hogs busy loops
(default two per CPU), ordinary processes at normal priority beside the
server, as the browsers and load generators were when the issue saw load
14-38 on 2 cores; after --spin-up seconds the whole class opens its IDE
socket at once (each socket makes the server start a sandbox ahead of
need) and every student presses Run at once on the saved program.

Each run is read until its `exit` or `error` (at most --timeout seconds,
default 120): started (a `started` came), finished ok (reason `ok` and the
program's line on stdout), or failed, by kind (`refused_<code>` for an
`error` such as sandbox_failed, `exit_<reason>`, `wrong_output`,
`no_answer` when neither came in time, a socket's kind when it broke or
never opened). Waited: the students who got a `queued` message, by line
(`start`: their sandbox waited to start; `run`: a place among the running
programs; an older server's `queued` names no line, and only had the
runs'). Times from sending `run`: → `started`, → `exit`; and from the
moment the class began opening its sockets to `started`. The 1-minute load
average is read when the class presses Run and when the last run is over,
and the tasks running or ready to run (/proc/loadavg) every 0.5 s between;
the server's /api/status `sandbox_starts` (waiting, retried, failed by
reason) is read after, signed in as the admin, when the server has it; its
log's ERROR and WARNING records are counted.

The busy loops end themselves after --max-seconds even if this script is
killed, and are killed on every way out; everything else (server,
PostgreSQL, folders) is removed on exit, error or Ctrl-C. The exit status
is 1 when any run failed (the report is printed all the same).
"""
import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections import Counter

from .cli import Aborted, bounds, run_benchmark, say, server_root_option, uninterrupted

PROGRAM_PATH = "busy_hello.py"
EXPECTED = "hello from a busy host 42"
SAVED_PROGRAM = 'print("hello from a busy host", 6 * 7)\n'
HOG = "import time\nend = time.monotonic() + {seconds:.0f}\nwhile time.monotonic() < end:\n    pass\n"
RUN_TIMEOUT = 120.0
LINES = ("start", "run")  # the lines a run may wait in (docs/run-protocol.md, `queued`)


# -- the busy host ------------------------------------------------------------------------

@contextlib.contextmanager
def busy_loops(count, seconds):
    """`count` busy loops at normal priority, each ending by itself after
    `seconds` (a bound should this script be killed), all killed on the
    way out however it goes."""
    hogs = []
    try:
        for _ in range(count):
            hogs.append(subprocess.Popen([sys.executable, "-c", HOG.format(seconds=seconds)],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL))
        yield hogs
    finally:
        with uninterrupted():
            for hog in hogs:
                hog.kill()
            for hog in hogs:
                hog.wait(10)


def load_average():
    return round(os.getloadavg()[0], 2)


def runnable():
    """Tasks running or waiting for a CPU on the host right now (the 1-minute
    average lags behind a burst by tens of seconds), less this reader."""
    with open("/proc/loadavg") as f:
        return int(f.read().split()[3].split("/")[0]) - 1


async def sample_runnable(samples, every=0.5):
    """Append `runnable()` to `samples` every `every` s until cancelled."""
    while True:
        samples.append(runnable())
        await asyncio.sleep(every)


# -- one student's Run --------------------------------------------------------------------

async def press_run(sock, timeout, opened):
    """Run PROGRAM_PATH on this open IDE and read until its `exit` or
    `error`: {"outcome": "ok" or the failure's kind, "started_s", "exit_s"
    (from sending `run`; None when none came), "opened_s" (from `opened`,
    the perf_counter() when the class began opening the IDE, to `started`:
    Run pressed on a socket that took long to open may find its sandbox
    ready), "lines": the lines it was
    queued in, "largest_place", "first_estimate" (s, the first `queued`
    message's, with its time from `run`: what the student was promised),
    "said": the error's or exit's words}."""
    from .client import error_kind
    seen = {"outcome": None, "started_s": None, "opened_s": None, "exit_s": None, "lines": set(),
            "largest_place": None,
            "first_estimate": None, "said": ""}
    out = []
    began = time.perf_counter()
    deadline = time.monotonic() + timeout
    try:
        await sock.send(type="run", path=PROGRAM_PATH, cols=80, rows=24)
        while seen["outcome"] is None:
            message = await sock.receive(deadline - time.monotonic())
            kind = message.get("type")
            if kind == "queued":
                seen["lines"].add(message.get("line", "run"))  # an older server's only line: the runs'
                place = message.get("position")
                if isinstance(place, int):
                    seen["largest_place"] = max(place, seen["largest_place"] or 0)
                estimate = message.get("estimate")
                if seen["first_estimate"] is None and isinstance(estimate, (int, float)):
                    seen["first_estimate"] = time.perf_counter() - began + estimate
            elif kind == "started":
                seen["started_s"] = time.perf_counter() - began
                seen["opened_s"] = time.perf_counter() - opened
            elif kind == "output" and message.get("stream") == "stdout":
                out.append(message.get("data", ""))
            elif kind == "exit":
                seen["exit_s"] = time.perf_counter() - began
                reason = message.get("reason")
                seen["said"] = message.get("message", "")
                if reason != "ok":
                    seen["outcome"] = f"exit_{reason}"
                else:
                    seen["outcome"] = "ok" if EXPECTED in "".join(out) else "wrong_output"
            elif kind == "error":
                seen["outcome"] = f"refused_{message.get('error')}"
                seen["said"] = message.get("message", "")
    except asyncio.TimeoutError:
        seen["outcome"] = "no_answer"
        with contextlib.suppress(Exception):
            await sock.send(type="kill")
    except Exception as e:  # a socket that broke: a counted failure
        seen["outcome"] = error_kind(e)
    return seen


async def sandbox_starts_status(url, password, timeout):
    """/api/status's `sandbox_starts`, signed in as the admin; None when this
    server does not report it (an older one), or could not be asked (then
    `status_error` says why)."""
    import json

    from .client import VirtualUser, error_kind
    try:
        async with VirtualUser(url, timeout) as admin:
            await admin.sign_in("admin", password)
            resp, body = await admin.request("GET", "/api/status")
            if resp.status != 200:
                return None, f"http_{resp.status}"
            return json.loads(body).get("sandbox_starts"), None
    except Exception as e:
        return None, error_kind(e)


async def the_class(server, logins, args):
    """Everything measured on one server: returns the figures."""
    from .machine import CpuWatch
    from .recording import Recorder
    from .run_client import open_ides
    from .run_phases import log_in, save_everywhere
    async with contextlib.AsyncExitStack() as stack:
        say(f"  {len(logins)} students sign in and save {PROGRAM_PATH} ...")
        users = await log_in(server.url, logins, stack, args.timeout)
        await save_everywhere(users, PROGRAM_PATH, SAVED_PROGRAM)
        with busy_loops(args.hogs, args.max_seconds + 60) as hogs:
            say(f"  {args.hogs} busy loops; the class opens the IDE and presses Run in {args.spin_up:g} s ...")
            await asyncio.sleep(args.spin_up)
            load_start = load_average()
            watch = CpuWatch(server.pids).start()
            began, opened = time.monotonic(), time.perf_counter()
            queue_lengths = [runnable()]
            sampler = asyncio.ensure_future(sample_runnable(queue_lengths))
            try:
                sockets, open_failures = await open_ides(server.url, users, stack, args.timeout)
                runs = await asyncio.gather(*(press_run(s, args.timeout, opened) for s in sockets))
            finally:
                sampler.cancel()
            wall = time.monotonic() - began
            used = watch.stop()
            load_end = load_average()
        status, status_error = await sandbox_starts_status(server.url, server.env["ADMIN_PASSWORD"], args.timeout)
    started, since_open, exited = Recorder(), Recorder(), Recorder()
    failed, waited, said = Counter(), Counter(), {}
    for r in runs:
        if r["started_s"] is not None:
            started.success(r["started_s"])
            since_open.success(r["opened_s"])
        if r["exit_s"] is not None:
            exited.success(r["exit_s"])
        if r["outcome"] != "ok":
            failed[r["outcome"]] += 1
            said.setdefault(r["outcome"], r["said"])
        for line in r["lines"]:
            waited[line] += 1
    for kind, n in open_failures.items():
        failed[f"open_{kind}"] += n
    s, o, e = started.summary(), since_open.summary(), exited.summary()
    return {
        "students": len(users), "hogs": args.hogs, "hog_pids": [h.pid for h in hogs], "runs": len(users),
        "started": sum(r["started_s"] is not None for r in runs),
        "ok": sum(r["outcome"] == "ok" for r in runs), "failed": sum(failed.values()),
        "failed_by_kind": dict(sorted(failed.items())), "failures_said": said,
        "waited": sum(bool(r["lines"]) for r in runs), "waited_by_line": dict(sorted(waited.items())),
        "largest_place": max((r["largest_place"] for r in runs if r["largest_place"]), default=None),
        **promised(runs),
        **{f"started_{k}": s[k] for k in ("p50_ms", "p95_ms", "max_ms")},
        **{f"opened_started_{k}": o[k] for k in ("p50_ms", "p95_ms", "max_ms")},
        **{f"exit_{k}": e[k] for k in ("p50_ms", "p95_ms", "max_ms")},
        "wall_s": round(wall, 1), "load_average_start": load_start, "load_average_end": load_end,
        "runnable_p50": statistics.median(queue_lengths), "runnable_max": max(queue_lengths),
        "sandbox_starts": status, "status_error": status_error, **used,
    }


def promised(runs):
    """The runs told an estimate: the median start they were promised (from
    Run) against the median start they got, in seconds."""
    told = [r for r in runs if r["first_estimate"] is not None and r["started_s"] is not None]
    if not told:
        return {"estimated": 0, "estimate_p50_s": None, "estimated_started_p50_s": None}
    return {"estimated": len(told),
            "estimate_p50_s": round(statistics.median(r["first_estimate"] for r in told), 2),
            "estimated_started_p50_s": round(statistics.median(r["started_s"] for r in told), 2)}


def server_commit(root):
    """The short commit of the checkout the server ran from ("" if git cannot say)."""
    try:
        done = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def measure(args, deadline):
    from server import config

    from .harness import fresh_server, make_credentials, run_async, scratch, server_root
    from .run_phases import ServerLog, sandbox_problem
    problem = sandbox_problem("local", config.load())
    if problem:
        raise Aborted(f"this measurement needs the local sandbox: {problem}")
    log = ServerLog()
    with scratch("pyclassroom-bench-busy-") as (base, pg):
        say("starting PostgreSQL and hashing passwords ...")
        admin_dsn = pg.start()
        credentials = make_credentials(args.students)
        say(f"starting the server ({args.processes} worker process(es)) ...")
        with fresh_server(admin_dsn, base, args.processes, credentials, f"bench_busy_{args.processes}p", log,
                          SANDBOX="local", SANDBOX_CPU="idle", RUN_MAX_CONCURRENT=args.students + 16,
                          RUN_QUEUE_MAX=max(200, args.students)) as (server, logins):
            result = run_async(the_class(server, logins, args), deadline)
            server.ensure_running()
    root = server_root()
    return {"processes": args.processes, "server_root": root, "server_commit": server_commit(root),
            **result, "server_log_problems": dict(log.counts), "server_log_last_problems": list(log.problems)}


# -- the report ---------------------------------------------------------------------------

def report(info, r):
    from .machine import describe
    from .recording import fmt
    commit = f" at {r['server_commit']}" if r["server_commit"] else ""
    waited = ", ".join(f"{line} {r['waited_by_line'].get(line, 0)}" for line in LINES)
    lines = [f"a busy host: {r['students']} students open the IDE and press Run at once beside {r['hogs']} busy "
             f"loops; server {r['server_root']}{commit}, {r['processes']} worker process(es)",
             f"{'runs':>5} {'started':>8} {'ok':>5} {'failed':>7} {'waited':>7}  waited by line",
             f"{r['runs']:>5} {r['started']:>8} {r['ok']:>5} {r['failed']:>7} {r['waited']:>7}  {waited}",
             f"{'':<21} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}"]
    for key, label in (("started", "Run → started"), ("exit", "Run → exit"),
                       ("opened_started", "IDE opening → started")):
        lines.append(f"{label:<21} {fmt(r[f'{key}_p50_ms'], '8.0f')} {fmt(r[f'{key}_p95_ms'], '8.0f')} "
                     f"{fmt(r[f'{key}_max_ms'], '8.0f')}")
    lines.append(f"load average (1 min): {r['load_average_start']} when the class pressed Run, "
                 f"{r['load_average_end']} when the last run was over ({r['wall_s']:.1f} s later); tasks "
                 f"running or ready meanwhile (every 0.5 s): median {r['runnable_p50']:g}, most "
                 f"{r['runnable_max']}; all CPUs busy {fmt(r['machine_busy'], '.0%')}, the server's processes "
                 f"{fmt(r['server_cpu'], '.2f')} of a core")
    if r["failed_by_kind"]:
        lines.append("failed by kind: " + ", ".join(f"{k} {n}" for k, n in r["failed_by_kind"].items()))
        for kind, words in r["failures_said"].items():
            if words:
                lines.append(f"  {kind} said: {words}")
    if r["largest_place"]:
        lines.append(f"largest place in a line: {r['largest_place']}")
    if r["estimated"]:
        lines.append(f"{r['estimated']} runs were told an estimate: promised to start {r['estimate_p50_s']} s "
                     f"after Run, started {r['estimated_started_p50_s']} s after (medians)")
    if r["sandbox_starts"] is not None:
        lines.append(f"the server's /api/status sandbox_starts: {r['sandbox_starts']}")
    else:
        why = f" ({r['status_error']})" if r["status_error"] else ""
        lines.append(f"the server's /api/status has no sandbox_starts{why}")
    problems = r["server_log_problems"]
    lines.append("the server's log: " + (", ".join(f"{n} {level}" for level, n in sorted(problems.items()))
                                         if problems else "no ERROR or WARNING record"))
    lines.append(describe(info))
    lines.append("the busy loops, the students' client and the server share this machine")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_busy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=30, help="students pressing Run at once (default 30)")
    parser.add_argument("--hogs", type=int, default=2 * (os.cpu_count() or 1),
                        help="busy loops beside the server (default two per CPU)")
    parser.add_argument("--processes", type=int, default=1, help="server worker processes (default 1)")
    parser.add_argument("--spin-up", type=float, default=10.0,
                        help="seconds the busy loops run before the class presses Run (default 10)")
    server_root_option(parser)
    bounds(parser, max_seconds=900, what="run (from Run to its exit), or socket opening", timeout=RUN_TIMEOUT)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not 1 <= args.students <= 500 or not 0 <= args.hogs <= 64 or not 1 <= args.processes <= 16:
        parser.error("--students from 1 to 500, --hogs from 0 to 64, --processes from 1 to 16")
    if not 0 <= args.spin_up <= 120 or args.timeout <= 0:
        parser.error("--spin-up from 0 to 120 seconds, --timeout positive")
    settings = {k: getattr(args, k) for k in ("students", "hogs", "processes", "spin_up", "timeout", "max_seconds",
                                              "server_root")}
    settings["program"] = SAVED_PROGRAM
    result, status = run_benchmark(args, measure, report, lambda: settings)
    if status is not None:
        return status
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
