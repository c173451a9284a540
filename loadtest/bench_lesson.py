"""A played lesson, timed from each event to what the teacher or a student
sees of it: the figures issue 30 asks for, on 1 and 2 workers in one sitting.

    python -m loadtest.bench_lesson [--students 60] [--browsers 3] [--rounds 10]
                                    [--processes 1,2] [--server-root DIR] [--json OUT]

Per process count a fresh server (SANDBOX=local, RUN_MAX_CONCURRENT above
the class), a class of --students students and its teacher, who writes
loadtest/check_exercise.py's exercise and pushes lesson.py from the class's
course folder. The teacher's /class/<id> and --browsers students' IDEs,
each with lesson.py open, are in headless Chromium (Debian's, Playwright)
at 1366x768; the other students work through the HTTP API and an IDE
socket each (/ws/run), as bench_class_view's and bench_checks' do. Then
--rounds rounds, one figure after the other:

  step     5 students press Debug on a loop that never ends and step it for
           3 s, 0.3 s ±50% apart (bench_debug's `stepping`): `step` sent →
           the `paused` that answers it received.
  errors   20 students (fewer in a smaller class) save the same program,
           whose line 3 names a variable that is new each round, and run it
           at once: the 20th `exit` (NameError) received → the teacher's
           "Mistakes now" shows a group of 20 with that name.
  push     the teacher saves a new lesson.py (a text new each round) and
           pushes it to the class: the push request sent → the new text in
           the editor of each student's page.
  check    each API student's IDE shows the exercise (`prepare_check`,
           once: after a check the server prepares the next) and all press
           Check within 1 s (bench_checks' `press_check`, every score
           verified): `check` sent → the `done` attempt received.
  message  the teacher writes to the class (at most 6 a minute per class,
           so at least 10.5 s apart): the request sent → the message on
           each student's page.

How "shown" is timed. A script added to each page before its own
(`add_init_script`) is told, before the event, what to wait for (a CSS
selector and a text) and a MutationObserver records, with Date.now(), the
first moment an element matching it holds the text; Date.now() reads the
same wall clock as this script's time.time() (one machine), to the
millisecond. Shown means the DOM holds it; the paint that follows within
the frame is not included. A page that showed it before this script read
its event (it lags) counts as 0 ms, and is counted apart. Socket figures
are timed here, from the send to the receipt. The API students' sockets
are read all along (the server closes a socket that answers no ping).

Every event is measured or a failure, counted by kind: not shown within
--timeout, a refused request, a run that did not end with the NameError, a
wrong score, a step answered by anything but `paused`. The load average is
read at the start and end of each server's rounds: another engineer's
browser tests may share the machine. Every loop is bounded in count and
time (--timeout each wait, --max-seconds in all); everything is removed
on exit, error or Ctrl-C.
"""
import argparse
import asyncio
import contextlib
import secrets
import sys
import time

from .cli import Aborted, bounds, int_list, run_benchmark, say, server_root_option
from .harness import each_load, insert_users, make_credentials, run_async
from .machine import describe
from .recording import error_lines, fmt

FIGURES = [  # (key, what is timed)
    ("errors", "20th identical NameError → its group on the teacher's page"),
    ("push", "teacher's push → the new text in an open editor"),
    ("check", "Check → its result received"),
    ("message", "teacher's message → on a student's page"),
    ("step", "debugger step → the paused line received"),
]
GROUP = 20  # students who make the same mistake
DEBUGGERS = 5  # students who step through a program each round
DEBUG_SECONDS = 3.0
THINK = 0.3  # seconds between a student's steps (±50%)
MESSAGE_GAP = 10.5  # the server takes 6 messages a minute per class
POLL = 0.05  # seconds between readings of what the pages recorded
LESSON = "lesson.py"
OOPS = "oops.py"
OOPS_LINE = 3
STEPS = "bench_steps.py"

