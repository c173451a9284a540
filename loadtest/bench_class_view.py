"""Benchmark of the teacher's full-screen class view under a class at work:
how long after a student's save or the end of a student's run the
teacher's screen shows it, and what the teacher's browser holds in memory
meanwhile.

    python -m loadtest.bench_class_view [--students 60] [--duration 600]
                                        [--processes 2] [--server-root DIR] [--json OUT]

Per process count a fresh server (TORNADO_PROCESSES; RUN_MAX_CONCURRENT
above the class, so the whole class may run at once), --students real
students in one class with a teacher, and the teacher's /class/<id> open in
headless Chromium (Debian's, through Playwright) at 1366x768. Each student
has an IDE socket (/ws/run: online) and, for --duration seconds, saves
work.py at an autosave's pace (0.5-1.5 s apart, each save naming the
version it replaces) and, 2-8 s after each run ended, runs one of three
saved programs: ok.py (prints and finishes), oops.py (a NameError at line
3) or slow.py (runs 4-12 s, then finishes).

How the time is measured. A script added to the page before its own
(`add_init_script`) watches, with a MutationObserver, the tiles'
data-saved-at, data-run-at and data-state attributes (written by the tile's
redraw, with its text) and records, with Date.now(), each new (saved-at,
run-at, state, state text) of a tile. Date.now() reads the same wall
clock as this script's time.time() (one machine), to the millisecond.
- A save's event is the moment before its request is sent (time.time());
  it shows when the student's tile first carries a saved-at (the server's
  own time of that save, or of a later one) at or after it. Included: the
  save, the worker's flush of save times (up to a second, by design),
  PostgreSQL's NOTIFY, the class socket's coalescing, the page's redraw.
- A run end's event is the moment the student's socket received the run's
  `exit` message; it shows when the tile first carries a run-at (the
  server's end of the run) later than the `run` request, and it must then
  say the expected outcome (Finished, or "NameError · oops.py:3").
  A tile that showed it before our socket's `exit` was read (this script
  lagging) counts as 0 ms and is counted apart ("shown_before_event").
Shown means the DOM holds it (the observer runs right after the redraw);
the paint that follows within the frame is not included. An event whose
effect is not shown within --timeout, a tile showing a wrong outcome, a
refused save or a run that ended otherwise than expected is a failure,
counted by kind, never dropped. The page's JS heap (CDP
HeapProfiler.collectGarbage, then Performance.getMetrics: JSHeapUsedSize,
and its DOM nodes and listeners) and the largest Chromium renderer's RSS
(psutil) are read before the load, every --memory-every seconds and after.
The garbage collection pauses the page briefly; that pause is in the figures.
"""
import argparse
import asyncio
import contextlib
import json
import os
import random
import sys
import time
from datetime import datetime

from .cli import bounds, int_list, run_benchmark, say, server_root_option
from .harness import each_load, insert_users, make_credentials, run_async
from .machine import CpuWatch, describe
from .pages import launch, signed_in_page
from .recording import Recorder, error_lines, fmt, page_lines, pct

SAVED = "work.py"
ERROR_LINE = 3
PROGRAMS = {  # name: (text, the exit reason it must end with, the tile's state)
    "ok.py": ('print("hello from the benchmark")\n', "ok", "ok"),
    "oops.py": ("total = 0\nfor i in range(3):\n    total = total + lenght\nprint(total)\n", "error", "error"),
    "slow.py": ("import random, time\nprint('working')\ntime.sleep(random.uniform(4, 12))\nprint('done')\n",
                "ok", "ok"),
}
MIX = ["ok.py", "ok.py", "oops.py", "oops.py", "slow.py"]  # the next run is one of these at random
RUN_PAUSE = (2.0, 8.0)
SAVE_PAUSE = (0.5, 1.5)
DRAIN_SECONDS = 0.25  # how often the page's records are read
PAGE_RECORDS = 200_000  # the page keeps at most this many unread records (counted when over)
KEPT_RECORDS = 50  # per student, the newest records kept for events still to match

# The page's watcher: a bounded list of what each tile newly shows.
WATCH_JS = """(() => {
  const max = %d;
  const last = new Map();
  const bench = window.__classBench = { records: [], dropped: 0 };
  bench.take = () => { const out = bench.records; bench.records = []; return [out, bench.dropped]; };
  new MutationObserver((mutations) => {
    const t = Date.now();
    const tiles = new Set(mutations.map((m) => m.target));
    for (const li of tiles) {
      const state = li.querySelector(".tile-state")?.textContent || "";
      const d = li.dataset;
      const now = [d.username, d.savedAt || "", d.runAt || "", d.state || "", state];
      const key = now.join("\\u0000");
      if (last.get(now[0]) === key) continue;
      last.set(now[0], key);
      if (bench.records.length >= max) { bench.dropped += 1; continue; }
      bench.records.push([t, ...now]);
    }
  }).observe(document, { subtree: true, attributes: true,
                         attributeFilter: ["data-saved-at", "data-run-at", "data-state"] });
})();""" % PAGE_RECORDS


