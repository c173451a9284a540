"""Benchmark: a runner lost in the middle of a class. How long its students
wait to be told, and how long their next run takes to start elsewhere.

    python -m loadtest.bench_runner_loss [--students 20] [--runners 2]
                                         [--repeat 3] [--how kill,freeze] [--json OUT]

Per repeat, on a fresh server (one worker, SANDBOX=remote) with --runners
runner processes of the local kind (loadtest.harness.RunnerProcess): every
student opens the IDE and runs a program that prints a line and sleeps;
once every student has its line, the runner holding the most sandboxes is
lost: `kill`, SIGKILL (its kernel closes its sockets at once), or
`freeze`, SIGSTOP (its sockets stay open and silent, as a host cut off the
network leaves them: only the missing pongs tell). Measured from then:
when each of its students gets the run's end (the target: within 3 s,
the ping interval and timeout of runs/sandbox/remote.py), and with what
reason; then each of them presses Run again, timed to the first output
(a new sandbox on a runner that is left), and every student's file saved
before is read back. The students on the other runners must not be told
anything, and no acknowledged save may be lost. Bounded: --timeout per wait,
--max-seconds for all; everything started is stopped on the way out.
"""
import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections import Counter

from .cli import Aborted, bounds, run_benchmark, say, server_root_option
from .client import save_file
from .recording import fmt, recorded

WAITING = "print('waiting', flush=True)\nimport time\ntime.sleep(600)\n"
AGAIN = "print('again', flush=True)\n"
QUIET_SECONDS = 1.0  # after the last of the victim's students is told: nobody else should be


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_runner_loss",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=20, help="students running a program (default 20)")
    parser.add_argument("--runners", type=int, default=2, help="runner processes, at least 2 (default 2)")
    parser.add_argument("--repeat", type=int, default=3, help="losses of each kind, each on a fresh server (default 3)")
    parser.add_argument("--how", default="kill,freeze", help="how a runner is lost: kill, freeze or both (default)")
    server_root_option(parser)
    bounds(parser, max_seconds=600, what="wait")
    args = parser.parse_args(argv)
    if args.students < 1 or args.runners < 2 or args.repeat < 1:
        parser.error("--students and --repeat must be at least 1, --runners at least 2 (one must be left)")
    args.how = [h.strip() for h in args.how.split(",") if h.strip()]
    if not args.how or set(args.how) - {"kill", "freeze"}:
        parser.error("--how takes kill, freeze or both, separated by a comma")
    return args


async def one_kill(how, url, credentials, runners, timeout):
    """Lose the busiest of `runners` (`how`: kill or freeze) under the
    running programs of `credentials`' students: {"students_on_victim",
    "told_s", "reasons", "words" (what its students read), "others_told",
    "rerun_first_output_s", "rerun_errors", "saves_lost" (of the notes each
    saved before, acknowledged)}."""
    from .run_phases import ides, log_in, save_everywhere
    async with contextlib.AsyncExitStack() as stack:
        users = await log_in(url, credentials, stack, timeout)
        await save_everywhere(users, "wait.py", WAITING)
        await save_everywhere(users, "again.py", AGAIN)
        await asyncio.gather(*(save_file(user, "notes.txt", f"kept by {user.username}") for user in users))
        sockets = await ides(url, users, stack, timeout)
        for sock in sockets:
            await sock.send(type="run", path="wait.py")
        await asyncio.gather(*(sock.until("output", timeout) for sock in sockets))
        victim = max(runners, key=lambda r: r.sandboxes())
        had = victim.sandboxes()  # one per running program: none is ready for a next run yet
        lost_at = time.monotonic()
        os.kill(victim.proc.pid, signal.SIGKILL if how == "kill" else signal.SIGSTOP)
        waiting = {asyncio.ensure_future(sock.until("exit", timeout)): sock for sock in sockets}
        told, reasons, words = {}, {}, set()
        while len(told) < had:
            done, _ = await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                raise Aborted(f"{had - len(told)} students on the lost runner were not told within {timeout} s")
            for task in done:
                told[waiting.pop(task)] = time.monotonic() - lost_at
                said = task.result()
                reasons[said.get("reason")] = reasons.get(said.get("reason"), 0) + 1
                words.add(said.get("message"))
        await asyncio.sleep(QUIET_SECONDS)
        others_told = sum(task.done() for task in waiting)
        for task, sock in waiting.items():
            task.cancel()
            await sock.send(type="kill")
        if how == "freeze":
            os.kill(victim.proc.pid, signal.SIGKILL)
        rerun, rerun_errors = [], 0
        for sock in told:
            started = time.monotonic()
            await sock.send(type="run", path="again.py")
            await sock.until("output", timeout)
            rerun.append(time.monotonic() - started)
            rerun_errors += (await sock.until("exit", timeout)).get("reason") != "ok"
        saves_lost = 0
        for user in users:
            resp, body = await user.request("GET", "/api/files/home/notes.txt")
            saves_lost += resp.status != 200 or json.loads(body).get("content") != f"kept by {user.username}"
        return {"how": how, "students_on_victim": had, "told_s": sorted(told.values()), "reasons": reasons,
                "words": sorted(w for w in words if w), "others_told": others_told,
                "rerun_first_output_s": rerun, "rerun_errors": rerun_errors, "saves_lost": saves_lost}


