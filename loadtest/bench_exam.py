"""Benchmark of an exam (issue 33): a class taking it for its whole length,
each student typing, saving, running and checking, some pasting and leaving
the page; how long each kind of event takes to show on the teacher's
proctor view, what the lock at the end does, what the server spends, what
the replay log costs, and the proctor page's memory.

    python -m loadtest.bench_exam [--students 150] [--duration 600]
                                  [--processes 2] [--server-root DIR] [--json OUT]

Per process count a fresh server (TORNADO_PROCESSES), --students real
students and a teacher in one class with the exercise Average (a visible
check and a hidden one), and an exam of it that starts now and ends
--duration seconds later. The teacher's proctor view (/class/<id>?exam=<id>)
is open in headless Chromium at 1920x1080. Each student has an IDE socket
and, until the end:
- types into their exam file: 1-3 characters every 0.5 s, sent as the
  IDE's recorder sends them (`edits` on /ws/run, loadtest/typist.py), now
  and then a Backspace;
- saves it 1-2 s apart (each save naming the version it replaces);
- every 20-40 s runs it, or (one time in three) checks it, in turn;
- one student in five pastes a snippet every 45-90 s (an edit marked as a
  paste, and the page's `paste` signal), and another one in five leaves
  the page every 60-120 s for 2-8 s (`focus_lost`, then `focus_back`).
Past the end, each student goes on saving until refused: that is the lock.

What is timed, and how: as bench_class_view, a script in the page watches
the proctor tiles' data attributes (the server's time of the last save,
Run press, check and signal) and records, with Date.now(), each new value;
an event counts from the moment before this script sent it (time.time(),
the same clock) to the first record of that student whose time is at or
after it. An event not shown within --timeout is a failure, never dropped.
The lock: for each student, how long after the exam's end their first save
was refused (the server's grace for saves on their way is 5 s), and
whether the folder holds what their last acknowledged save said (a
difference is a lost save). The server's CPU is its workers' and file
processes' (of one core); the replay log's size is what PostgreSQL holds
for the exam (compressed rows), per student and hour of typing.
"""
import argparse
import asyncio
import contextlib
import json
import random
import sys
import time
from datetime import datetime, timedelta, timezone

from .bench_class_view import DRAIN_SECONDS, KEPT_RECORDS, PAGE_RECORDS, epoch, make_class, memory, pause
from .cli import bounds, int_list, run_benchmark, say, server_root_option
from .harness import each_load, insert_users, make_credentials, run_async
from .machine import CpuWatch, describe
from .pages import launch, signed_in_page
from .recording import Recorder, error_lines, fmt, page_lines, pct
from .typist import Typist

GRACE = 5.0  # server/exams/service.py: saves on their way at the end still land
FILE = "average/average.py"
EXERCISE = {"title": "Average", "file": "average.py", "due": None, "instructions": "Print the average.\n",
            "tests": "", "starter": {"average.py": "numbers = [4, 6]\n"},
            "checks": [{"id": "shown", "kind": "output", "input": "", "expected": "5.0\n"},
                       {"id": "kept", "kind": "output", "input": "", "expected": "5.0\n", "visibility": "hidden"}]}
PROGRAM = "numbers = [4, 6]\nprint(sum(numbers) / len(numbers))\n"  # what each file starts as: it passes
TYPE_EVERY = 0.5
SAVE_PAUSE = (1.0, 2.0)
TRY_PAUSE = (20.0, 40.0)
PASTE_PAUSE = (45.0, 90.0)
AWAY_PAUSE = (60.0, 120.0)
AWAY_FOR = (2.0, 8.0)
PASTED = "# a snippet from elsewhere\nvalues = [1, 2, 3]\n"
KINDS = {"saves": "savedAt", "runs": "runAt", "checks": "checkAt", "signals": "signalAt"}
VIEWPORT = {"width": 1920, "height": 1080}

