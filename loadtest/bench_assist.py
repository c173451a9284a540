"""Benchmark of editing help: students typing a lesson while the IDE asks
the server for completions, signatures and checks (/api/assist/*).

    python -m loadtest.bench_assist [--students 60] [--duration 30]
                                    [--processes 1] [--keys-per-s 4]
                                    [--server-root DIR] [--json OUT]

Each simulated student is a real user with its own keep-alive connection.
It types LESSON into its own file, key by key, from a line of its own (a pause of 0.5-1.5 times
1/--keys-per-s between keys, and 1-4 s of thought at the end of a line),
and asks what the IDE (static/src/assist.js) asks, when it asks it:

- a completion after a dot, or in a name of two letters or more (not in a
  string or a comment), once per word, when typing pauses for 150 ms; a
  key typed before the answer cancels the request, as the page does;
- the signature of the call being typed, when typing pauses for 250 ms
  inside its parentheses;
- a check of the whole text, when typing pauses for 600 ms.

Latency is from the request to the whole answer; only a 200 with the
answer's shape counts as a success (a request cancelled by the next key,
or superseded on the server by a newer one, is counted apart, not as an
error). A completion is a hit when it offers the name the student then
typed. The server's CPU is measured with its assist processes (children of
the workers) and printed as a share of one core, beside the same figure
with the students connected but not typing.
"""
import argparse
import json
import random
import re
import sys
import time

from .cli import bounds, int_list, run_benchmark, say, server_root_option
from .machine import describe, tree_cpu
from .recording import error_lines, fmt

LESSON = '''import random
import math
import matplotlib.pyplot as plt
from random import randint

def roll_dice(count):
    total = 0
    for i in range(count):
        total = total + random.randint(1, 6)
    return total

name = input("What is your name? ")
print("Hello, " + name.upper())
results = [roll_dice(2) for _ in range(100)]
print(math.sqrt(len(results)), max(results))
plt.hist(results, bins=11)
plt.title("Two dice")
plt.show()
'''
PATH = "lesson.py"
TYPING_PAUSE, SIGNATURE_PAUSE, CHECK_PAUSE = 0.15, 0.25, 0.6  # as in static/src/assist.js
WORD = re.compile(r"[A-Za-z0-9_]+$")
OPS = ("complete", "signatures", "check")


def would_complete(line):
    """The word's start when the IDE asks for a completion with the cursor at
    the end of `line` (the text of the line so far), else None."""
    if line.count('"') % 2 or "#" in line:
        return None  # in a string or a comment: nothing offered unasked
    word = WORD.search(line)
    start = word.start() if word else len(line)
    if line[:start].endswith(".") and not re.search(r"(^|\W)\d+\.$", line[:start]):
        return start
    return start if word and len(word.group()) >= 2 and not word.group()[0].isdigit() else None


def in_call(line):
    return line.count("(") > line.count(")") and line.count('"') % 2 == 0


def next_word(text, at):
    """The name that starts at `at` in `text` (what the student went on to type)."""
    m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", text[at:])
    return m.group() if m else ""