# Each page's watcher: what to wait for, and when it was first there.
WATCH_JS = """(() => {
  const lesson = window.__lesson = { watches: new Map(), seen: {} };
  const look = () => {
    if (!lesson.watches.size) return;
    const t = Date.now();
    for (const [id, w] of lesson.watches) {
      for (const el of document.querySelectorAll(w.selector)) {
        if (el.textContent.includes(w.text)) { lesson.seen[id] = t; lesson.watches.delete(id); break; }
      }
    }
  };
  lesson.watch = (id, selector, text) => { lesson.watches.set(id, { selector, text }); look(); };
  lesson.take = () => { const out = lesson.seen; lesson.seen = {}; return out; };
  new MutationObserver(look).observe(document, { subtree: true, childList: true, characterData: true,
                                                 attributes: true });
})();"""


def oops_program(name):
    return f"total = 0\nfor i in range(3):\n    total = total + {name}\nprint(total)\n"


class Figures:
    """A recorder per figure, what each caused, and those shown before
    this script read their event."""

    def __init__(self):
        from .recording import Recorder
        self.recorders = {key: Recorder() for key, _ in FIGURES}
        self.recorders["debug_start"] = Recorder()  # Debug → the first pause, apart from the steps
        self.before = {key: 0 for key in self.recorders}

    def success(self, key, seconds):
        self.recorders[key].success(max(0.0, seconds))

    def error(self, key, kind):
        self.recorders[key].error(kind)

    async def shown(self, key, pages, ident, at, timeout):
        """Wait (at most `timeout` s) until every page recorded `ident`;
        each is a success from `at` (time.time()) or a failure."""
        deadline = time.monotonic() + timeout
        waiting = dict(enumerate(pages))
        while waiting:
            for n, page in list(waiting.items()):
                t = (await page.evaluate("window.__lesson.take()")).get(ident)
                if t is not None:
                    del waiting[n]
                    if t / 1000 < at:
                        self.before[key] += 1
                    self.success(key, t / 1000 - at)
            if waiting and time.monotonic() >= deadline:
                for page in waiting.values():
                    self.error(key, "never_shown")
                    await page.evaluate("(id) => window.__lesson.watches.delete(id)", ident)
                return
            if waiting:
                await asyncio.sleep(POLL)

    def summaries(self):
        out = {}
        for key, recorder in self.recorders.items():
            s = recorder.summary()
            out[key] = {**s, "events": s["count"] + s["errors"], "shown_before_event": self.before[key]}
        return out


async def watch(pages, ident, selector, text):
    for page in pages:
        await page.evaluate("([id, selector, text]) => window.__lesson.watch(id, selector, text)",
                            [ident, selector, text])