WATCH_JS = """(() => {
  const max = %d;
  const last = new Map();
  const bench = window.__examBench = { records: [], dropped: 0 };
  bench.take = () => { const out = bench.records; bench.records = []; return [out, bench.dropped]; };
  new MutationObserver((mutations) => {
    const t = Date.now();
    for (const li of new Set(mutations.map((m) => m.target))) {
      const d = li.dataset;
      const now = [d.username, d.savedAt || "", d.runAt || "", d.checkAt || "", d.signalAt || ""];
      const key = now.join("\\u0000");
      if (last.get(now[0]) === key) continue;
      last.set(now[0], key);
      if (bench.records.length >= max) { bench.dropped += 1; continue; }
      bench.records.push([t, ...now]);
    }
  }).observe(document, { subtree: true, attributes: true,
                         attributeFilter: ["data-saved-at", "data-run-at", "data-check-at", "data-signal-at"] });
})();""" % PAGE_RECORDS


class Proctor:
    """What the proctor's page showed of each student, matched to the
    events this script caused: each is measured, or a failure."""

    def __init__(self, timeout):
        self.timeout = timeout
        self.recorders = {kind: Recorder() for kind in KINDS}
        self.caused = dict.fromkeys(KINDS, 0)
        self.shown = {}  # username -> [(t, {attribute: epoch})], newest last, bounded
        self.pending = []
        self.dropped = 0

    def see(self, records, dropped):
        self.dropped = dropped
        for t, username, saved, run, check, signal in records:
            kept = self.shown.setdefault(username, [])
            kept.append((t / 1000, {"savedAt": epoch(saved), "runAt": epoch(run), "checkAt": epoch(check),
                                    "signalAt": epoch(signal)}))
            del kept[:-KEPT_RECORDS]

    def cause(self, kind, username, at):
        """An event of `kind` the student's page caused at `at` (time.time()), now acknowledged."""
        self.caused[kind] += 1
        self.pending.append({"kind": kind, "user": username, "at": at})

    def failed(self, kind, why):
        self.caused[kind] += 1
        self.recorders[kind].error(why)

    def match(self, final=False):
        now, still = time.time(), []
        for event in self.pending:
            attribute = KINDS[event["kind"]]
            shown = next((t for t, values in self.shown.get(event["user"], [])
                          if values[attribute] is not None and values[attribute] >= event["at"] - 0.0005), None)
            recorder = self.recorders[event["kind"]]
            if shown is not None:
                recorder.success(max(0.0, shown - event["at"]))
            elif final or now - event["at"] > self.timeout:
                recorder.error("never_shown")
            else:
                still.append(event)
        self.pending = still

    def summaries(self):
        return {kind: {**r.summary(), "caused": self.caused[kind]} for kind, r in self.recorders.items()} | {
            "page_records_dropped": self.dropped}


