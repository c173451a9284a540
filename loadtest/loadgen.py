"""The load generator's engine: how operations are started and timed.

- `timed`: await one operation and record it: its latency when it
  succeeds, its error kind (never a latency) when it raises.
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

What the users do is in `client` (HTTP), `run_client` (/ws/run) and the
scenarios; what is recorded, in `recording`.
"""
import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

from .client import REQUEST_TIMEOUT, error_kind
from .recording import cpu_seconds


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


# -- the server's side: Server-Timing ---------------------------------------------

SERVER_PARTS = ("wait", "hash_wait", "hash", "fs_wait", "fs", "db", "app")  # as in server/timing.py
# ... and `queue`: the client's wait that the server does not see (client mean - server total)
SWEEP_PARTS = SERVER_PARTS + ("queue",)


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
