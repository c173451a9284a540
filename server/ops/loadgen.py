"""Load generator: virtual users that speak to a running server over HTTP the
way browsers do, and a recorder of what they saw.

The pieces every scenario shares (more scenarios will be added):

- `Recorder`: latencies of successful operations in an HDR histogram
  (microseconds, 1 us .. 60 s, 3 significant digits) and failed operations
  counted by kind. A failure never adds a latency: a fast 401 or 429 must
  not make the server look fast.
- checks (`check_status`, `check_login_answer`): every answer is verified,
  status AND body; anything unexpected raises `CheckFailed(kind)`.
- `VirtualUser`: one browser, with its own cookie jar and its own keep-alive
  TCP connection.
- `closed_loop`: N users, released together, each doing an operation and
  waiting for its answer before the next one.
- `open_loop`: operations started at fixed scheduled times (R per second)
  whether or not earlier ones were answered, each on a free user (the users
  cap what is outstanding); latency counts from the SCHEDULED start, so a
  server that stalls cannot hide the stall by slowing the generator down
  (no coordinated omission). An operation that finds no free user within
  its time limit is an error (`not_sent`), never silently skipped.
- `ServerTiming`: the server's own account of each answer (`Server-Timing`
  parts, mean per request), collected from the responses of users created
  with `on_response=lambda response: tally.observe(response.headers)`.

Scenarios (`SCENARIOS`):

- `login`: a class logging in at once (`run_login`).

(The load test's scenarios, built on these pieces, are in loadtest_scenarios
and loadtest_classroom.)

It needs only aiohttp and hdrh (no server code), so it can run on another
machine than the server.
"""
import asyncio
import contextlib
import json
import time
from collections import Counter
from dataclasses import dataclass, field

import aiohttp

from .recording import Recorder, cpu_seconds  # noqa: F401 - part of this module's API

SESSION_COOKIE = "pyclassroom_session"  # as in server/web.py
REQUEST_TIMEOUT = 30.0  # seconds, for every request
# Above this share of one core the generator itself may be what is slow.
CPU_WARNING = 0.70


# -- recording -------------------------------------------------------------

class CheckFailed(Exception):
    """An answer was not the expected one; `kind` names how (e.g. http_401)."""

    def __init__(self, kind, detail=""):
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind


def error_kind(exc):
    """The error-kind name of an exception raised by an operation."""
    if isinstance(exc, CheckFailed):
        return exc.kind
    # Before OSError: TimeoutError is an OSError, and aiohttp's timeouts are
    # TimeoutErrors.
    if isinstance(exc, asyncio.TimeoutError):
        return "timeout"
    if isinstance(exc, (aiohttp.ClientConnectionError, OSError)):
        return "connection"
    if isinstance(exc, aiohttp.ClientError):
        return "client_error"
    return "exception_" + type(exc).__name__


async def timed(recorder, operation, started=None):
    """Await `operation()` and record it: its latency when it returns (its
    result, if any, is the pid of the worker that answered), its error kind
    when it raises. Returns True on success. The latency counts from
    `started` (a `time.perf_counter()` value, e.g. an open loop's scheduled
    start) when given, else from now."""
    if started is None:
        started = time.perf_counter()
    try:
        worker = await operation()
    except Exception as e:  # every failure is a counted error, never a crash
        recorder.error(error_kind(e))
        return False
    recorder.success(time.perf_counter() - started, worker)
    return True


# -- checks ----------------------------------------------------------------

def check_status(status, expected=200):
    if status != expected:
        raise CheckFailed(f"http_{status}")


def check_login_answer(status, body, username, session_cookie):
    """A login succeeded only if the server said 200, named the user we sent,
    and set the session cookie."""
    check_status(status, 200)
    try:
        answered = json.loads(body)["user"]["username"]
    except (ValueError, KeyError, TypeError):
        raise CheckFailed("bad_body", repr(body[:200])) from None
    if answered != username:
        raise CheckFailed("wrong_user", f"sent {username!r}, answer names {answered!r}")
    if not session_cookie:
        raise CheckFailed("no_session_cookie")


# -- virtual users -----------------------------------------------------------

