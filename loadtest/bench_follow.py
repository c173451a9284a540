"""Benchmark of open editors following saves made elsewhere: how long
after a save from "another computer" the student's open IDE hears of it.

    python -m loadtest.bench_follow [--students 60] [--duration 20]
                                    [--processes 1,2] [--server-root DIR] [--json OUT]

Each simulated student is a real user with two parts: an IDE (a /ws/run
socket that asked to `watch`, as the page does) and another computer (its
own keep-alive HTTP connection) that saves the student's file about once a
second (0.5-1.5 s apart, an autosave's pace), each save naming the version
it replaces. A save counts when the IDE receives the `files` message
holding that file's new version; the latency is from the save's request
to that message (the save itself included), and also from the save's
answer (what the notification adds). A save whose news does not come within
--timeout, or a refused save, is a failure, counted apart. With two
workers the IDE and the saving connection land on workers the kernel
picks, so most news crosses from one worker to the other through
PostgreSQL.
"""
import argparse
import asyncio
import contextlib
import json
import random
import sys
import time

from .cli import bounds, int_list, run_benchmark, say, server_root_option
from .harness import each_load, run_async
from .machine import describe
from .recording import Recorder, error_lines, fmt

PATH = "follow.py"


async def one_student(user, ide, duration, timeout, whole, after):
    """Save every ~second for `duration` s; time each save's news on `ide`."""
    from .client import error_kind
    waiting = {}  # etag -> (request sent, answer received or None)
    heard = asyncio.Event()

    async def listen():
        while True:
            message = await ide.receive(None)
            if message.get("type") != "files":
                continue
            now = time.perf_counter()
            for change in message.get("changes", []):
                sent = waiting.pop(change.get("etag"), None)
                if sent:
                    whole.success(now - sent[0])
                    after.success(now - (sent[1] or now))
            heard.set()

    listener = asyncio.ensure_future(listen())
    etag, n = "*", 0
    end = time.monotonic() + duration
    try:
        while time.monotonic() < end:
            n += 1
            started = time.perf_counter()
            try:
                resp, body = await user.put_file(PATH, f"# save {n}\nprint({n})\n", f'"{etag}"' if etag != "*" else "*")
            except Exception as e:
                whole.error(error_kind(e))
                await asyncio.sleep(1)
                continue
            if resp.status != 200:
                whole.error(f"http_{resp.status}")
                await asyncio.sleep(1)
                etag = "*"
                continue
            etag = json.loads(body)["etag"]
            answered = time.perf_counter()
            if etag not in waiting:
                waiting[etag] = (started, answered)
            await asyncio.sleep(random.uniform(0.5, 1.5))
        # The last saves' news may still be on the way.
        deadline = time.monotonic() + timeout
        while waiting and time.monotonic() < deadline:
            heard.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(heard.wait(), max(0.05, deadline - time.monotonic()))
    finally:
        listener.cancel()
    for _ in waiting:
        whole.error("news_never_came")


async def run_follow(url, logins, duration, timeout):
    from .client import VirtualUser, log_in_all  # the HTTP client only to measure (--help loads none)
    from .run_client import open_ides
    whole, after = Recorder(), Recorder()
    async with contextlib.AsyncExitStack() as stack:
        users, failed = await log_in_all(lambda: VirtualUser(url, timeout), logins, stack)
        for kind, n in failed.items():
            whole.errors[f"login_{kind}"] += n
        ides, failed = await open_ides(url, users, stack, timeout)
        for kind, n in failed.items():
            whole.errors[f"socket_{kind}"] += n
        for ide in ides:
            await ide.send(type="watch")
        await asyncio.sleep(1.0)  # the sockets are watching
        started = time.monotonic()
        await asyncio.gather(*(one_student(user, ide, duration, timeout, whole, after)
                               for user, ide in zip(users, ides)))
        wall = time.monotonic() - started
    return {**whole.summary(wall), "after_answer": after.summary()}


def measure(args, deadline):
    def one(server, logins, processes, count):
        say(f"  {processes} process(es), {count} students saving for {args.duration} s ...")
        return {"students": count, **run_async(run_follow(server.url, logins, args.duration, args.timeout), deadline)}

    return each_load("bench-follow", args.processes, [args.students], one, ASSIST_PROCESSES=0)


def report(settings, info, results):
    lines = [f"a save from another computer → the open IDE hears of it ({settings['students']} students, "
             f"each saving about once a second for {settings['duration']} s)",
             f"{'processes':>9}  {'saves':>6}  {'errors':>6}  {'p50 ms':>7}  {'p95 ms':>7}  {'p99 ms':>7}  "
             f"{'max ms':>7}  {'after the answer p50/p95 ms':>28}"]
    for r in results:
        a = r["after_answer"]
        lines.append(f"{r['processes']:>9}  {r['count']:>6}  {r['errors']:>6}  {fmt(r['p50_ms'], '7.1f')}  "
                     f"{fmt(r['p95_ms'], '7.1f')}  {fmt(r['p99_ms'], '7.1f')}  {fmt(r['max_ms'], '7.1f')}  "
                     f"{fmt(a['p50_ms'], '13.1f')} / {fmt(a['p95_ms'], '.1f')}")
    for r in results:
        lines += error_lines(f"{r['processes']} process(es)", r["errors_by_kind"])
    lines.append(describe(info))
    lines.append("the load generator runs on the same machine and competes with the server for CPU")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_follow", description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int_list, default=[1, 2], help="worker process counts (default 1,2)")
    parser.add_argument("--students", type=int, default=60, help="students saving at once (default 60)")
    parser.add_argument("--duration", type=float, default=20, help="seconds of saving (default 20)")
    server_root_option(parser)
    bounds(parser, max_seconds=900)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    settings = {"students": args.students, "duration": args.duration, "processes": args.processes}
    results, status = run_benchmark(args, measure, lambda info, results: report(settings, info, results),
                                    lambda: settings)
    if status is not None:
        return status
    return 1 if any(r["errors"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