class Typist:
    """One student typing LESSON, again and again, asking as the IDE does."""

    def __init__(self, user, keys_per_s, recorders, counts, rng):
        self.user, self.rng = user, rng
        self.gap = 1 / keys_per_s
        self.recorders, self.counts = recorders, counts

    async def ask(self, op, text, line=None, column=None):
        """POST one request; its answer, or None when it was cancelled,
        superseded or failed (each counted)."""
        import asyncio

        from .client import CheckFailed, error_kind
        body = {"path": PATH, "source": text}
        if line is not None:
            body.update(line=line, column=column)
        started = time.perf_counter()
        try:
            resp, raw = await self.user.request("POST", f"/api/assist/{op}", body)
            if resp.status == 409:
                self.counts[op + "_superseded"] += 1
                return None
            if resp.status != 200:
                raise CheckFailed(f"http_{resp.status}")
            answer = json.loads(raw)
            key = {"complete": "completions", "signatures": "signatures", "check": "diagnostics"}[op]
            if not isinstance(answer.get(key), list):
                raise CheckFailed("bad_answer")
        except asyncio.CancelledError:
            self.counts[op + "_cancelled"] += 1
            raise
        except Exception as e:
            self.recorders[op].error(error_kind(e))
            return None
        self.recorders[op].success(time.perf_counter() - started)
        return answer

    async def complete(self, text, line_no, column, word_at):
        import asyncio
        await asyncio.sleep(TYPING_PAUSE)
        answer = await self.ask("complete", text, line_no, column)
        if answer is not None:
            wanted = next_word(LESSON, word_at)
            self.counts["complete_answered_with_word"] += bool(wanted)
            self.counts["complete_hits"] += bool(wanted) and wanted in {c["name"] for c in answer["completions"]}

    async def later(self, delay, op, text, line_no=None, column=None):
        import asyncio
        await asyncio.sleep(delay)
        await self.ask(op, text, line_no, column)

    async def type_for(self, deadline):
        import asyncio
        pending = []  # requests the next key cancels (the page's AbortController)
        asked_word = None
        # Each student is somewhere else in the lesson: it starts at a line of its own.
        starts = [0] + [m.end() for m in re.finditer("\n", LESSON[:-1])]
        first = self.rng.choice(starts)
        while time.monotonic() < deadline:
            for i in range(first, len(LESSON)):
                ch = LESSON[i]
                for task in pending:
                    task.cancel()
                pending = []
                text = LESSON[:i + 1]
                line_start = text.rfind("\n") + 1
                line = text[line_start:]
                line_no, column = text.count("\n") + 1, len(line)
                think = ch == "\n"
                pause = self.rng.uniform(1, 4) if think else self.gap * self.rng.uniform(0.5, 1.5)
                start = would_complete(line)
                if start is not None and (line_no, start) != asked_word and pause > TYPING_PAUSE:
                    asked_word = (line_no, start)
                    pending.append(asyncio.ensure_future(self.complete(text, line_no, column, line_start + start)))
                if in_call(line) and pause > SIGNATURE_PAUSE:
                    pending.append(asyncio.ensure_future(self.later(SIGNATURE_PAUSE, "signatures", text,
                                                                    line_no, column)))
                if pause > CHECK_PAUSE:
                    pending.append(asyncio.ensure_future(self.later(CHECK_PAUSE, "check", text)))
                await asyncio.sleep(pause)
                if time.monotonic() >= deadline:
                    break
            first = 0
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


async def run_students(url, credentials, duration, keys_per_s, timeout, pids):
    """Log every student in and save the file they type into; the server's
    CPU for `duration` s of typing, then up to 10 s connected and idle.
    Returns a summary."""
    import asyncio
    import contextlib
    from collections import Counter

    from .client import VirtualUser, log_in_all, save_file
    from .recording import Recorder
    recorders = {op: Recorder() for op in OPS}
    counts = Counter()
    async with contextlib.AsyncExitStack() as stack:
        users, setup_errors = await log_in_all(lambda: VirtualUser(url, timeout), credentials, stack)
        await asyncio.gather(*(save_file(u, PATH, LESSON) for u in users))
        typists = [Typist(u, keys_per_s, recorders, counts, random.Random(n)) for n, u in enumerate(users)]
        # Untimed: every student's first completion and check, as when the
        # page opens (the assist processes may still be warming up).
        warm = {op: Recorder() for op in OPS}
        for t in typists:
            t.recorders = warm
        await asyncio.gather(*(t.ask("complete", LESSON, 3, len("import matplotlib.")) for t in typists),
                             *(t.ask("check", LESSON) for t in typists))
        for t in typists:
            t.recorders = recorders
        before = tree_cpu(pids), time.perf_counter()
        deadline = time.monotonic() + duration
        await asyncio.gather(*(t.type_for(deadline) for t in typists))
        wall = time.perf_counter() - before[1]
        busy_cpu = (tree_cpu(pids) - before[0]) / wall
        before = tree_cpu(pids), time.perf_counter()
        await asyncio.sleep(min(duration, 10))
        idle_cpu = (tree_cpu(pids) - before[0]) / (time.perf_counter() - before[1])
    out = {"students": len(credentials), "typing": len(users), "setup_errors": dict(setup_errors),
           "wall_s": round(wall, 1), "server_cpu_idle": round(idle_cpu, 3), "server_cpu_typing": round(busy_cpu, 3),
           "counts": dict(counts)}
    for op, rec in recorders.items():
        out[op] = rec.summary(wall)
    asked = counts["complete_answered_with_word"]
    out["complete_hit_share"] = round(counts["complete_hits"] / asked, 3) if asked else None
    return out