class VirtualUser:
    """One browser: its own cookie jar and one keep-alive TCP connection
    (limit=1), so N users are N connections, as N students' browsers are.
    Use as `async with VirtualUser(url) as user:`."""

    def __init__(self, base_url, timeout=REQUEST_TIMEOUT, on_response=None):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.on_response = on_response  # called with every response (aiohttp's), e.g. to read Server-Timing
        self.http = None
        self.xsrf = None
        self.logged_in = False

    async def __aenter__(self):
        self.http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=1, force_close=False),
            # unsafe=True: keep cookies of an IP-address host such as
            # 127.0.0.1, which aiohttp's jar otherwise drops silently.
            cookie_jar=aiohttp.CookieJar(unsafe=True),
            timeout=aiohttp.ClientTimeout(total=self.timeout),
            trace_configs=[response_trace(self.on_response)] if self.on_response else None)
        return self

    async def __aexit__(self, *exc):
        await self.http.close()

    async def request(self, method, path, body=None):
        """(response, body bytes). The body is read in full, so a latency
        includes it. Non-GET requests carry the XSRF header, as the page's
        JavaScript does."""
        headers = {"X-XSRFToken": self.xsrf} if method != "GET" and self.xsrf else {}
        async with self.http.request(method, self.base_url + path, json=body, headers=headers) as resp:
            return resp, await resp.read()

    async def fetch_xsrf(self):
        """What loading the login page does: GET /api/me (401 when logged
        out) hands out the _xsrf cookie."""
        resp, _ = await self.request("GET", "/api/me")
        if resp.status not in (200, 401):
            raise CheckFailed(f"http_{resp.status}")
        morsel = resp.cookies.get("_xsrf")
        if morsel is None or not morsel.value:
            raise CheckFailed("no_xsrf_cookie")
        self.xsrf = morsel.value

    async def login(self, username, password):
        """Log in; returns the answering worker's pid (None if not said)."""
        resp, body = await self.request("POST", "/api/login", {"username": username, "password": password})
        cookie = resp.cookies.get(SESSION_COOKIE)
        check_login_answer(resp.status, body, username, cookie is not None and cookie.value)
        self.logged_in = True
        return worker_pid(resp)

    async def logout(self):
        resp, _ = await self.request("POST", "/api/logout", {})
        check_status(resp.status, 200)
        self.logged_in = False


def worker_pid(resp):
    value = resp.headers.get("X-Worker-Pid", "")
    return int(value) if value.isdigit() else None


def response_trace(callback):
    """An aiohttp TraceConfig that calls `callback(response)` for every
    response a session receives (method, url, status and headers are
    there), whoever made the request."""
    trace = aiohttp.TraceConfig()

    async def on_request_end(session, context, params):
        callback(params.response)

    trace.on_request_end.append(on_request_end)
    return trace


# -- the server's side: Server-Timing ---------------------------------------------

SERVER_PARTS = ("hash_wait", "hash", "fs_wait", "fs", "db", "app")  # as in server/timing.py


def parse_server_timing(value):
    """{part: milliseconds} of a `Server-Timing` header value; {} if absent
    or unreadable."""
    parts = {}
    for item in (value or "").split(","):
        name, _, params = item.strip().partition(";")
        for param in params.split(";"):
            key, _, number = param.strip().partition("=")
            if key == "dur":
                try:
                    parts[name.strip()] = float(number)
                except ValueError:
                    pass
    return parts


class ServerTiming:
    """Sums of each `Server-Timing` part over the responses observed, for
    the mean per request of each part (a part a request did not use counts
    as 0 for it). `observe` takes a response's headers."""

    def __init__(self):
        self.responses = 0
        self.without = 0  # responses that carried no Server-Timing
        self.sums = Counter()

    def observe(self, headers):
        parts = parse_server_timing(headers.get("Server-Timing"))
        if "total" not in parts:
            self.without += 1
            return
        self.responses += 1
        self.sums.update(parts)

    def means_ms(self):
        """{part: mean ms per request} for SERVER_PARTS and total; None when
        no response carried the header."""
        if not self.responses:
            return None
        return {part: round(self.sums[part] / self.responses, 3) for part in SERVER_PARTS + ("total",)}


# -- closed loop ---------------------------------------------------------------

@dataclass
class Window:
    """Wall-clock and our own CPU seconds of a measured stretch."""
    wall: float = 0.0
    cpu: float = 0.0

    def __iadd__(self, other):
        self.wall += other.wall
        self.cpu += other.cpu
        return self

    @property
    def cpu_share(self):
        """Our CPU use as a share of one core."""
        return self.cpu / self.wall if self.wall else 0.0


async def closed_loop(users, operation, recorder, iterations=1, duration=None):
    """Release every one of `users` at the same instant; each awaits
    `operation(user)` and its answer before starting the next, `iterations`
    times (None: no limit) or until `duration` seconds have passed. Returns
    the `Window` from the release to the last answer."""
    if iterations is None and duration is None:
        raise ValueError("closed_loop needs iterations or duration")

    async def run(user):
        deadline = None if duration is None else time.monotonic() + duration
        done = 0
        while (iterations is None or done < iterations) and (deadline is None or time.monotonic() < deadline):
            await timed(recorder, lambda: operation(user))
            done += 1

    return await together(users, run)


async def together(actors, body):
    """Start `body(actor)` for every one of `actors` at the same instant
    (behind one gate, once every task exists) and wait for them all.
    Returns the `Window` from the release to the last end."""
    gate = asyncio.Event()  # the shared start barrier

    async def run(actor):
        await gate.wait()
        await body(actor)

    tasks = [asyncio.create_task(run(actor)) for actor in actors]
    await asyncio.sleep(0)  # every task now waits at the gate
    cpu, started = cpu_seconds(), time.perf_counter()
    gate.set()
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
    return Window(time.perf_counter() - started, cpu_seconds() - cpu)


# -- open loop -------------------------------------------------------------------

# An operation that waited longer than this for a free user, or that the
# generator itself started this late, was not sent on time.
LATE_SECONDS = 0.010


