"""The load test's scenarios (`server.ops.loadtest`), but for the classroom
(`loadtest_classroom`), and what they share.

Every scenario speaks to the server the way browsers do (`loadgen`'s
VirtualUser: own cookies, own keep-alive connection) and checks every
answer; a failure is an error counted by kind and never a latency.

- `login`: a class logging in at once: per round every user is a new
  browser and all POST /api/login together (real argon2id checks), then log
  out. Open loop: each operation is one login (then an untimed logout).
- `files`: save a 2-4 KiB file (PUT, If-Match of the last save) then load
  it and compare (`bench_files.Student`).
- `run`: run a program that prints, reads one input() and prints it back,
  over the IDE's WebSocket (`bench_runs.RunSocket`); timed to the first
  output and to the exit. A student waits RUN_REST s (+-50%) between runs,
  as one reading the output does (the server starts the next warm sandbox
  after each run).
- `perf`: GET /sys_perf_check?ms=N (PERF_CHECK=1): N ms of CPU work on the
  server's IOLoop and nothing else.
"""
import asyncio
import contextlib
import json
import math
import random
import time
from collections import Counter
from dataclasses import dataclass, field

import aiohttp

from . import bench_runs, loadgen
from .bench_files import FILE_BYTES, LOGIN_CONCURRENCY, Student
from .bench_runs import ECHO_PROGRAM, RunSocket

RUN_PATH = "loadtest_echo.py"
RUN_REST = 1.0       # seconds between one student's runs (+-50%), run scenario
RUN_GAP = 0.25       # at least this long after a run's exit before the next run
SANDBOX_WAIT = 30.0  # longest wait for the IDEs' warm sandboxes before measuring


class SetupFailed(Exception):
    """The check before measuring failed; the message says what to fix."""


@dataclass
class Budget:
    """How much a measurement may do: `duration` seconds or `requests` operations."""
    duration: float = None
    requests: int = None
    taken: int = 0
    end: float = None

    def start(self):
        self.taken = 0
        self.end = time.perf_counter() + self.duration if self.duration is not None else None
        return self

    def take(self, at=None):
        """May one more operation start (at perf_counter time `at`)?"""
        if self.requests is not None:
            self.taken += 1
            return self.taken <= self.requests
        return (time.perf_counter() if at is None else at) < self.end


@dataclass
class Cell:
    """One measurement's settings and what it shares with its scenario."""
    url: str
    credentials: list  # [(username, password)], one per virtual user
    timeout: float = loadgen.REQUEST_TIMEOUT
    rate: float = None  # operations per second: open loop; None: closed loop
    pace: float = 10.0
    perf_ms: int = 10
    tally: loadgen.ServerTiming = field(default_factory=loadgen.ServerTiming)
    only: tuple = None  # ((method, path prefix), ...): the requests tallied; None: all

    def observe(self, response):
        if self.only is None or any(response.method == m and response.url.path.startswith(p) for m, p in self.only):
            self.tally.observe(response.headers)

    def user(self):
        return loadgen.VirtualUser(self.url, self.timeout, on_response=self.observe)


def sleep_until(at):
    return asyncio.sleep(max(0.0, at - time.perf_counter()))


async def log_in_all(cell, stack, credentials, recorder):
    """[(VirtualUser, username)] of those of `credentials` who logged in
    (LOGIN_CONCURRENCY at a time: each is an argon2 hash); each failure is
    a `setup_<kind>` error in `recorder`: a student who never got in."""
    gate = asyncio.Semaphore(LOGIN_CONCURRENCY)

    async def one(username, password):
        user = await stack.enter_async_context(cell.user())
        async with gate:
            await user.fetch_xsrf()
            await user.login(username, password)
        user.username = username
        return user

    users = []
    for outcome in await asyncio.gather(*(one(u, p) for u, p in credentials), return_exceptions=True):
        if isinstance(outcome, Exception):
            recorder.error("setup_" + loadgen.error_kind(outcome))
        else:
            users.append(outcome)
    return users