def measure(args, deadline):
    from .harness import fresh_server, make_credentials, run_async, scratch
    from .run_phases import runners as started_runners
    settings = {"SANDBOX": "remote", "RUN_MAX_CONCURRENT": str(args.students * 2),
                "RUN_QUEUE_MAX": str(args.students * 2), "RUN_WALL_SECONDS": "900", "RUN_IDLE_SECONDS": "900"}
    kills = []
    with scratch("pyclassroom-bench-runner-loss-") as (base, pg):
        admin_dsn = pg.start()
        credentials = make_credentials(args.students)
        for how in args.how:
            for i in range(args.repeat):
                say(f"{how} {i + 1} of {args.repeat}: {args.runners} runners, {args.students} students ...")
                with started_runners(args.runners, base, settings) as (remote, runners), \
                        fresh_server(admin_dsn, base, 1, credentials, "bench_runner_loss", **settings, **remote) \
                        as (server, logins):
                    kills.append(run_async(one_kill(how, server.url, logins, runners, args.timeout), deadline))
    return kills


def report(info, kills):
    lines = []
    for how in dict.fromkeys(k["how"] for k in kills):
        mine = [k for k in kills if k["how"] == how]
        told = recorded(t for k in mine for t in k["told_s"])
        rerun = recorded(t for k in mine for t in k["rerun_first_output_s"])
        reasons = Counter()
        for k in mine:
            reasons.update(k["reasons"])
        what = "killed (SIGKILL)" if how == "kill" else "frozen (SIGSTOP: its sockets open and silent)"
        lines += [f"{how}: {len(mine)} runner(s) {what} under running programs; students on it: "
                  + ", ".join(str(k["students_on_victim"]) for k in mine),
                  f"  told the run ended, from then: p50 {fmt(told['p50_ms'])} ms, p95 {fmt(told['p95_ms'])} ms, "
                  f"max {fmt(told['max_ms'])} ms (target: within 3000 ms)",
                  "  reasons: " + ", ".join(f"{r} {n}" for r, n in sorted(reasons.items())),
                  f"  students on the other runners told anything: {sum(k['others_told'] for k in mine)} (target 0); "
                  f"acknowledged saves lost: {sum(k['saves_lost'] for k in mine)} (target 0)",
                  f"  Run again, to the first output (a new sandbox on a runner left): "
                  f"p50 {fmt(rerun['p50_ms'])} ms, max {fmt(rerun['max_ms'])} ms, "
                  f"{sum(k['rerun_errors'] for k in mine)} not ok"]
    lines.append(f"machine: {info['cpus']} CPUs, the load generator on the same machine")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    _, status = run_benchmark(args, measure, report, lambda: vars(args))
    return status or 0


if __name__ == "__main__":
    sys.exit(main())
