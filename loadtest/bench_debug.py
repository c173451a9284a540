"""Benchmark of the debugger (server/runs/child/debugging.py): what it
costs a program that is not paused, and how fast a step answers with a
class debugging at once.

    python -m loadtest.bench_debug [--sandbox local] [--repeat 5] [--students 30]
                                   [--duration 20] [--think 0.3] [--json OUT]

One server is started as a subprocess on a fresh database and DATA_DIR,
with the product's RUN_MAX_CONCURRENT (--max-concurrent, default 16: fewer
than the students, as in a class; a paused program gives its place back).

CPU: a loop of 10^5 iterations (`total += i`, at the module's level and
inside a function) is run --repeat times in each way, and the program
measures its own CPU time (`time.process_time()`: the forked program's,
from its fork) around the loops and in all (with the debugger's start):
  plain     an ordinary `run`;
  debug     `debug`, then `continue` at the first pause, no breakpoint;
  debug+bp  the same with a breakpoint in a function that is never called
            (tracing stays on: only frames whose code holds a breakpoint
            report their lines);
  debug+bp@end  a breakpoint after the loop in the module's own frame: its
            lines are all reported (each costs a call of a small trace
            function), the worst case for a loop not paused.
The medians are reported, and their ratio to plain (target ≤ 3×).

Steps: --students students press Debug at once (the time to their first
pause is reported: a student whose program never pauses within --timeout
is an error, `never_paused`), then each debugs a program whose loop never
ends (paused at every line by `step`) for --duration seconds: send `step`,
time until the `paused` that answers it (a `queued` on the way counts in
it), wait --think seconds ±50%, again. A step that gets anything but a
`paused` is an error, counted by kind. The step times go into an HDR
histogram: p50/p95/p99 (target p95 ≤ 50 ms). Meanwhile one more student
runs a short program every second (not debugging): the time from `run` to
its `exit`, and how many of those runs had to wait in line, say whether a
class that debugs makes the others wait.
The load generator runs on the same machine and competes for its CPU; so
does anything else running there: the sandboxes have the lowest CPU
priority (an idle cgroup as root), so on a busy machine a step waits for
the CPU the other work leaves (the load average is printed with it).
"""
import argparse
import asyncio
import os
import random
import statistics
import sys
import time

from .cli import Aborted, bounds, clean_up_on_sigterm, say, write_json

LOOP = """import time
def never():
    return 0
def work():
    total = 0
    for i in range(100000):
        total += i
    return total
started = time.process_time()
total = 0
for i in range(100000):
    total += i
work()
print("CPU", time.process_time() - started, time.process_time())
"""
NEVER_LINE = 3  # `return 0` in never(): a breakpoint that is never hit
LAST_LINE = 14  # the print, in the loops' own frame: hit once, after them
STEPPED = "i = 0\nwhile True:\n    i += 1\n"
WAYS = {"plain": ("run", {}), "debug": ("debug", {}), "debug+bp": ("debug", {"bench_loop.py": [NEVER_LINE]}),
        "debug+bp@end": ("debug", {"bench_loop.py": [LAST_LINE]})}


async def cpu_of_one_run(rc, kind, breakpoints, timeout):
    """(CPU seconds of the loops, CPU seconds of the whole program)."""
    start = len(rc.messages)
    message = {"type": kind, "path": "bench_loop.py"}
    if kind == "debug":
        message["breakpoints"] = breakpoints
    await rc.send(**message)
    while True:
        m = await rc.receive(timeout)
        if m["type"] == "paused":
            await rc.send(type="continue")
        elif m["type"] == "exit":
            break
        elif m["type"] == "error":
            raise Aborted(f"the server refused a {kind}: {m['message']}")
    if m["reason"] != "ok":
        raise Aborted(f"a {kind} run ended with {m['reason']}: {m['message']}")
    out = "".join(x["data"] for x in rc.messages[start:] if x["type"] == "output" and x["stream"] == "stdout")
    _, loops, whole = out.split()[:3]
    return float(loops), float(whole)


async def measure_cpu(url, cookies, repeat, timeout):
    from .run_client import RunClient
    found = {way: [] for way in WAYS}
    async with RunClient(url, cookies, timeout=timeout) as rc:
        for kind, breakpoints in WAYS.values():  # a first run of each: the sandbox and the caches are warm
            await cpu_of_one_run(rc, kind, breakpoints, timeout)
        for _ in range(repeat):
            for way, (kind, breakpoints) in WAYS.items():
                found[way].append(await cpu_of_one_run(rc, kind, breakpoints, timeout))
    return found


async def stepping(url, cookies, duration, think, timeout, recorder, firsts):
    """One student: debug STEPPED, step for `duration` seconds."""
    from .run_client import RunClient
    async with RunClient(url, cookies, timeout=timeout, keep=False) as rc:
        sent = time.perf_counter()
        await rc.send(type="debug", path="bench_steps.py", breakpoints={})
        try:
            await rc.until("paused", timeout)
        except asyncio.TimeoutError:
            firsts.error("never_paused")
            return
        firsts.success(time.perf_counter() - sent)
        ends = time.monotonic() + duration
        while time.monotonic() < ends:
            await asyncio.sleep(think * random.uniform(0.5, 1.5))
            sent = time.perf_counter()
            await rc.send(type="step")
            answer = await rc.receive(timeout)
            while answer["type"] in ("output", "queued"):
                answer = await rc.receive(timeout)
            if answer["type"] == "paused":
                recorder.success(time.perf_counter() - sent)
            else:
                recorder.error(answer.get("error") or answer["type"])
                if answer["type"] == "exit":
                    return
        await rc.send(type="kill")
        await rc.until("exit", timeout)