def epoch(iso):
    """An ISO time of the server's as seconds since the epoch (None when empty)."""
    return datetime.fromisoformat(iso).timestamp() if iso else None


class Screen:
    """What the teacher's page showed of each student, matched to the
    events this script caused: each event is measured or a failure."""

    def __init__(self, timeout):
        self.timeout = timeout
        self.saves, self.runs = Recorder(), Recorder()
        self.p90 = {}
        self.before = {"saves": 0, "runs": 0}
        self.caused = {"saves": 0, "runs": 0}  # each is measured or a failure, in the end
        self.shown = {}  # username -> [(t, saved_at, run_at, state, text)], newest last, bounded
        self.pending = []  # events still to show: dicts
        self.dropped = 0

    def see(self, records, dropped):
        self.dropped = dropped
        for t, username, saved, run_at, state, text in records:
            kept = self.shown.setdefault(username, [])
            kept.append((t / 1000, epoch(saved), epoch(run_at), state, text))
            del kept[:-KEPT_RECORDS]

    def cause(self, kind):
        self.caused[kind] += 1

    def save(self, username, at):
        self.pending.append({"kind": "saves", "user": username, "after": at, "at": at})

    def run_sent(self, username, program):
        event = {"kind": "runs", "user": username, "after": time.time(), "at": None, "program": program}
        return event

    def run_ended(self, event):
        event["at"] = time.time()
        self.pending.append(event)

    def match(self, final=False):
        now = time.time()
        still = []
        for event in self.pending:
            found = self._find(event)
            recorder = self.saves if event["kind"] == "saves" else self.runs
            if found is not None:
                t, wrong = found
                if wrong:
                    recorder.error(wrong)
                elif t < event["at"]:
                    self.before[event["kind"]] += 1
                    recorder.success(0)
                else:
                    recorder.success(t - event["at"])
            elif final or now - event["at"] > self.timeout:
                recorder.error("never_shown")
            else:
                still.append(event)
        self.pending = still

    def _find(self, event):
        for t, saved, run_at, state, text in self.shown.get(event["user"], []):
            if event["kind"] == "saves":
                if saved is not None and saved >= event["after"] - 0.0005:  # the database keeps microseconds
                    return t, None
            elif run_at is not None and run_at >= event["after"] - 0.0005:
                want = PROGRAMS[event["program"]][2]
                if state != want:
                    return t, f"shown_as_{state or 'nothing'}"
                if want == "error" and not ("NameError" in text and f"oops.py:{ERROR_LINE}" in text):
                    return t, "error_shown_without_kind_or_line"
                return t, None
        return None

    def summaries(self):
        out = {}
        for kind, recorder in (("saves", self.saves), ("runs", self.runs)):
            out[kind] = {**recorder.summary(), "caused": self.caused[kind], "p90_ms": recorder.percentile_ms(90),
                         "shown_before_event": self.before[kind]}
        out["page_records_dropped"] = self.dropped
        return out


async def student(user, ide, screen, duration, timeout):
    """One student for `duration` s: saves at an autosave's pace while
    running programs one after another."""
    from .client import error_kind
    end = time.monotonic() + duration

    async def saving():
        etag, n = "*", 0
        while time.monotonic() < end:
            n += 1
            screen.cause("saves")
            at = time.time()
            try:
                resp, body = await user.put_file(SAVED, f"# save {n}\nprint({n})\n",
                                                 f'"{etag}"' if etag != "*" else "*")
            except Exception as e:
                screen.saves.error(error_kind(e))
                etag = "*"
            else:
                if resp.status == 200:
                    etag = json.loads(body)["etag"]
                    screen.save(user.username, at)
                else:
                    screen.saves.error(f"http_{resp.status}")
                    etag = "*"
            await pause(SAVE_PAUSE, end)

    async def running():
        await pause((0, RUN_PAUSE[1]), end)  # the class does not start in step
        while time.monotonic() < end:
            program = random.choice(MIX)
            screen.cause("runs")
            event = screen.run_sent(user.username, program)
            reason = await one_run(ide, program, timeout)
            if reason == PROGRAMS[program][1]:
                screen.run_ended(event)
            else:
                screen.runs.error(f"exit_{reason}")
                if reason in ("no_exit", "socket"):
                    with contextlib.suppress(Exception):
                        await ide.reopen()
            await pause(RUN_PAUSE, end)

    await asyncio.gather(saving(), running())


