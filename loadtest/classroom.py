"""The classroom scenario of the load test (`loadtest.loadtest`): each
student arrives (within ARRIVAL_S class seconds), logs in, opens the file
tree and a file and the IDE, then "types": an autosave every AUTOSAVE_S
class seconds, and every RUN_EVERY_S a save and a run with one input.
`pace` compresses class time (pace 10: ten times as fast). Actions happen
at scheduled times and are timed from them, so a student held up by a slow
answer is late for the next action and that lateness counts: it is open
loop by nature (--rate does not apply). Autosaves go on while a program
runs, as in the IDE; saves of the one file go one at a time.
"""
import asyncio
import contextlib
import json
import random
import time

from . import loadgen
from .client import FILE_BYTES, CheckFailed, Student, check_status, error_kind, worker_pid
from .recording import cpu_seconds
from .run_client import ECHO_PROGRAM, RunClient, ws_session
from .scenarios import RUN_GAP, Scenario, sleep_until, timed_run

CLASSROOM_PATH = "loadtest_classroom.py"
AUTOSAVE_S = 5.0     # class seconds between autosaves (+-50%)
RUN_EVERY_S = 30.0   # class seconds between runs (+-20%)
ARRIVAL_S = 30.0     # class seconds over which the students arrive


class ClassroomEditor(Student):
    """A student's file in the classroom: a program that runs (it prints,
    reads one input() and prints it back), growing comments as it is typed."""

    def new_text(self):
        self.count += 1
        text = ECHO_PROGRAM + f"# {self.username}, typing, autosave {self.count}\n"
        size = random.randint(*FILE_BYTES)
        while len(text) < size:
            text += "# " + random.randbytes(24).hex() + "\n"
        return text[:size - 1] + "\n"

    async def open(self):
        """What opening the IDE does: the file tree, then the file (a 404
        is fine: a new student has not written it yet)."""
        async with self.user.http.get(f"{self.user.base_url}/api/files/home?tree=1") as resp:
            await resp.read()
        check_status(resp.status, 200)
        async with self.user.http.get(self.url) as resp:
            body = await resp.read()
        if resp.status == 404:
            self.etag = self.saved = None
        else:
            check_status(resp.status, 200)
            try:
                answer = json.loads(body)
                self.etag, self.saved = answer["etag"], answer["content"]
            except (ValueError, KeyError, TypeError):
                raise CheckFailed("bad_body", repr(body[:200])) from None
        return worker_pid(resp)


class Classroom(Scenario):
    name = "classroom"
    metrics = ("all", "login", "open", "save", "run first output", "run exit")
    primary = "all"
    entry = "login"
    paced = True
    aggregates = {"all": (("login", "open", "save", "run first output"),
                          ("login", "open", "save", "run first output", "run exit"))}

    @property
    def about(self):
        pace = self.cell.pace
        return (f"each student arrives (within {ARRIVAL_S:g} s), logs in, opens the tree and a file and the IDE, "
                f"then types: autosave every {AUTOSAVE_S:g} s, save + run with one input every {RUN_EVERY_S:g} s; "
                f"class time {pace:g}x faster (--pace {pace:g}); every action timed from its scheduled time; "
                "all = login, open, save and run first output together")

    queued = 0  # `queued` messages of the sockets closed so far: runs that waited for a place

    def counters(self, actors):
        return {"queued_messages": self.queued}

    async def measure(self, actors, budget, recs):
        budget.start()
        cell = self.cell
        span = ARRIVAL_S / cell.pace
        if budget.duration is not None:
            span = min(span, budget.duration / 4)  # everyone gets to work within the window
        cpu, first = cpu_seconds(), time.perf_counter()
        async with contextlib.AsyncExitStack() as stack:
            http = await stack.enter_async_context(ws_session(cell.timeout))
            await asyncio.gather(*(self.student(i, creds, first + random.uniform(0, span), budget, recs, http)
                                   for i, creds in enumerate(cell.credentials)))
            window = loadgen.Window(time.perf_counter() - first, cpu_seconds() - cpu)
        return window, None

    async def student(self, index, credentials, arrive, budget, recs, http):
        username, password = credentials
        await sleep_until(arrive)
        if not budget.take(arrive):
            return
        async with contextlib.AsyncExitStack() as stack:
            user = await stack.enter_async_context(self.cell.user())
            if not await loadgen.timed(recs["login"], lambda: user.sign_in(username, password), arrive):
                return
            stack.push_async_callback(self.leave, user)
            editor = ClassroomEditor(user, CLASSROOM_PATH)
            if not await loadgen.timed(recs["open"], editor.open):
                return
            sock = RunClient(self.cell.url, user.cookies(), http, self.cell.timeout, index=index, keep=False)
            try:
                await sock.open()
            except Exception as e:
                recs["open"].error("ide_" + error_kind(e))
                return
            stack.push_async_callback(sock.close)
            try:
                await self.work(editor, sock, budget, recs)
            finally:
                self.queued += sock.queued

    async def work(self, editor, sock, budget, recs):
        """Two timelines, as in the IDE: autosaves while typing, and now and
        then a save and a run; saves of the one file go one at a time."""
        pace = self.cell.pace
        lock = asyncio.Lock()

        async def save(at):
            async with lock:
                ok = await loadgen.timed(recs["save"], editor.save, at)
                if not ok:
                    await editor.resync()
                return ok

        async def typing():
            at = time.perf_counter() + AUTOSAVE_S / pace * random.uniform(0.5, 1.5)
            while budget.take(at):
                await sleep_until(at)
                await save(at)
                at += AUTOSAVE_S / pace * random.uniform(0.5, 1.5)

        async def running():
            spread = RUN_EVERY_S / pace
            if budget.duration is not None:
                spread = min(spread, budget.duration / 4)  # a short window still sees every student run
            at = time.perf_counter() + spread * random.uniform(0.0, 1.0)  # spread, not in step
            last_exit = 0.0
            while budget.take(at):
                await sleep_until(at)
                if await save(at):  # the IDE saves before it runs
                    await sleep_until(last_exit + RUN_GAP)
                    await timed_run(sock, CLASSROOM_PATH, at, recs["run first output"], recs["run exit"])
                    last_exit = time.perf_counter()
                at += RUN_EVERY_S / pace * random.uniform(0.8, 1.2)

        await asyncio.gather(typing(), running())

    @staticmethod
    async def leave(user):
        with contextlib.suppress(Exception):  # housekeeping: sessions do not pile up
            await user.logout()