class Lesson:
    """One class on one server: its people, pages and sockets, and the rounds."""

    def __init__(self, server, timeout, figures):
        self.server, self.url, self.timeout, self.figures = server, server.url, timeout, figures
        self.last_message = 0.0
        self.exercise_open = False
        self.check_steps = {"positions": [], "estimates": [], "waits": [], "runnings": []}  # what press_check saw

    async def set_up(self, stack, teacher, logins, browsers):
        from .bench_checks import start_and_save, write_exercise
        from .bench_class_view import make_class, open_view
        from .bench_debug import STEPPED
        from .client import VirtualUser
        from .pages import launch, signed_in_page
        from .run_phases import ides, log_in, save_everywhere
        self.number = await make_class(self.server, teacher, logins, self.timeout)
        self.area = f"class/{self.number}"
        self.slug, file, submission = write_exercise(self.url, self.number, teacher)
        self.teacher = await stack.enter_async_context(VirtualUser(self.url, self.timeout))
        await self.teacher.sign_in(*teacher)
        on_pages, api = logins[:browsers], logins[browsers:]
        self.users = await log_in(self.url, api, stack, self.timeout)
        self.submissions = await start_and_save(self.users, self.number, self.slug, file, submission)
        self.erring = self.users[:GROUP]
        self.debuggers = self.users[-DEBUGGERS:]
        await save_everywhere(self.debuggers, STEPS, STEPPED)
        first = f"# lesson, first version ({secrets.token_hex(4)})\n"
        if await self.push(first) != 200:
            raise Aborted("the teacher could not push the first lesson.py")
        self.sockets = await ides(self.url, self.users, stack, self.timeout)
        self.ide_of = dict(zip((u.username for u in self.users), self.sockets))
        browser = await launch(stack)
        context, self.class_page, _ = await open_view(browser, self.server, teacher, self.number, len(logins),
                                                      self.timeout, WATCH_JS)
        stack.push_async_callback(context.close)
        self.page_errors = []
        self.class_page.on("pageerror", lambda e: self.page_errors.append(str(e)[:200]))
        self.student_pages = []
        for login in on_pages:
            context, page = await signed_in_page(browser, self.url, login, "/ide", self.timeout, WATCH_JS)
            stack.push_async_callback(context.close)
            page.on("pageerror", lambda e: self.page_errors.append(str(e)[:200]))
            await page.locator(f'.tree-section[data-area="home"] .tree-row[data-path="{LESSON}"]').click(
                timeout=self.timeout * 1000)
            await page.wait_for_function("(text) => document.querySelector('#editor .cm-content')"
                                         "?.textContent.includes(text)", arg=first.strip(),
                                         timeout=self.timeout * 1000)
            self.student_pages.append(page)

    async def push(self, text):
        """The teacher saves `text` as the course's lesson.py and pushes it
        to the class: the push's HTTP status (0: the save was refused)."""
        async with self.teacher.http.put(f"{self.url}/api/files/{self.area}/{LESSON}", data=text.encode(),
                                         headers={"X-XSRFToken": self.teacher.xsrf, "If-Match": "*"}) as resp:
            await resp.read()
        if resp.status != 200:
            return 0
        resp, _ = await self.teacher.request("POST", "/api/course/push", {"area": self.area, "path": LESSON})
        return resp.status

    async def round(self, n):
        async with self.listening(self.sockets):
            await self.steps()
        async with self.listening(self.sockets[len(self.erring):]):
            await self.errors(n)
        async with self.listening(self.sockets):
            await self.pushed(n)
        await self.checks()
        async with self.listening(self.sockets):
            await self.message(n)

    @contextlib.asynccontextmanager
    async def listening(self, sockets):
        """Read (and drop) what these IDE sockets receive meanwhile: aiohttp
        answers the server's pings only as a socket is read, and the server
        closes a socket whose pings go unanswered."""
        from .client import CheckFailed
        stop = asyncio.Event()

        async def drain(sock):
            while not stop.is_set():
                try:
                    await sock.receive(0.25)
                except asyncio.TimeoutError:
                    pass
                except CheckFailed:
                    return  # closed: the next figure that uses it counts the failure
        readers = asyncio.gather(*(drain(s) for s in sockets))
        try:
            yield
        finally:
            stop.set()
            await readers

    async def steps(self):
        from .bench_debug import stepping
        from .client import error_kind
        figures = self.figures

        async def one(user):
            try:
                await stepping(self.url, user.cookies(), DEBUG_SECONDS, THINK, self.timeout,
                               figures.recorders["step"], figures.recorders["debug_start"])
            except Exception as e:  # a socket that broke or an answer that never came
                figures.error("step", error_kind(e))
        await asyncio.gather(*(one(u) for u in self.debuggers))

    async def errors(self, n):
        from .bench_class_view import one_run
        from .client import error_kind
        name = f"lenght_r{n}_{secrets.token_hex(2)}"
        saved = await asyncio.gather(*(u.put_file(OOPS, oops_program(name)) for u in self.erring),
                                     return_exceptions=True)
        bad = [error_kind(s) if isinstance(s, Exception) else f"save_http_{s[0].status}"
               for s in saved if isinstance(s, Exception) or s[0].status != 200]
        if bad:
            return self.figures.error("errors", bad[0])
        ident = f"group-{n}"
        await watch([self.class_page], ident, f'#class-mistakes .group-btn[data-count="{len(self.erring)}"]',
                    f"`{name}` at line {OOPS_LINE} of {OOPS}")

        async def run(user):
            ide = self.ide_of[user.username]
            reason = await one_run(ide, OOPS, self.timeout)
            if reason in ("no_exit", "socket"):
                with contextlib.suppress(Exception):
                    await ide.reopen()
            return reason, time.time()
        ended = await asyncio.gather(*(run(u) for u in self.erring))
        wrong = [reason for reason, _ in ended if reason != "error"]
        if wrong:
            return self.figures.error("errors", f"exit_{wrong[0]}")
        await self.figures.shown("errors", [self.class_page], ident, max(t for _, t in ended), self.timeout)

    async def pushed(self, n):
        token = secrets.token_hex(6)
        ident = f"push-{n}"
        await watch(self.student_pages, ident, "#editor .cm-content", token)
        at = time.time()
        status = await self.push(f"# lesson, version {n} ({token})\nprint('version {n}')\n")
        if status != 200:
            for _ in self.student_pages:
                self.figures.error("push", f"push_http_{status}")
            return
        await self.figures.shown("push", self.student_pages, ident, at, self.timeout)

    async def checks(self):
        import random

        import aiohttp

        from .bench_checks import SPREAD, exercise_shown, press_check
        from .client import error_kind
        if not self.exercise_open:  # once: after a check the server starts the next one's sandbox itself
            self.exercise_open = True
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout)) as http:
                try:
                    await exercise_shown(http, self.url, self.sockets)
                except Exception as e:  # a socket that closed, or a refusal: its Check is counted as failed below
                    say(f"  showing the exercise failed: {e}")
        count = len(self.sockets)
        seen = self.check_steps
        begun = time.monotonic()

        async def one(index, delay):
            await asyncio.sleep(max(0.0, begun + delay - time.monotonic()))
            etag, right = self.submissions[index]
            try:
                took = await press_check(self.sockets[index], self.number, self.slug, etag, right, self.timeout, seen)
            except Exception as e:
                self.figures.error("check", error_kind(e))
            else:
                self.figures.success("check", took)
        await asyncio.gather(*(one(i, random.uniform(0, SPREAD)) for i in range(count)))

    async def message(self, n):
        await asyncio.sleep(max(0.0, self.last_message + MESSAGE_GAP - time.monotonic()))
        token = secrets.token_hex(6)
        ident = f"message-{n}"
        await watch(self.student_pages, ident, "#talk-notices", token)
        at = time.time()
        self.last_message = time.monotonic()
        resp, _ = await self.teacher.request("POST", f"/api/classes/{self.number}/messages",
                                             {"text": f"Everyone, look at the board, please ({token})."})
        if resp.status != 201:
            for _ in self.student_pages:
                self.figures.error("message", f"http_{resp.status}")
            return
        await self.figures.shown("message", self.student_pages, ident, at, self.timeout)