async def pause(between, end):
    """A pause of `between` seconds at random, cut at the end of the load."""
    await asyncio.sleep(max(0.0, min(random.uniform(*between), end - time.monotonic())))


async def one_run(ide, program, timeout):
    """Run `program`; the exit's reason ("no_exit" if none came in time)."""
    from .client import CheckFailed
    try:
        await ide.send(type="run", path=program, cols=80, rows=24)
        deadline = time.monotonic() + timeout + 12
        while True:
            message = await ide.receive(deadline - time.monotonic())
            if message.get("type") == "exit":
                return message.get("reason")
            if message.get("type") == "error" and message.get("error") != "not_running":
                return "refused_" + str(message.get("error"))
    except asyncio.TimeoutError:
        with contextlib.suppress(Exception):
            await ide.send(type="kill")
        return "no_exit"
    except (CheckFailed, ConnectionError):
        return "socket"


async def make_class(server, teacher, logins, timeout):
    """A class of this teacher and these students: its number."""
    from .client import VirtualUser, check_status
    async with VirtualUser(server.url, timeout) as admin:
        await admin.sign_in("admin", server.env["ADMIN_PASSWORD"])
        resp, body = await admin.request("POST", "/api/classes", {"name": f"bench {time.time_ns()}"})
        check_status(resp.status, 201)
        number = json.loads(body)["class"]["id"]
        resp, _ = await admin.request("POST", f"/api/classes/{number}/members",
                                      {"add": [teacher[0]] + [u for u, _ in logins]})
        check_status(resp.status, 200)
    return number


def renderer_rss():
    """RSS (bytes) of the largest Chromium renderer below this process: the
    class view's page (Chromium may keep a spare, nearly empty one)."""
    import psutil
    best = 0
    for proc in psutil.Process(os.getpid()).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "--type=renderer" in proc.cmdline():
                best = max(best, proc.memory_info().rss)
    return best or None


async def memory(page, cdp, started):
    """The page's memory now, after a garbage collection."""
    await cdp.send("HeapProfiler.collectGarbage")
    metrics = {m["name"]: m["value"] for m in (await cdp.send("Performance.getMetrics"))["metrics"]}
    return {"at_s": round(time.monotonic() - started, 1),
            "js_heap_used_mib": round(metrics["JSHeapUsedSize"] / 2 ** 20, 2),
            "js_heap_total_mib": round(metrics["JSHeapTotalSize"] / 2 ** 20, 2),
            "dom_nodes": int(metrics["Nodes"]), "js_event_listeners": int(metrics["JSEventListeners"]),
            "renderer_rss_mib": round((renderer_rss() or 0) / 2 ** 20, 1)}


async def open_view(browser, server, login, number, count, timeout, script=WATCH_JS):
    """The teacher's /class/<number> with `script` in it (its watcher),
    signed in, every student's tile drawn."""
    context, page = await signed_in_page(browser, server.url, login, f"/class/{number}", timeout, script)
    # A function, not an expression: Playwright polls an expression through eval, which the page's CSP refuses.
    await page.wait_for_function("(n) => document.querySelectorAll('li.tile').length >= n", arg=count,
                                 timeout=timeout * 1000)
    cdp = await context.new_cdp_session(page)
    await cdp.send("Performance.enable")
    return context, page, cdp


async def run_class(server, teacher, logins, duration, timeout, every):
    from .client import VirtualUser, log_in_all, save_file
    from .run_client import open_ides
    screen = Screen(timeout)
    setup = {}
    number = await make_class(server, teacher, logins, timeout)
    async with contextlib.AsyncExitStack() as stack:
        users, failed = await log_in_all(lambda: VirtualUser(server.url, timeout), logins, stack)
        setup.update({f"login_{k}": n for k, n in failed.items()})
        for name, (text, _, _) in PROGRAMS.items():
            for outcome in await asyncio.gather(*(save_file(u, name, text) for u in users), return_exceptions=True):
                if isinstance(outcome, Exception):
                    setup[f"save_{name}"] = setup.get(f"save_{name}", 0) + 1
        ides, failed = await open_ides(server.url, users, stack, timeout)
        setup.update({f"socket_{k}": n for k, n in failed.items()})
        users = [users[ide.index] for ide in ides]  # the students whose IDE opened
        browser = await launch(stack)
        context, page, cdp = await open_view(browser, server, teacher, number, len(logins), timeout)
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)[:200]))
        await asyncio.sleep(2.0)  # the view settles; what it drew so far is not an event of ours
        screen.see(*await page.evaluate("window.__classBench.take()"))
        started = time.monotonic()
        load_before, cpu = [round(v, 2) for v in os.getloadavg()], CpuWatch(server.pids).start()
        series = [await memory(page, cdp, started)]
        load = asyncio.ensure_future(asyncio.gather(
            *(student(u, ide, screen, duration, timeout) for u, ide in zip(users, ides))))
        next_sample = started + every
        while not load.done() or (screen.pending and time.monotonic() < started + duration + timeout + 20):
            await asyncio.sleep(DRAIN_SECONDS)
            screen.see(*await page.evaluate("window.__classBench.take()"))
            screen.match()
            if time.monotonic() >= next_sample and not load.done():
                series.append(await memory(page, cdp, started))
                next_sample += every
        await load
        screen.see(*await page.evaluate("window.__classBench.take()"))
        screen.match(final=True)
        series.append(await memory(page, cdp, started))
        wall = time.monotonic() - started
        used = cpu.stop()
        await context.close()
    return {"students": len(logins), "online": len(ides), "duration_s": duration, "wall_s": round(wall, 1),
            "load_average_before": load_before, "load_average_after": [round(v, 2) for v in os.getloadavg()],
            "server_cpu": used["server_cpu"], "machine_busy": used["machine_busy"],
            "setup_errors": setup, "page_errors": errors[:20], **screen.summaries(), "memory": series}