class Taker:
    """One student taking the exam: their file as typed, and what was saved of it."""

    def __init__(self, user, ide, exam, proctor, ends, role):
        self.user, self.ide, self.exam, self.proctor = user, ide, exam, proctor
        self.ends = ends  # the exam's end (time.time())
        self.role = role  # "paster", "leaver" or ""
        self.area = f"exam/{exam['id']}"
        self.typist = Typist(PROGRAM)
        self.acknowledged = None  # (text, time) of the last save the server took
        self.refused_at = None  # time.time() of the first save refused for the exam's end
        self.inbox = asyncio.Queue(maxsize=1000)  # what the socket said, for `answer` (reading)
        self.errors = {}

    def error(self, kind):
        self.errors[kind] = self.errors.get(kind, 0) + 1

    async def take(self):
        writing = time.time() < self.ends
        reader = asyncio.ensure_future(self.reading())
        try:
            await asyncio.gather(self.typing(), self.saving(), self.trying(),
                                 self.pasting() if self.role == "paster" and writing else asyncio.sleep(0),
                                 self.leaving() if self.role == "leaver" and writing else asyncio.sleep(0))
        finally:
            reader.cancel()

    async def reading(self):
        """Read the socket all the time, as a browser does: its pings are
        answered as they come (sockets read only during runs were closed by
        the server now and then: 7% of runs and checks failed so), and what
        comes waits in `inbox` for `answer`."""
        from .client import CheckFailed
        while True:
            ws = self.ide.ws
            try:
                message = await self.ide.receive(timeout=1.0)
            except asyncio.TimeoutError:
                continue
            except CheckFailed as e:  # closed: `answer` is told, and the socket opened again reads on
                message = {"type": "_closed", "why": f"{e.kind}_{ws.close_code}"}
                while self.ide.ws is ws:
                    await asyncio.sleep(0.2)
            if self.inbox.full():
                self.inbox.get_nowait()
            self.inbox.put_nowait(message)

    async def typing(self):
        while time.time() < self.ends:
            if random.random() < 0.05:
                self.typist.delete(1)
            else:
                self.typist.type("".join(random.choice("abcdefghij =+()\n") for _ in range(random.randint(1, 3))))
            with contextlib.suppress(Exception):
                await self.ide.send(type="edits", **self.typist.message(self.area, FILE))
            await asyncio.sleep(TYPE_EVERY)

    async def saving(self):
        """Saves until refused for the end (or a while after it: what is kept is checked then)."""
        from .client import error_kind
        etag = "*"
        while time.time() < self.ends + GRACE + 10:
            text = "# " + self.user.username + "\n" + self.typist.text
            at = time.time()
            try:
                resp, body = await self.user.put_file(FILE, text, f'"{etag}"' if etag != "*" else "*", area=self.area)
            except Exception as e:
                self.proctor.failed("saves", error_kind(e))
                await asyncio.sleep(1)
                continue
            if resp.status == 200:
                etag = json.loads(body)["etag"]
                self.acknowledged = (text, at)
                if at < self.ends:
                    self.proctor.cause("saves", self.user.username, at)
            elif resp.status == 403 and json.loads(body).get("error") == "exam_over":
                self.refused_at = at
                return
            else:
                self.proctor.failed("saves", f"http_{resp.status}")
                etag = "*"
            await asyncio.sleep(random.uniform(*SAVE_PAUSE))

    async def trying(self):
        """Run or check the exam file in turn, each acknowledged by its answer."""
        await pause((0, TRY_PAUSE[1]), self.ends - time.time() + time.monotonic())
        n = 0
        while time.time() < self.ends - 2:
            n += 1
            kind = "checks" if n % 3 == 0 else "runs"
            at = time.time()
            outcome = await (self.check() if kind == "checks" else self.run())
            if outcome is None:
                self.proctor.cause(kind, self.user.username, at)
            else:
                self.proctor.failed(kind, outcome)
                if outcome == "no_answer" or outcome.startswith("socket"):
                    with contextlib.suppress(Exception):
                        await self.ide.reopen()
                    self.typist.based = False  # a new socket is a new stream
            await asyncio.sleep(max(0.0, min(random.uniform(*TRY_PAUSE), self.ends - time.time())))

    async def answer(self, ask, done, timeout=60):
        """Send `ask`, then read messages until `done(message)` says it is the one: None, or why not."""
        import aiohttp
        deadline = time.monotonic() + timeout
        while not self.inbox.empty():  # (answers to what went before: none is awaited now)
            self.inbox.get_nowait()
        try:
            await self.ide.send(**ask)
            while True:
                message = await asyncio.wait_for(self.inbox.get(), max(0.0, deadline - time.monotonic()))
                if message["type"] == "_closed":
                    return message["why"]
                if message.get("type") == "error" and message.get("error") not in ("not_running", "edits_out_of_step"):
                    return "refused_" + str(message.get("error"))
                if message.get("type") == "error" and message.get("error") == "edits_out_of_step":
                    self.typist.based = False
                    continue
                verdict = done(message)
                if verdict is not False:
                    return verdict
        except asyncio.TimeoutError:
            return "no_answer"
        except (ConnectionError, aiohttp.ClientError):
            return "socket"

    async def run(self):
        return await self.answer({"type": "run", "path": FILE, "area": self.area, "cols": 80, "rows": 24},
                                 lambda m: (None if m.get("reason") in ("ok", "error") else f"exit_{m.get('reason')}")
                                 if m.get("type") == "exit" else False)

    async def check(self):
        return await self.answer({"type": "check", "class": self.exam["class_id"], "exercise": "average",
                                  "area": self.area},
                                 lambda m: None if m.get("type") == "check" and m.get("state") == "done" else False)

    async def signal(self, detail):
        resp, _ = await self.user.request("POST", f"/api/exams/{self.exam['id']}/signals", detail)
        return resp.status == 201

    async def pasting(self):
        while True:
            await asyncio.sleep(random.uniform(*PASTE_PAUSE))
            if time.time() > self.ends - 2:
                return
            self.typist.paste(PASTED)
            at = time.time()
            if await self.signal({"kind": "paste", "chars": len(PASTED), "outside": True}):
                self.proctor.cause("signals", self.user.username, at)
            else:
                self.proctor.failed("signals", "refused")

    async def leaving(self):
        while True:
            await asyncio.sleep(random.uniform(*AWAY_PAUSE))
            away = random.uniform(*AWAY_FOR)
            if time.time() > self.ends - away - 2:
                return
            for detail in ({"kind": "focus_lost"}, {"kind": "focus_back", "away_seconds": round(away, 1)}):
                at = time.time()
                if await self.signal(detail):
                    self.proctor.cause("signals", self.user.username, at)
                else:
                    self.proctor.failed("signals", "refused")
                if detail["kind"] == "focus_lost":
                    await asyncio.sleep(away)


