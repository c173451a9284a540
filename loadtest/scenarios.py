"""The load test's scenarios but for the classroom (`classroom`), and what
they share; the login rounds also serve `bench_login`. The registry of
scenarios by name is `cell.SCENARIOS`.

Every scenario speaks to the server the way browsers do (`client`'s
VirtualUser: own cookies, own keep-alive connection) and checks every
answer; a failure is an error counted by kind and never a latency.

- `login`: a class logging in at once: per round every user is a new
  browser and all POST /api/login together (real argon2id checks), then log
  out. Open loop: each operation is one login (then an untimed logout).
- `files`: save a 2-4 KiB file (PUT, If-Match of the last save) then load
  it and compare (`client.Student`).
- `run`: run a program that prints, reads one input() and prints it back,
  over the IDE's WebSocket (`run_client.RunClient.echo_run`); timed to the
  first output and to the exit. A student waits RUN_REST s (+-50%) between runs,
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

from . import loadgen, server_metrics
from .client import (FILE_BYTES, REQUEST_TIMEOUT, CheckFailed, Student, VirtualUser, check_status, error_kind,
                     log_in_all, save_file, worker_pid)
from .recording import CPU_WARNING, Recorder
from .run_client import ECHO_PROGRAM, open_ides

RUN_PATH = "loadtest_echo.py"
RUN_REST = 1.0       # seconds between one student's runs (+-50%), run scenario
RUN_GAP = 0.25       # at least this long after a run's exit before the next run


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
    timeout: float = REQUEST_TIMEOUT
    rate: float = None  # operations per second: open loop; None: closed loop
    pace: float = 10.0
    perf_ms: int = 10
    tally: loadgen.ServerTiming = field(default_factory=loadgen.ServerTiming)
    only: tuple = None  # ((method, path prefix), ...): the requests tallied; None: all

    def observe(self, response):
        if self.only is None or any(response.method == m and response.url.path.startswith(p) for m, p in self.only):
            self.tally.observe(response.headers)

    def user(self):
        return VirtualUser(self.url, self.timeout, on_response=self.observe)


def sleep_until(at):
    return asyncio.sleep(max(0.0, at - time.perf_counter()))


async def signed_in(cell, stack, recorder):
    """The VirtualUsers of those of the cell's credentials who signed in;
    each failure is a `setup_<kind>` error in `recorder`: a student who
    never got in."""
    users, failed = await log_in_all(cell.user, cell.credentials, stack)
    for kind, n in failed.items():
        recorder.errors["setup_" + kind] += n
    return users


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
        return {m: Recorder() for m in self.metrics if m not in self.aggregates}

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
        window = await loadgen.closed_loop(actors, cycle, Recorder(), iterations=iterations,
                                           duration=budget.duration)
        return window, None


# -- a class logging in at once (also bench_login) -----------------------------------

@dataclass
class LoginResult:
    concurrency: int
    rounds: int
    warmup: int
    recorder: Recorder
    window: loadgen.Window  # the counted rounds, from each release to its last answer
    housekeeping: Counter = field(default_factory=Counter)  # failed logouts (not samples)

    @property
    def logins_per_s(self):
        return self.recorder.count / self.window.wall if self.window.wall else 0.0

    @property
    def cpu_warning(self):
        return self.window.cpu_share > CPU_WARNING

    def summary(self):
        return {"concurrency": self.concurrency, "rounds": self.rounds, "warmup": self.warmup,
                **self.recorder.summary(), "wall_s": round(self.window.wall, 4),
                "logins_per_s": round(self.logins_per_s, 2),
                "loadgen_cpu": round(self.window.cpu_share, 4), "loadgen_cpu_warning": self.cpu_warning,
                "housekeeping_errors": dict(self.housekeeping)}


async def login_round(base_url, credentials, recorder, housekeeping, timeout=REQUEST_TIMEOUT, on_response=None):
    """One class logging in at once: a new browser per (username, password),
    each loads the login page (untimed), then all POST /api/login at the same
    instant; each login's latency is one sample. Afterwards everyone logs out
    so that sessions do not pile up from round to round. New browsers every
    round mean new connections, which the kernel spreads over the workers
    anew, so rounds sample that spread rather than repeat one.
    `on_response`: see VirtualUser."""
    async with contextlib.AsyncExitStack() as stack:
        users = [await stack.enter_async_context(VirtualUser(base_url, timeout, on_response))
                 for _ in credentials]
        ready = []
        for user, creds, outcome in zip(users, credentials, await asyncio.gather(
                *(user.fetch_xsrf() for user in users), return_exceptions=True)):
            if isinstance(outcome, BaseException):
                # This student never got to log in: a failed login, not a sample.
                recorder.error("setup_" + error_kind(outcome))
            else:
                ready.append((user, creds))
        window = await loadgen.closed_loop(ready, lambda item: item[0].login(*item[1]), recorder, iterations=1)
        logged_in = [user for user, _ in ready if user.logged_in]
        for outcome in await asyncio.gather(*(user.logout() for user in logged_in), return_exceptions=True):
            if isinstance(outcome, BaseException):
                housekeeping["logout_" + error_kind(outcome)] += 1
    return window


async def run_login(base_url, credentials, rounds=3, warmup=1, timeout=REQUEST_TIMEOUT):
    """`warmup` uncounted rounds, then `rounds` counted ones, each with every
    (username, password) of `credentials` logging in at once."""
    recorder, housekeeping, window = Recorder(), Counter(), loadgen.Window()
    for number in range(warmup + rounds):
        counted = number >= warmup
        # The warm-up (connections, caches, thread pools) goes to a throwaway recorder.
        round_window = await login_round(base_url, credentials, recorder if counted else Recorder(),
                                         housekeeping, timeout)
        if counted:
            window += round_window
    return LoginResult(len(credentials), rounds, warmup, recorder, window, housekeeping)


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
                recs["login"].error("setup_" + error_kind(outcome))
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
            window += await login_round(self.cell.url, actors, rec, housekeeping, self.cell.timeout,
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
        for i, user in enumerate(await signed_in(self.cell, stack, recs["save"])):
            student = Student(user, f"loadtest-files-{i}.py")
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
        users = await signed_in(self.cell, stack, recs["exit"])
        saved = []
        for user, outcome in zip(users, await asyncio.gather(
                *(save_file(u, RUN_PATH, ECHO_PROGRAM) for u in users), return_exceptions=True)):
            if isinstance(outcome, Exception):
                recs["exit"].error("setup_save_" + error_kind(outcome))
            else:
                saved.append(user)
        return await warm_ides(self.cell, stack, saved, recs["exit"])

    async def op(self, sock, scheduled, recs):
        await timed_run(sock, RUN_PATH, scheduled, recs["first output"], recs["exit"])

    def counters(self, socks):
        # `queued`: the server's line was full (RUN_MAX_CONCURRENT): the run waited for a place
        return {"queued_messages": sum(s.queued for s in socks)}


async def warm_ides(cell, stack, users, recorder):
    """One IDE WebSocket per user, opened at once, then (bounded) until the
    server reports their warm sandboxes started; failures are errors."""
    metrics = await stack.enter_async_context(
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=cell.timeout)))
    before, _ = await server_metrics.sandbox_starts(metrics, cell.url)
    opened, failed = await open_ides(cell.url, users, stack, cell.timeout)
    for kind, n in failed.items():
        recorder.errors["setup_ide_" + kind] += n
    if before is not None:  # /metrics answers: wait for the warm sandboxes
        await server_metrics.wait_for_sandboxes(metrics, cell.url, before + len(opened))
    await asyncio.sleep(0.5)
    return opened


async def timed_run(sock, path, scheduled, first_rec, exit_rec):
    """One checked run of `path`, timed from `scheduled` to its first output
    and to its exit; a failure is an error in `exit_rec`. Returns success."""
    offset = time.perf_counter() - scheduled
    try:
        times = await sock.echo_run(path)
    except Exception as e:  # every failure is a counted error
        exit_rec.error(error_kind(e))
        await sock.recover(e)
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
        check_status(resp.status, 200)
        try:
            answered = json.loads(body).get("ms")
        except (ValueError, AttributeError):
            answered = None
        if answered != self.cell.perf_ms:
            raise CheckFailed("bad_body", repr(body[:200]))
        return worker_pid(resp)

    async def op(self, user, scheduled, recs):
        await loadgen.timed(recs["request"], lambda: self.check(user), scheduled)