def measure(args, deadline):
    from .harness import each_load, run_async

    def one(server, logins, processes, count):
        say(f"  {processes} process(es), {count} students typing for {args.duration:g} s ...")
        return run_async(run_students(server.url, logins, args.duration, args.keys_per_s, args.timeout,
                                      server.pids), deadline)
    return each_load("bench-assist", args.processes, args.students, one, ASSIST_PROCESSES=args.assist_processes)


def report(args, info, results):
    lines = [f"editing help: students typing a {len(LESSON.splitlines())}-line lesson at ~{args.keys_per_s:g} keys/s, "
             f"asking as the IDE does; {args.duration:g} s",
             f"{'procs':>5} {'students':>8}  {'request':<10} {'answered':>8} {'errors':>6}  "
             f"{'p50':>6} {'p95':>6} {'p99':>6} {'max':>6} (ms)  {'per s':>6}"]
    for r in results:
        for op in OPS:
            s = r[op]
            lines.append(f"{r['processes']:>5} {r['students']:>8}  {op:<10} {s['count']:>8} {s['errors']:>6}  "
                         f"{fmt(s['p50_ms']):>6} {fmt(s['p95_ms']):>6} {fmt(s['p99_ms']):>6} {fmt(s['max_ms']):>6}"
                         f"       {s['ops_per_s']:>6.1f}")
    lines.append("")
    for r in results:
        where = f"{r['processes']} process(es), {r['students']} students"
        c = r["counts"]
        lines.append(f"{where}: server CPU (workers + assist processes) {r['server_cpu_typing']:.0%} of a core "
                     f"typing, {r['server_cpu_idle']:.0%} connected and idle; completions offering the name "
                     f"then typed: {fmt(r['complete_hit_share'] and 100 * r['complete_hit_share'], '.0f')}%")
        lines.append("  cancelled by the next key: " + ", ".join(f"{op} {c.get(op + '_cancelled', 0)}" for op in OPS)
                     + "; superseded on the server: "
                     + ", ".join(f"{op} {c.get(op + '_superseded', 0)}" for op in OPS))
        if r["setup_errors"]:
            lines.append(f"setup errors (students left out), {where}: {r['setup_errors']}")
        for op in OPS:
            lines += error_lines(f"{where}, {op}", r[op]["errors_by_kind"])
    lines.append(describe(info))
    lines.append("the load generator runs on the same machine and competes with the server for CPU")
    return "\n".join(lines)


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_assist", description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int_list, default=[1], help="worker process counts (default 1)")
    parser.add_argument("--students", type=int_list, default=[60], help="students typing at once (default 60)")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of typing (default 30)")
    parser.add_argument("--keys-per-s", type=float, default=4.0, help="a student's typing speed (default 4)")
    parser.add_argument("--assist-processes", type=int, default=2, help="ASSIST_PROCESSES per worker (default 2)")
    server_root_option(parser)
    bounds(parser, max_seconds=900)
    args = parser.parse_args(argv)
    if args.duration <= 0 or args.keys_per_s <= 0:
        parser.error("--duration and --keys-per-s must be positive")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    _, status = run_benchmark(args, measure, lambda info, results: report(args, info, results), lambda: {
        k: getattr(args, k) for k in ("processes", "students", "duration", "keys_per_s", "assist_processes", "timeout",
                                      "server_root")})
    return status or 0


if __name__ == "__main__":
    sys.exit(main())