async def set_up(server, teacher, logins, duration, timeout):
    """The class, its exercise and the exam (ending `duration` s from now): (class number, exam)."""
    from .client import VirtualUser, check_status
    number = await make_class(server, teacher, logins, timeout)
    async with VirtualUser(server.url, timeout) as staff:
        await staff.sign_in(*teacher)
        resp, _ = await staff.request("PUT", f"/api/classes/{number}/exercises/average", EXERCISE)
        check_status(resp.status, 200)
        ends = datetime.now(timezone.utc) + timedelta(seconds=duration)
        resp, body = await staff.request("POST", f"/api/classes/{number}/exams",
                                         {"title": "Benchmark exam", "exercises": ["average"], "starts": "now",
                                          "ends": ends.isoformat()})
        check_status(resp.status, 201)
        return number, json.loads(body)["exam"]


async def kept(server, teacher, exam, takers, timeout):
    """The lock: per student, when their first save was refused after the
    end, and whether their folder holds their last acknowledged save."""
    from .client import VirtualUser
    lost, never_refused, refused_after = [], 0, []
    async with VirtualUser(server.url, timeout) as staff:
        await staff.sign_in(*teacher)
        for t in takers:
            if t.refused_at is None:
                never_refused += 1
            else:
                refused_after.append(t.refused_at - t.ends)
            if t.acknowledged is None:
                continue
            resp, body = await staff.request("GET", f"/api/files/exams/{exam['id']}/{t.user.username}/{FILE}")
            if resp.status != 200 or json.loads(body)["content"] != t.acknowledged[0]:
                lost.append(t.user.username)
    refused_after.sort()

    def at(p):
        return round(refused_after[min(len(refused_after) - 1, int(p * len(refused_after)))], 2) \
            if refused_after else None
    last_ack = [t.acknowledged[1] - t.ends for t in takers if t.acknowledged]
    return {"refused_after_end_s": {"p50": at(0.5), "p95": at(0.95), "max": at(1.0), "min": at(0.0)},
            "last_acknowledged_after_end_s": round(max(last_ack), 2) if last_ack else None,
            "never_refused": never_refused, "lost_saves": len(lost), "lost_of": lost[:10]}