async def play(server, teacher, logins, args, deadline):
    import os
    figures = Figures()
    lesson = Lesson(server, args.timeout, figures)
    async with contextlib.AsyncExitStack() as stack:
        say("  setting up the class, its pages and sockets ...")
        await lesson.set_up(stack, teacher, logins, args.browsers)
        await asyncio.sleep(2.0)  # the pages settle; what they drew so far is not an event of ours
        load_before = [round(v, 2) for v in os.getloadavg()]
        started = time.monotonic()
        played = 0
        for n in range(1, args.rounds + 1):
            if time.monotonic() > deadline - 2 * args.timeout:
                say(f"  stopping after {played} rounds: --max-seconds is near")
                break
            say(f"  round {n} of {args.rounds} ...")
            await lesson.round(n)
            played += 1
            server.ensure_running()
        wall = time.monotonic() - started
        load_after = [round(v, 2) for v in os.getloadavg()]
        from .bench_checks import latencies
        steps = lesson.check_steps
        return {"check_wait": latencies(steps["waits"]), "check_running": latencies(steps["runnings"]),
                "check_largest_place": max((p for p in steps["positions"] if isinstance(p, int)), default=None),
                "students": len(logins), "in_browsers": len(lesson.student_pages), "through_api": len(lesson.users),
                "group": len(lesson.erring), "debuggers": len(lesson.debuggers), "rounds": played,
                "wall_s": round(wall, 1), "load_average_before": load_before, "load_average_after": load_after,
                "page_errors": lesson.page_errors[:20], **figures.summaries()}