def measure(args, deadline):
    def one(server, logins, processes, count):
        say(f"  {processes} process(es): {count} students saving and running for {args.duration} s, "
            "the teacher's class view open in Chromium ...")
        [teacher] = insert_users(server.env["DATABASE_URL"], make_credentials(1, "teacher"), role="teacher")
        return run_async(run_class(server, teacher, logins, args.duration, args.timeout, args.memory_every), deadline)

    return each_load("bench-class-view", args.processes, [args.students], one, ASSIST_PROCESSES=0,
                     RUN_MAX_CONCURRENT=args.students + 8)


def report(settings, info, results):
    lines = [f"a student's event → the teacher's class view shows it ({settings['students']} students saving "
             f"every 0.5-1.5 s and running a program every 2-8 s, for {settings['duration']:g} s)",
             f"{'processes':>9}  {'events':<9} {'caused':>6}  {'shown':>6}  {'failed':>6}  {'p50 ms':>7}  "
             f"{'p90 ms':>7}  {'p95 ms':>7}  {'p99 ms':>7}  {'max ms':>7}"]
    for r in results:
        for kind, label in (("saves", "saves"), ("runs", "run ends")):
            s = r[kind]
            lines.append(f"{r['processes']:>9}  {label:<9} {s['caused']:>6}  {s['count']:>6}  {s['errors']:>6}  "
                         f"{fmt(s['p50_ms'], '7.0f')}  {fmt(s['p90_ms'], '7.0f')}  {fmt(s['p95_ms'], '7.0f')}  "
                         f"{fmt(s['p99_ms'], '7.0f')}  {fmt(s['max_ms'], '7.0f')}")
    for r in results:
        for kind in ("saves", "runs"):
            lines += error_lines(f"{kind}, {r['processes']} process(es)", r[kind]["errors_by_kind"])
            if r[kind]["shown_before_event"]:
                lines.append(f"{kind}, {r['processes']} process(es): {r[kind]['shown_before_event']} shown before "
                             "this script read the event (counted as 0 ms)")
        lines += error_lines(f"setting up, {r['processes']} process(es)", r["setup_errors"])
        lines.append(f"{r['processes']} process(es): the server used {fmt(r['server_cpu'], '.2f')} of a core "
                     "(its workers), "
                     f"the machine was {pct(r['machine_busy'])} busy; load average (1, 5, 15 min) "
                     f"{r['load_average_before']} before, {r['load_average_after']} after")
        lines += page_lines(r, f"{r['processes']} process(es)", f"the teacher's page, {r['processes']} process(es) "
                            f"({r['online']} of {r['students']} students online)")
    lines.append(describe(info))
    lines.append("the students, Chromium and the server share this machine")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_class_view", description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int_list, default=[2], help="worker process counts (default 2)")
    parser.add_argument("--students", type=int, default=60, help="students in the class (default 60)")
    parser.add_argument("--duration", type=float, default=600, help="seconds of saving and running (default 600)")
    parser.add_argument("--memory-every", type=float, default=60,
                        help="seconds between readings of the page's memory (default 60)")
    server_root_option(parser)
    bounds(parser, max_seconds=3600, what="request, and for an event to show")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.students < 1 or args.duration <= 0 or args.memory_every <= 0:
        parser.error("--students, --duration and --memory-every must be positive")
    settings = {"students": args.students, "duration": args.duration, "processes": args.processes}
    results, status = run_benchmark(args, measure, lambda info, results: report(settings, info, results),
                                    lambda: settings)
    if status is not None:
        return status
    failed = any(r["saves"]["errors"] or r["runs"]["errors"] or r["setup_errors"] for r in results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