def replay_log(dsn, exam_id):
    """(bytes, rows, characters typed) of the exam's replay log."""
    import psycopg2
    with contextlib.closing(psycopg2.connect(dsn)) as conn, conn.cursor() as cur:
        cur.execute("SELECT coalesce(sum(bytes), 0), count(*), coalesce(sum(typed), 0) FROM edit_log "
                    "WHERE exam_id = %s", (exam_id,))
        return cur.fetchone()


async def run_exam(server, teacher, logins, duration, timeout, every):
    from .client import VirtualUser, log_in_all
    from .run_client import open_ides
    proctor = Proctor(timeout)
    setup = {}
    number, exam = await set_up(server, teacher, logins, duration, timeout)
    ends = datetime.fromisoformat(exam["ends"]).timestamp()
    async with contextlib.AsyncExitStack() as stack:
        users, failed = await log_in_all(lambda: VirtualUser(server.url, timeout), logins, stack)
        setup.update({f"login_{k}": n for k, n in failed.items()})
        ides, failed = await open_ides(server.url, users, stack, timeout)
        setup.update({f"socket_{k}": n for k, n in failed.items()})
        users = [users[ide.index] for ide in ides]
        roles = ["paster", "leaver", "", "", ""]
        takers = [Taker(u, ide, exam, proctor, ends, roles[i % len(roles)]) for i, (u, ide) in enumerate(zip(users, ides))]
        browser = await launch(stack)
        context, page = await signed_in_page(browser, server.url, teacher, f"/class/{number}?exam={exam['id']}",
                                             timeout, WATCH_JS, viewport=VIEWPORT)
        await page.wait_for_function("(n) => document.querySelectorAll('li.tile').length >= n", arg=len(logins),
                                     timeout=timeout * 1000)
        cdp = await context.new_cdp_session(page)
        await cdp.send("Performance.enable")
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)[:200]))
        proctor.see(*await page.evaluate("window.__examBench.take()"))
        started = time.monotonic()
        cpu = CpuWatch(server.pids).start()
        series = [await memory(page, cdp, started)]
        load = asyncio.ensure_future(asyncio.gather(*(t.take() for t in takers)))
        next_sample = started + every
        while not load.done() or (proctor.pending and time.monotonic() < started + duration + timeout + 30):
            await asyncio.sleep(DRAIN_SECONDS)
            proctor.see(*await page.evaluate("window.__examBench.take()"))
            proctor.match()
            if time.monotonic() >= next_sample and not load.done():
                series.append(await memory(page, cdp, started))
                next_sample += every
        await load
        used = cpu.stop()
        proctor.see(*await page.evaluate("window.__examBench.take()"))
        proctor.match(final=True)
        series.append(await memory(page, cdp, started))
        wall = time.monotonic() - started
        await context.close()
        lock = await kept(server, teacher, exam, takers, timeout)
    await asyncio.sleep(3)  # (the sockets closed: their replay rows are written within a second)
    stored, rows, typed = replay_log(server.env["DATABASE_URL"], exam["id"])
    student_hours = len(takers) * duration / 3600
    errors_by_student = {}
    for t in takers:
        for kind, n in t.errors.items():
            errors_by_student[kind] = errors_by_student.get(kind, 0) + n
    return {"students": len(logins), "taking": len(takers), "duration_s": duration, "wall_s": round(wall, 1),
            "server_cpu": used["server_cpu"], "machine_busy": used["machine_busy"], "setup_errors": setup,
            "page_errors": errors[:20], **proctor.summaries(), "lock": lock,
            "replay": {"bytes": stored, "rows": rows, "typed_chars": typed,
                       "bytes_per_student_hour": round(stored / student_hours) if student_hours else None,
                       "typed_per_student_hour": round(typed / student_hours) if student_hours else None},
            "memory": series}