def measure(args, deadline):
    from server import config

    from .run_phases import sandbox_problem
    problem = sandbox_problem("local", config.load())
    if problem:
        raise Aborted(f"a lesson's checks and runs need the local sandbox: {problem}")

    def one(server, logins, processes, count):
        say(f"{processes} worker process(es): a lesson of {count} students, {args.rounds} rounds ...")
        [teacher] = insert_users(server.env["DATABASE_URL"], make_credentials(1, "teacher"), role="teacher")
        return run_async(play(server, teacher, logins, args, deadline), deadline)

    return each_load("bench-lesson", args.processes, [args.students], one, SANDBOX="local",
                     RUN_MAX_CONCURRENT=args.students + 16, RUN_QUEUE_MAX=200)


def report(args, info, results):
    lines = [f"a played lesson: {args.students} students ({args.browsers} in Chromium, the others through the API), "
             f"{args.rounds} rounds; each figure from the event to the DOM holding it (pages) or its receipt "
             "(sockets)",
             f"{'processes':>9}  {'figure':<58} {'events':>6} {'failed':>6} {'p50 ms':>8} {'p95 ms':>8} "
             f"{'max ms':>8}"]
    for r in results:
        for key, what in FIGURES:
            s = r[key]
            lines.append(f"{r['processes']:>9}  {what:<58} {s['events']:>6} {s['errors']:>6} "
                         f"{fmt(s['p50_ms'], '8.0f')} {fmt(s['p95_ms'], '8.0f')} {fmt(s['max_ms'], '8.0f')}")
    for r in results:
        where = f"{r['processes']} process(es)"
        lines.append(f"{where}: {r['rounds']} rounds in {r['wall_s']:.0f} s; a group of {r['group']}, "
                     f"{r['debuggers']} students debugging, {r['in_browsers']} students' pages; load average "
                     f"(1, 5, 15 min) {r['load_average_before']} at the start, {r['load_average_after']} at the end")
        start = r["debug_start"]
        lines.append(f"  Debug → first pause: p50 {fmt(start['p50_ms'], '.0f')} ms, p95 "
                     f"{fmt(start['p95_ms'], '.0f')} ms ({start['count']} ok, {start['errors']} failed)")
        wait, running = r["check_wait"], r["check_running"]
        lines.append(f"  Check → running (waiting in line): p50 {fmt(wait['p50_ms'], '.0f')} ms, p95 "
                     f"{fmt(wait['p95_ms'], '.0f')} ms (largest place in line {fmt(r['check_largest_place'], 'd')}); "
                     f"running → result: p50 {fmt(running['p50_ms'], '.0f')} ms, p95 "
                     f"{fmt(running['p95_ms'], '.0f')} ms")
        for key in [k for k, _ in FIGURES] + ["debug_start"]:
            lines += error_lines(f"{key}, {where}", r[key]["errors_by_kind"])
            if r[key]["shown_before_event"]:
                lines.append(f"  {key}: {r[key]['shown_before_event']} shown before this script read the event "
                             "(counted as 0 ms)")
        if r["page_errors"]:
            lines.append(f"  the pages' errors: {r['page_errors']}")
    lines.append(describe(info))
    lines.append("the students, Chromium and the server share this machine")
    return "\n".join(lines)


def failures(result):
    return sum(result[key]["errors"] for key in [k for k, _ in FIGURES] + ["debug_start"])


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_lesson", description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int_list, default=[1, 2], help="worker process counts (default 1,2)")
    parser.add_argument("--students", type=int, default=60, help="students in the class (default 60)")
    parser.add_argument("--browsers", type=int, default=3, help="of them, with their IDE in Chromium (default 3)")
    parser.add_argument("--rounds", type=int, default=10, help="rounds of the five figures (default 10, at most 100)")
    server_root_option(parser)
    bounds(parser, max_seconds=3600, what="wait for an answer or for a page to show it")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not 1 <= args.browsers < args.students or not 1 <= args.rounds <= 100:
        parser.error("--browsers must be at least 1 and fewer than --students; --rounds from 1 to 100")
    settings = {k: getattr(args, k) for k in ("students", "browsers", "rounds", "processes", "timeout", "server_root")}
    results, status = run_benchmark(args, measure, lambda info, results: report(args, info, results),
                                    lambda: settings)
    if status is not None:
        return status
    return 1 if any(failures(r) or r["page_errors"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