async def bystander(url, cookies, duration, timeout, recorder):
    """A student who only runs a short program, once a second, while the class debugs."""
    from .run_client import RunClient
    async with RunClient(url, cookies, timeout=timeout, keep=True) as rc:
        ends = time.monotonic() + duration
        while time.monotonic() < ends:
            rc.messages.clear()
            sent = time.perf_counter()
            await rc.send(type="run", path="bench_quick.py")
            try:
                end = await rc.until("exit", timeout)
            except asyncio.TimeoutError:
                recorder.error("no_exit")
                return
            if end["reason"] == "ok":
                recorder.success(time.perf_counter() - sent)
            else:
                recorder.error(end["reason"])
            if any(m["type"] == "queued" for m in rc.messages):
                recorder.error("waited_in_line")
            await asyncio.sleep(1)


def measure(args):
    from .client import Client
    from .harness import fresh_server, make_credentials, run_async, scratch
    deadline = time.monotonic() + args.max_seconds
    from .recording import Recorder
    with scratch("pyclassroom-bench-debug-") as (base, pg):
        say("starting PostgreSQL and the server ...")
        admin_dsn = pg.start()
        settings = {"SANDBOX": args.sandbox, "RUN_MAX_CONCURRENT": str(args.max_concurrent),
                    "RUN_CPU_SECONDS": "600", "RUN_WALL_SECONDS": "3600"}
        credentials = make_credentials(max(1, args.students) + 1, "debug")  # and the bystander
        with fresh_server(admin_dsn, base, 1, credentials, "debug", **settings) as (server, users):
            cookies = []
            for username, password in users:
                client = Client(server.url)
                client.login_ok(username, password)
                for name, code in (("bench_loop.py", LOOP), ("bench_steps.py", STEPPED),
                                   ("bench_quick.py", "print('quick')\n")):
                    client.request("PUT", f"/api/files/home/{name}", data=code.encode(), headers={"If-Match": "*"})
                cookies.append(client.http.cookies.get_dict())
            say(f"CPU: {args.repeat} runs of each way ...")
            cpu = run_async(measure_cpu(server.url, cookies[0], args.repeat, args.timeout), deadline)
            say(f"steps: {args.students} students stepping for {args.duration:g} s ...")
            recorders = {"steps": Recorder(), "first_pause": Recorder(), "bystander_runs": Recorder()}

            async def class_stepping():
                await asyncio.gather(
                    bystander(server.url, cookies[-1], args.duration, args.timeout, recorders["bystander_runs"]),
                    *(stepping(server.url, c, args.duration, args.think, args.timeout, recorders["steps"],
                               recorders["first_pause"]) for c in cookies[:args.students]))
            run_async(class_stepping(), deadline)
            return cpu, recorders


def report(args, cpu, recorders):
    medians = {way: (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
               for way, runs in cpu.items()}
    plain_loops, plain_all = medians["plain"]
    print(f"\nCPU time of 2 loops of 10^5 iterations (module level + a function), median of {args.repeat} runs, "
          f"{args.sandbox} sandbox:")
    print(f"  {'way':<13} {'loops ms':>9} {'x plain':>8} {'program ms':>11} {'x plain':>8}")
    for way, (loops, whole) in medians.items():
        print(f"  {way:<13} {loops * 1000:9.1f} {loops / plain_loops:8.2f} {whole * 1000:11.1f} "
              f"{whole / plain_all:8.2f}")
    load = os.getloadavg()
    print(f"\n{args.students} students press Debug at once and step for {args.duration:g} s (think {args.think:g} s "
          f"±50%), RUN_MAX_CONCURRENT={args.max_concurrent}; the machine's load average after: "
          + " ".join(f"{x:.1f}" for x in load))
    figures = {}
    for name, what in (("first_pause", "Debug -> first pause"), ("steps", "step -> paused"),
                       ("bystander_runs", "another student's run -> exit")):
        figures[name] = summary = recorders[name].summary()
        line = f"  {what:<32} {summary['count']:5d} ok, {summary['errors']} errors {summary['errors_by_kind'] or ''}"
        if summary["count"]:
            line += (f"  p50 {summary['p50_ms']:.1f} ms  p95 {summary['p95_ms']:.1f} ms  p99 {summary['p99_ms']:.1f} ms"
                     f"  max {summary['max_ms']:.1f} ms")
        print(line)
    print("  (target: step p95 ≤ 50 ms)")
    figures["load_average_after"] = load
    worst = max(medians["debug"][0], medians["debug+bp"][0]) / plain_loops
    print(f"\nnot paused under the debugger: ≤ {worst:.2f}× the plain run's loop CPU (target ≤ 3×); "
          f"{medians['debug+bp@end'][0] / plain_loops:.1f}× when a breakpoint lies in the loop's own function")
    return {"cpu_medians_s": medians, "cpu_runs": cpu, **figures,
            "settings": {k: v for k, v in vars(args).items() if k != "json"}}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_debug", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sandbox", default="local", choices=["local", "docker", "process"])
    parser.add_argument("--repeat", type=int, default=5, help="runs of each way for the CPU figures (default 5)")
    parser.add_argument("--students", type=int, default=30, help="students stepping at once (default 30)")
    parser.add_argument("--duration", type=float, default=20, help="seconds they step (default 20)")
    parser.add_argument("--think", type=float, default=0.3, help="seconds between a student's steps (default 0.3)")
    parser.add_argument("--max-concurrent", type=int, default=16,
                        help="RUN_MAX_CONCURRENT of the server (default 16, the product's)")
    bounds(parser, 900, "step or run")
    args = parser.parse_args(argv)
    clean_up_on_sigterm()
    try:
        cpu, recorders = measure(args)
    except Aborted as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    document = report(args, cpu, recorders)
    if args.json:
        write_json(args.json, document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