def measure(args, deadline):
    def one(server, logins, processes, count):
        say(f"  {processes} process(es): {count} students taking a {args.duration:g} s exam, "
            "the teacher's proctor view open in Chromium ...")
        [teacher] = insert_users(server.env["DATABASE_URL"], make_credentials(1, "teacher"), role="teacher")
        return run_async(run_exam(server, teacher, logins, args.duration, args.timeout, args.memory_every), deadline)

    return each_load("bench-exam", args.processes, [args.students], one, ASSIST_PROCESSES=0,
                     RUN_MAX_CONCURRENT=args.students + 8)


def report(settings, info, results):
    lines = [f"a student's event → the proctor view shows it ({settings['students']} students typing twice a "
             f"second, saving every 1-2 s, running or checking every 20-40 s; a fifth pasting, a fifth leaving "
             f"the page; {settings['duration']:g} s)",
             f"{'processes':>9}  {'events':<8} {'caused':>6}  {'shown':>6}  {'failed':>6}  {'p50 ms':>7}  "
             f"{'p95 ms':>7}  {'max ms':>7}"]
    for r in results:
        for kind in KINDS:
            s = r[kind]
            lines.append(f"{r['processes']:>9}  {kind:<8} {s['caused']:>6}  {s['count']:>6}  {s['errors']:>6}  "
                         f"{fmt(s['p50_ms'], '7.0f')}  {fmt(s['p95_ms'], '7.0f')}  {fmt(s['max_ms'], '7.0f')}")
    for r in results:
        p = f"{r['processes']} process(es)"
        for kind in KINDS:
            lines += error_lines(f"{kind}, {p}", r[kind]["errors_by_kind"])
        lines += error_lines(f"setting up, {p}", r["setup_errors"])
        lock = r["lock"]
        lines.append(f"the lock, {p}: the first save refused {lock['refused_after_end_s']['p50']} s after the end "
                     f"(p50; p95 {lock['refused_after_end_s']['p95']}, max {lock['refused_after_end_s']['max']}; "
                     f"grace {GRACE:g} s); the last acknowledged save {lock['last_acknowledged_after_end_s']} s "
                     f"after it; {lock['lost_saves']} acknowledged saves lost; {lock['never_refused']} students "
                     "never refused")
        replay = r["replay"]
        lines.append(f"the replay log, {p}: {replay['bytes']} bytes in {replay['rows']} rows, "
                     f"{replay['bytes_per_student_hour']} bytes per student-hour of typing "
                     f"({replay['typed_per_student_hour']} characters typed per student-hour)")
        lines.append(f"{p}: the server used {fmt(r['server_cpu'], '.2f')} of a core (its workers and file "
                     f"processes), the machine was {pct(r['machine_busy'])} busy")
        lines += page_lines(r, p, f"the proctor's page, {p} ({r['taking']} of {r['students']} students taking it)")
    lines.append(describe(info))
    lines.append("the students, Chromium and the server share this machine")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_exam", description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int_list, default=[2], help="worker process counts (default 2)")
    parser.add_argument("--students", type=int, default=150, help="students taking the exam (default 150)")
    parser.add_argument("--duration", type=float, default=600, help="seconds the exam lasts (default 600)")
    parser.add_argument("--memory-every", type=float, default=60,
                        help="seconds between readings of the page's memory (default 60)")
    server_root_option(parser)
    bounds(parser, max_seconds=3600, what="request, and for an event to show")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.students < 1 or args.duration < 15 or args.memory_every <= 0:
        parser.error("--students and --memory-every must be positive, and --duration at least 15 s")
    settings = {"students": args.students, "duration": args.duration, "processes": args.processes}
    results, status = run_benchmark(args, measure, lambda info, results: report(settings, info, results),
                                    lambda: settings)
    if status is not None:
        return status
    failed = any(r[kind]["errors"] for r in results for kind in KINDS) or any(
        r["setup_errors"] or r["lock"]["lost_saves"] or r["lock"]["never_refused"] for r in results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