@dataclass
class OpenLoopStats:
    """What the open-loop schedule met, beside the latencies."""
    rate: float
    scheduled: int = 0  # operations due within the window
    sent: int = 0       # operations started (each on a free user)
    waited: int = 0     # due operations that found every user busy and had to wait for one
    late: int = 0       # of those, how many started more than LATE_SECONDS after their time
    not_sent: int = 0   # found no free user within max_wait: counted as errors `not_sent`
    max_lag_s: float = 0.0  # the latest start after the scheduled time
    max_outstanding: int = 0  # the most operations in flight at once
    window: Window = field(default_factory=Window)

    def summary(self):
        return {"rate": self.rate, "scheduled": self.scheduled, "sent": self.sent, "waited": self.waited,
                "late": self.late, "not_sent": self.not_sent, "max_lag_ms": round(self.max_lag_s * 1000, 2),
                "max_outstanding": self.max_outstanding,
                "achieved_rate": round(self.sent / self.window.wall, 2) if self.window.wall else 0.0}


async def open_loop(users, operation, rate, recorder, duration=None, requests=None, max_wait=REQUEST_TIMEOUT,
                    rest=0.0):
    """Start `operation(user, scheduled)` at fixed times, `rate` per second,
    for `duration` seconds or `requests` operations, whether or not earlier
    ones have been answered. Each runs on a free one of `users` (so at most
    len(users) are outstanding); a user rests `rest` seconds after each
    operation before it is free again. `scheduled` is the perf_counter time
    the operation was due: the operation records its latency from it, so
    waiting for a free user, or for a generator that fell behind, counts as
    waiting, as it does for a student. An operation that finds no free user
    within `max_wait` seconds of its time is recorded in `recorder` as the
    error `not_sent`. Returns OpenLoopStats, whose window runs from the
    first scheduled time to the last answer."""
    if rate <= 0:
        raise ValueError("open_loop needs a positive rate")
    if duration is None and requests is None:
        raise ValueError("open_loop needs duration or requests")
    stats = OpenLoopStats(rate)
    free = asyncio.Queue()
    for user in users:
        free.put_nowait(user)
    outstanding = 0
    tasks = set()

    async def one(scheduled):
        nonlocal outstanding
        if free.empty():
            stats.waited += 1
        try:
            user = await asyncio.wait_for(free.get(), max(0.0, scheduled + max_wait - time.perf_counter()))
        except asyncio.TimeoutError:
            stats.not_sent += 1
            recorder.error("not_sent")
            return
        lag = time.perf_counter() - scheduled
        stats.sent += 1
        stats.late += lag > LATE_SECONDS
        stats.max_lag_s = max(stats.max_lag_s, lag)
        outstanding += 1
        stats.max_outstanding = max(stats.max_outstanding, outstanding)
        try:
            await operation(user, scheduled)
        except Exception as e:  # an operation should record its own failures; never lose one
            recorder.error(error_kind(e))
        finally:
            outstanding -= 1
            if rest:  # free again later, without holding up the end of the window
                asyncio.get_running_loop().call_later(rest, free.put_nowait, user)
            else:
                free.put_nowait(user)

    cpu = cpu_seconds()
    first = time.perf_counter() + 0.005
    number = 0
    try:
        while requests is None or number < requests:
            scheduled = first + number / rate
            if duration is not None and scheduled >= first + duration:
                break
            delay = scheduled - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            # When the generator is behind, every operation now due starts at
            # once, each still timed from its own scheduled time.
            task = asyncio.create_task(one(scheduled))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            number += 1
        stats.scheduled = number
        await asyncio.gather(*list(tasks))
    finally:
        for task in list(tasks):
            task.cancel()
    stats.window = Window(time.perf_counter() - first, cpu_seconds() - cpu)
    return stats


# -- scenario: login -----------------------------------------------------------

@dataclass
class LoginResult:
    concurrency: int
    rounds: int
    warmup: int
    recorder: Recorder
    window: Window  # the counted rounds, from each release to its last answer
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
        window = await closed_loop(ready, lambda item: item[0].login(*item[1]), recorder, iterations=1)
        logged_in = [user for user, _ in ready if user.logged_in]
        for outcome in await asyncio.gather(*(user.logout() for user in logged_in), return_exceptions=True):
            if isinstance(outcome, BaseException):
                housekeeping["logout_" + error_kind(outcome)] += 1
    return window


async def run_login(base_url, credentials, rounds=3, warmup=1, timeout=REQUEST_TIMEOUT):
    """`warmup` uncounted rounds, then `rounds` counted ones, each with every
    (username, password) of `credentials` logging in at once."""
    recorder, housekeeping, window = Recorder(), Counter(), Window()
    for number in range(warmup + rounds):
        counted = number >= warmup
        # The warm-up (connections, caches, thread pools) goes to a throwaway recorder.
        round_window = await login_round(base_url, credentials, recorder if counted else Recorder(),
                                         housekeeping, timeout)
        if counted:
            window += round_window
    return LoginResult(len(credentials), rounds, warmup, recorder, window, housekeeping)


SCENARIOS = {"login": run_login}