def ws_session(timeout):
    """One cookie-less session for every IDE socket (RunSocket sends the cookies)."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar(), connector=aiohttp.TCPConnector(limit=0),
                                 timeout=aiohttp.ClientTimeout(total=None, connect=timeout))


# -- scenarios ---------------------------------------------------------------------

class Scenario:
    name = ""
    about = ""
    metrics = ()      # rows of the report, in order
    primary = ""      # the row the verdict compares
    entry = ""        # the row an operation that never started is counted in
    aggregates = {}   # row: (rows whose latencies it merges, rows whose errors it sums)
    rest = 0.0        # seconds a user pauses after each operation (+-50%), closed loop
    open_rest = 0.0   # seconds a user is not free after each operation, open loop
    paced = False     # True: follows its own schedule, --rate does not apply
    # The requests whose Server-Timing is tallied; when set, each timed
    # operation is one such request, so client avg - server total = queue.
    timed_requests = None

    def __init__(self, cell):
        self.cell = cell

    def recorders(self):
        return {m: loadgen.Recorder() for m in self.metrics if m not in self.aggregates}

    async def setup(self, stack, recs):
        """The actors (users, sockets) the operations run on."""
        return []

    async def op(self, actor, scheduled, recs):
        raise NotImplementedError

    def counters(self, actors):
        """Scenario-specific counts, read before and after the measurement."""
        return {}

    async def measure(self, actors, budget, recs):
        """Run operations within `budget`: closed loop, or open loop at
        cell.rate. Returns (Window, OpenLoopStats or None)."""
        budget.start()
        if not actors:
            return loadgen.Window(), None
        if self.cell.rate:
            stats = await loadgen.open_loop(actors, lambda actor, at: self.op(actor, at, recs), self.cell.rate,
                                            recs[self.entry], duration=budget.duration, requests=budget.requests,
                                            max_wait=self.cell.timeout, rest=self.open_rest)
            return stats.window, stats

        async def cycle(actor):
            await self.op(actor, time.perf_counter(), recs)
            if self.rest:  # students do not click in step, and neither should the loop
                await asyncio.sleep(self.rest * random.uniform(0.5, 1.5))

        iterations = math.ceil(budget.requests / len(actors)) if budget.requests is not None else None
        window = await loadgen.closed_loop(actors, cycle, loadgen.Recorder(), iterations=iterations,
                                           duration=budget.duration)
        return window, None


class Login(Scenario):
    name = "login"
    about = ("a class logging in at once: each user a new browser, POST /api/login with its real password "
             "(argon2id), then logout (untimed)")
    metrics = ("login",)
    primary = entry = "login"
    timed_requests = (("POST", "/api/login"),)

    async def setup(self, stack, recs):
        if not self.cell.rate:
            return list(self.cell.credentials)  # rounds make their own browsers
        actors = []
        users = [await stack.enter_async_context(self.cell.user()) for _ in self.cell.credentials]
        for user, creds, outcome in zip(users, self.cell.credentials, await asyncio.gather(
                *(u.fetch_xsrf() for u in users), return_exceptions=True)):
            if isinstance(outcome, Exception):
                recs["login"].error("setup_" + loadgen.error_kind(outcome))
            else:
                actors.append((user, creds))
        return actors

    async def op(self, actor, scheduled, recs):
        user, (username, password) = actor
        if await loadgen.timed(recs["login"], lambda: user.login(username, password), scheduled):
            with contextlib.suppress(Exception):  # housekeeping; the next login shows any trouble
                await user.logout()

    async def measure(self, actors, budget, recs):
        if self.cell.rate:
            return await super().measure(actors, budget, recs)
        budget.start()
        window, housekeeping, rec = loadgen.Window(), Counter(), recs["login"]
        attempts = rec.count + rec.error_count
        while True:  # at least one round
            window += await loadgen.login_round(self.cell.url, actors, rec, housekeeping, self.cell.timeout,
                                                self.cell.observe)
            done = rec.count + rec.error_count - attempts
            if (budget.requests is not None and done >= budget.requests) or \
                    (budget.requests is None and time.perf_counter() >= budget.end):
                return window, None


class Files(Scenario):
    name = "files"
    about = (f"save a {FILE_BYTES[0]}-{FILE_BYTES[1]} byte file (PUT, If-Match), then load it (GET) and "
             "compare; save+load counts both requests")
    metrics = ("save+load", "save", "load")
    primary = "save+load"
    entry = "save"
    aggregates = {"save+load": (("save", "load"), ("save", "load"))}
    timed_requests = (("PUT", "/api/files/"), ("GET", "/api/files/"))

    async def setup(self, stack, recs):
        students = []
        for i, user in enumerate(await log_in_all(self.cell, stack, self.cell.credentials, recs["save"])):
            student = Student(user, user.username, f"loadtest-files-{i}.py")
            await student.resync()  # the file may be there from an earlier measurement: its etag
            students.append(student)
        return students

    async def op(self, student, scheduled, recs):
        ok = (await loadgen.timed(recs["save"], student.save, scheduled)
              and await loadgen.timed(recs["load"], student.load))
        if not ok:
            await student.resync()  # a timed-out save may have landed: the next must not 409


class Run(Scenario):
    name = "run"
    about = ("run a program that prints, reads one input() and prints it back, over the IDE's WebSocket: "
             f"run -> first output, run -> exit; {RUN_REST:g} s +-50% between one student's runs (open loop: "
             f"at least {RUN_GAP:g} s)")
    metrics = ("first output", "exit")
    primary = "first output"
    entry = "exit"  # a run is a success only when it exits as it should: failures count there
    rest = RUN_REST
    open_rest = RUN_GAP

    async def setup(self, stack, recs):
        users = await log_in_all(self.cell, stack, self.cell.credentials, recs["exit"])
        saved = []
        for user, outcome in zip(users, await asyncio.gather(
                *(bench_runs.save_file(u, RUN_PATH, ECHO_PROGRAM) for u in users), return_exceptions=True)):
            if isinstance(outcome, Exception):
                recs["exit"].error("setup_save_" + loadgen.error_kind(outcome))
            else:
                saved.append(user)
        return await open_ides(self.cell, stack, saved, recs["exit"])

    async def op(self, sock, scheduled, recs):
        await timed_run(sock, RUN_PATH, scheduled, recs["first output"], recs["exit"])

    def counters(self, socks):
        # `queued`: the server's line was full (RUN_MAX_CONCURRENT): the run waited for a place
        return {"queued_messages": sum(s.queued for s in socks)}


async def open_ides(cell, stack, users, recorder):
    """One IDE WebSocket per user, opened at once, then (bounded) until the
    server reports their warm sandboxes started; failures are errors."""
    http = await stack.enter_async_context(ws_session(cell.timeout))
    metrics = await stack.enter_async_context(
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=cell.timeout)))
    before, _ = await bench_runs.sandbox_starts(metrics, cell.url)
    sockets = [RunSocket(http, cell.url, user, i, cell.timeout) for i, user in enumerate(users)]
    opened = []
    for sock, outcome in zip(sockets, await asyncio.gather(*(s.open() for s in sockets), return_exceptions=True)):
        if isinstance(outcome, Exception):
            recorder.error("setup_ide_" + loadgen.error_kind(outcome))
        else:
            opened.append(sock)
            stack.push_async_callback(sock.close)  # closing kills its sandbox
    if before is not None:  # /metrics answers: wait for the warm sandboxes
        await bench_runs.wait_for_sandboxes(metrics, cell.url, before + len(opened), SANDBOX_WAIT)
    await asyncio.sleep(0.5)
    return opened


async def timed_run(sock, path, scheduled, first_rec, exit_rec):
    """One checked run of `path`, timed from `scheduled` to its first output
    and to its exit; a failure is an error in `exit_rec`. Returns success."""
    offset = time.perf_counter() - scheduled
    try:
        times = await sock.echo_run(path)
    except Exception as e:  # every failure is a counted error
        exit_rec.error(loadgen.error_kind(e))
        if not isinstance(e, loadgen.CheckFailed) or e.kind.startswith(("socket_", "bad_")):
            # A timeout or a broken socket: start again from a fresh IDE.
            with contextlib.suppress(Exception):
                await sock.send(type="kill")
            with contextlib.suppress(Exception):
                await sock.reopen()
        return False
    first_rec.success(offset + times["first"])
    exit_rec.success(offset + times["exit"])
    return True


class Perf(Scenario):
    name = "perf"
    metrics = ("request",)
    primary = entry = "request"
    timed_requests = (("GET", "/sys_perf_check"),)

    @property
    def about(self):
        return f"GET /sys_perf_check?ms={self.cell.perf_ms}: that much CPU work on the IOLoop, nothing else"

    async def setup(self, stack, recs):
        return [await stack.enter_async_context(self.cell.user()) for _ in self.cell.credentials]

    async def check(self, user):
        resp, body = await user.request("GET", f"/sys_perf_check?ms={self.cell.perf_ms}")
        loadgen.check_status(resp.status, 200)
        try:
            answered = json.loads(body).get("ms")
        except (ValueError, AttributeError):
            answered = None
        if answered != self.cell.perf_ms:
            raise loadgen.CheckFailed("bad_body", repr(body[:200]))
        return loadgen.worker_pid(resp)

    async def op(self, user, scheduled, recs):
        await loadgen.timed(recs["request"], lambda: self.check(user), scheduled)
