"""Benchmark of running programs over /ws/run, per sandbox kind, and of how
responsive the server stays while students' programs hog the CPU.

    python -m server.ops.bench_runs [--sandbox local,docker,process]
                                    [--students 1,10,60] [--duration 10]
                                    [--processes 1] [--json OUT]

Per sandbox kind (one that cannot work here is skipped, with the reason),
one server is started as a subprocess on a fresh database and DATA_DIR,
with SANDBOX=<kind> and RUN_MAX_CONCURRENT high (--max-concurrent, default
200) so that admission never queues: what is measured is the sandbox and
the server, not the waiting line. Real users (real argon2id hashes) log in
once and are reused for every measurement on that server.

Runs, for each student count N: every student opens its WebSocket, as the
IDE does on page load, and the server pre-starts a sandbox for it; we wait
until the server's /metrics says N sandboxes started (bounded), plus
--settle seconds, so these are WARM starts. Each student has saved
ECHO_PROGRAM (prints a line, reads one input(), prints it back). For
--duration seconds every student loops: send `run`, time the first
`output` frame (run -> first output), answer the input with a token unique
to this run, wait for `exit`; the run is a success only if the reason is
"ok", stderr is empty and stdout holds "got <token>". Anything else is an
error, counted by kind, and adds no latency. Between runs each student
waits --think seconds +-50% (default 1), as a student reading the output
would: the server starts the next warm sandbox only after a run ends, so
without a pause the next run would wait for part of a sandbox start (and,
as the server is now, a `run` sent right after `exit` is even refused as
already_running: it sends `exit` before it releases the run). Also
reported: run -> `started`, last output -> `exit`, the server's own mean
sandbox start time (from /metrics), and the CPU used meanwhile by the
server, the Docker daemon, the whole machine and this load generator.

Bare interpreter: in the same run, BARE_SAMPLES x `SANDBOX_PYTHON -c
"print(1)"`, timed from the subprocess start to its first stdout byte, at
the start and again right before each sandbox's runs (the ratio uses the
latter); the report gives local p50 / bare p50 (target within 2x) and the
docker p50 (target under 150 ms).

Responsiveness (--hogs, default 60; 0 skips it): --savers (5) other
students save their own 2-4 KiB file (PUT with If-Match) in a closed loop
for --duration seconds, first with no program running, then while --hogs
students each run `while True: pass`; p50/p95/p99 of both and their ratio
(target: p95 under 100 ms under load). The loops are then stopped (`kill`).

Everything is bounded in time (--timeout per run or request, --max-seconds
for all) and cleaned up on exit, error or Ctrl-C: servers, PostgreSQL,
temporary folders. The load generator runs on the same machine and
competes with the server and the sandboxes for CPU: its own CPU share is
printed, with a warning near one core.

Reused rather than duplicated: `loadgen` (VirtualUser, Recorder, timed,
closed_loop, Window), `bench_login` (server subprocess, users, machine
info) and `bench_files` (Student, the file saver).
"""
import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter

import aiohttp

from .. import config
from .cli import clean_up_on_sigterm, int_list
from . import loadgen
from .bench_files import LOGIN_CONCURRENCY, Student, _raise_file_limit
from .bench_login import (Aborted, ServerUnderTest, admin_sql, insert_users, machine,
                          make_credentials, new_server_space, run_async, scratch, server_env)

SANDBOXES = ("local", "docker", "process")
ECHO_PROGRAM = 'print("ready")\nx = input()\nprint("got", x)\n'
ECHO_PATH = "bench_echo.py"
HOG_PROGRAM = "while True:\n    pass\n"
HOG_PATH = "bench_hog.py"
SAVE_PATH = "bench_save.py"
BARE_SAMPLES = 30
READY_WAIT = 30.0  # longest wait for the server to report the warm sandboxes
TARGET_LOCAL_RATIO = 2.0  # local first-output p50 / bare interpreter p50
TARGET_DOCKER_MS = 150.0  # docker first-output p50
TARGET_SAVE_P95_MS = 100.0  # save p95 while the hogs run
METRIC_RE = re.compile(r"^(pyclassroom_sandbox_start_seconds_(?:sum|count)|pyclassroom_sandbox_reused_total)\s+(\S+)$", re.M)


# -- one student's WebSocket -------------------------------------------------------

def cookie_header(user):
    """The Cookie header of a logged-in VirtualUser: its cookies exactly as
    the server set them (coded values: the session cookie is quoted)."""
    return "; ".join(f"{m.key}={m.coded_value}" for m in user.http.cookie_jar)


class RunSocket:
    """One open IDE: a WebSocket on /ws/run with the student's session."""

    def __init__(self, http, base_url, user, index, timeout):
        self.http = http  # a ClientSession without a cookie jar, shared by all sockets
        self.base_url = base_url.rstrip("/")
        self.user = user
        self.index = index
        self.timeout = timeout
        self.ws = None
        self.runs = 0
        self.queued = 0  # `queued` messages seen (never expected here)
        self.stale = 0  # late `not_running` answers, ignored

    async def open(self):
        self.ws = await asyncio.wait_for(self.http.ws_connect(
            self.base_url.replace("http://", "ws://", 1) + "/ws/run", origin=self.base_url,
            headers={"Cookie": cookie_header(self.user)}, max_msg_size=0, autoping=True,
            timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=5.0)), self.timeout)
        return self

    async def close(self):
        if self.ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.ws.close(), 10)
            self.ws = None

    async def reopen(self):
        await self.close()
        await self.open()

    async def send(self, **message):
        await asyncio.wait_for(self.ws.send_str(json.dumps(message)), self.timeout)

    async def receive(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise asyncio.TimeoutError()
        msg = await self.ws.receive(timeout=remaining)
        if msg.type != aiohttp.WSMsgType.TEXT:
            raise loadgen.CheckFailed("socket_" + msg.type.name.lower(), repr(msg.data))
        try:
            message = json.loads(msg.data)
        except ValueError:
            raise loadgen.CheckFailed("bad_message", repr(msg.data[:200])) from None
        if not isinstance(message, dict):
            raise loadgen.CheckFailed("bad_message", repr(msg.data[:200]))
        return message

    async def echo_run(self, path=ECHO_PATH):
        """Run the echo program once and check it. Returns seconds from
        sending `run` to: {"started", "first" (output frame), "exit"}, and
        "tail": from the last output frame to `exit`. Raises
        CheckFailed(kind) for anything but the expected run."""
        self.runs += 1
        token = f"s{self.index}r{self.runs}x{secrets.token_hex(3)}"
        started = time.perf_counter()
        deadline = time.monotonic() + self.timeout
        await self.send(type="run", path=path, cols=80, rows=24)
        first = begun = last = None
        answered = False
        out, err = [], []
        while True:
            message = await self.receive(deadline)
            kind = message.get("type")
            if kind == "output":
                last = time.perf_counter() - started
                if first is None:
                    first = last
                (out if message.get("stream") == "stdout" else err).append(message.get("data", ""))
                if not answered and "ready" in "".join(out):
                    answered = True
                    await self.send(type="stdin", data=token + "\r")
            elif kind == "exit":
                total = time.perf_counter() - started
                break
            elif kind == "error":
                if message.get("error") == "not_running":
                    self.stale += 1  # the answer to a stdin sent after a program ended
                    continue
                raise loadgen.CheckFailed("refused_" + str(message.get("error")), message.get("message", ""))
            elif kind == "queued":
                self.queued += 1
            elif kind == "started":
                begun = time.perf_counter() - started
            elif kind != "image":
                raise loadgen.CheckFailed("unexpected_" + str(kind))
        reason = message.get("reason")
        if reason != "ok":
            raise loadgen.CheckFailed(f"exit_{reason}", message.get("message", ""))
        if first is None:
            raise loadgen.CheckFailed("no_output")
        if begun is None or begun > first:
            raise loadgen.CheckFailed("output_before_started")
        if "".join(err):
            raise loadgen.CheckFailed("stderr_output", "".join(err)[:200])
        if f"got {token}" not in "".join(out):
            raise loadgen.CheckFailed("wrong_output", repr("".join(out)[-200:]))
        return {"started": begun, "first": first, "exit": total, "tail": total - last}

    async def start_hog(self, path=HOG_PATH):
        """Start an endless loop; returns once the server says `started`."""
        deadline = time.monotonic() + self.timeout
        await self.send(type="run", path=path)
        while True:
            message = await self.receive(deadline)
            kind = message.get("type")
            if kind == "started":
                return
            if kind == "error":
                raise loadgen.CheckFailed("refused_" + str(message.get("error")), message.get("message", ""))
            if kind == "exit":
                raise loadgen.CheckFailed("exit_" + str(message.get("reason")), message.get("message", ""))
            if kind == "queued":
                self.queued += 1

    async def stop_hog(self):
        """Kill the running loop; returns the reason it ended with (None if
        its exit never came)."""
        with contextlib.suppress(Exception):
            await self.send(type="kill")
        deadline = time.monotonic() + self.timeout
        with contextlib.suppress(Exception):
            while True:
                message = await self.receive(deadline)
                if message.get("type") == "exit":
                    return message.get("reason")
        return None


# -- server side figures -------------------------------------------------------------

async def sandbox_starts(http, base_url):
    """(count, seconds) of sandboxes the server has made ready so far, all
    workers together, from its /metrics; (None, None) if it cannot say."""
    found = await server_metrics(http, base_url)
    try:
        return (int(found["pyclassroom_sandbox_start_seconds_count"]),
                found["pyclassroom_sandbox_start_seconds_sum"])
    except KeyError:
        return None, None


async def sandbox_reuses(http, base_url):
    """Sandboxes made ready again after a run so far (to serve the next);
    None if the server cannot say."""
    value = (await server_metrics(http, base_url)).get("pyclassroom_sandbox_reused_total")
    return None if value is None else int(value)


async def server_metrics(http, base_url):
    """{name: value} of the server's /metrics; {} if it cannot say."""
    try:
        async with http.get(base_url.rstrip("/") + "/metrics") as resp:
            text = await resp.text()
        return {name: float(value) for name, value in METRIC_RE.findall(text)}
    except Exception:
        return {}


async def wait_for_sandboxes(http, base_url, count, timeout=READY_WAIT):
    """Wait until the server has made `count` sandboxes ready in all;
    returns whether it did within `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, _ = await sandbox_starts(http, base_url)
        if done is None:
            return False
        if done >= count:
            return True
        await asyncio.sleep(0.1)
    return False


def starts_between(before, after):
    """{count, mean_ms} of the sandboxes made ready between two readings."""
    (c0, s0), (c1, s1) = before, after
    if c0 is None or c1 is None:
        return {"count": None, "mean_ms": None}
    n = c1 - c0
    return {"count": n, "mean_ms": round((s1 - s0) / n * 1000, 1) if n else None}


def process_cpu(pids):
    """CPU seconds (user + system) used so far by the processes `pids`
    themselves (not their children: the sandboxes are not counted)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return total


def machine_busy():
    """(busy, total) CPU ticks of the whole machine so far, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_share(before, after):
    """Share of all the machine's CPUs that was busy between two readings."""
    busy, total = after[0] - before[0], after[1] - before[1]
    return round(busy / total, 3) if total else None


def daemon_pids():
    """Pids of the Docker daemon's long-lived processes (dockerd, containerd)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as f:
                    if f.read().strip() in ("dockerd", "containerd"):
                        pids.append(int(entry))
            except OSError:
                pass
    return pids


class CpuWatch:
    """CPU used over a stretch by the server, the Docker daemon and the
    whole machine (shares: of one core, of one core, of all cores)."""

    def __init__(self, server_pids):
        self.server_pids = list(server_pids)
        self.daemon_pids = daemon_pids()

    def start(self):
        self.wall = time.perf_counter()
        self.server = process_cpu(self.server_pids)
        self.daemon = process_cpu(self.daemon_pids)
        self.machine = machine_busy()
        return self

    def stop(self):
        wall = time.perf_counter() - self.wall
        return {"server_cpu": round((process_cpu(self.server_pids) - self.server) / wall, 3)
                if self.server_pids else None,
                "docker_daemon_cpu": round((process_cpu(self.daemon_pids) - self.daemon) / wall, 3)
                if self.daemon_pids else None,
                "machine_busy": busy_share(self.machine, machine_busy())}


# -- setting up students ---------------------------------------------------------------

async def log_in(url, credentials, stack, timeout):
    """Log in every (username, password, ...) and return their VirtualUsers
    (in order); the first failure aborts: the benchmark needs them all."""
    gate = asyncio.Semaphore(LOGIN_CONCURRENCY)  # each login is one argon2 hash on the server

    async def one(username, password):
        user = await stack.enter_async_context(loadgen.VirtualUser(url, timeout))
        async with gate:
            await user.fetch_xsrf()
            await user.login(username, password)
        user.username = username
        return user

    outcomes = await asyncio.gather(*(one(c[0], c[1]) for c in credentials), return_exceptions=True)
    failed = Counter(loadgen.error_kind(o) for o in outcomes if isinstance(o, Exception))
    if failed:
        raise Aborted(f"students could not log in: {dict(failed)}")
    return outcomes


async def save_file(user, path, text):
    """Create or replace `path` in the user's home (If-Match: *)."""
    headers = {"X-XSRFToken": user.xsrf, "If-Match": "*"}
    async with user.http.put(f"{user.base_url}/api/files/home/{path}", data=text.encode(),
                             headers=headers) as resp:
        await resp.read()
    loadgen.check_status(resp.status, 200)


async def save_everywhere(users, path, text):
    outcomes = await asyncio.gather(*(save_file(u, path, text) for u in users), return_exceptions=True)
    failed = Counter(loadgen.error_kind(o) for o in outcomes if isinstance(o, Exception))
    if failed:
        raise Aborted(f"could not save {path} for every student: {dict(failed)}")


@contextlib.asynccontextmanager
async def run_sockets(url, users, timeout):
    """Open one WebSocket per user (at once, as a class opening the IDE);
    all are closed on the way out, which kills their sandboxes."""
    http = aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar(),
                                 connector=aiohttp.TCPConnector(limit=0),
                                 timeout=aiohttp.ClientTimeout(total=None, connect=timeout))
    sockets = [RunSocket(http, url, user, i, timeout) for i, user in enumerate(users)]
    try:
        outcomes = await asyncio.gather(*(s.open() for s in sockets), return_exceptions=True)
        failed = Counter(loadgen.error_kind(o) for o in outcomes if isinstance(o, Exception))
        if failed:
            raise Aborted(f"WebSockets could not be opened: {dict(failed)}")
        yield sockets
    finally:
        await asyncio.gather(*(s.close() for s in sockets), return_exceptions=True)
        await http.close()


# -- measurement: warm runs ---------------------------------------------------------------

async def echo_phase(url, users, duration, think=1.0, settle=1.0, timeout=loadgen.REQUEST_TIMEOUT,
                     path=ECHO_PATH, server_pids=()):
    """Every user's IDE opens, waits for its warm sandbox, then runs `path`
    (the echo program, already saved) in a loop for `duration` seconds.
    `server_pids`: the server's processes, whose CPU use is reported.
    Returns a summary dict."""
    # One recorder per figure; errors are counted in "exit" only.
    rec = {name: loadgen.Recorder() for name in ("started", "first", "exit", "tail")}
    metrics_http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout))
    try:
        before_open = await sandbox_starts(metrics_http, url)
        opened = time.perf_counter()
        async with run_sockets(url, users, timeout) as sockets:
            warm = False
            if before_open[0] is not None:
                warm = await wait_for_sandboxes(metrics_http, url, before_open[0] + len(sockets))
            all_ready_s = round(time.perf_counter() - opened, 3) if warm else None
            ready_s = None
            await asyncio.sleep(settle)
            before = await sandbox_starts(metrics_http, url)
            reused_before = await sandbox_reuses(metrics_http, url)
            if before_open[0] is not None:
                ready_s = starts_between(before_open, before)

            async def student(sock):
                end = time.monotonic() + duration
                while time.monotonic() < end:
                    try:
                        times = await sock.echo_run(path)
                    except Exception as e:  # every failure is a counted error
                        rec["exit"].error(loadgen.error_kind(e))
                        if not isinstance(e, loadgen.CheckFailed) or e.kind.startswith(("socket_", "bad_")):
                            # A timeout or a broken socket: start again from a fresh IDE.
                            with contextlib.suppress(Exception):
                                await sock.send(type="kill")
                            with contextlib.suppress(Exception):
                                await sock.reopen()
                    else:
                        for name, seconds in times.items():
                            rec[name].success(seconds)
                    # +-50%: students do not click in step, and neither should the loop
                    await asyncio.sleep(think * random.uniform(0.5, 1.5))

            watch = CpuWatch(server_pids).start()
            window = await loadgen.together(sockets, student)
            used = watch.stop()
            after = await sandbox_starts(metrics_http, url)
            reused_after = await sandbox_reuses(metrics_http, url)
            queued = sum(s.queued for s in sockets)
            stale = sum(s.stale for s in sockets)
    finally:
        await metrics_http.close()
    summaries = {name: r.summary() for name, r in rec.items()}
    figures = {}
    for name, label in (("started", "started"), ("first", "first_output"), ("exit", "exit"),
                        ("tail", "exit_after_output")):
        figures.update({f"{label}_{k}": summaries[name][k] for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms",
                                                                      "mean_ms")})
    runs = rec["exit"].count
    return {
        "students": len(users), "duration_s": duration, "think_s": think,
        "warm_sandboxes_reported": warm, "initial_sandbox_starts": ready_s,
        "all_sandboxes_ready_s": all_ready_s,  # from opening every socket at once
        "runs": runs, "errors": rec["exit"].error_count, "errors_by_kind": summaries["exit"]["errors_by_kind"],
        **figures,
        "runs_per_s": round(runs / window.wall, 2) if window.wall else 0.0,
        "wall_s": round(window.wall, 3), "queued_messages": queued, "stale_messages": stale,
        "server_sandbox_starts": starts_between(before, after) if before[0] is not None else None,
        "server_sandbox_reuses": (reused_after - reused_before
                                  if None not in (reused_before, reused_after) else None),
        "loadgen_cpu": round(window.cpu_share, 3), "loadgen_cpu_warning": window.cpu_share > loadgen.CPU_WARNING,
        # server_cpu: share of one core, the server's processes together (not its sandboxes);
        # docker_daemon_cpu: dockerd + containerd, of one core; machine_busy: of all cores.
        **used,
    }


# -- measurement: responsiveness under load ------------------------------------------------

async def save_loop(savers, duration, server_pids=()):
    """Each saver saves its own file in a closed loop for `duration` s:
    (recorder, window, {server CPU meanwhile, server_timing_ms})."""
    recorder = loadgen.Recorder()
    timing = loadgen.ServerTiming()
    for student in savers:
        student.timing = timing
    watch = CpuWatch(server_pids).start()

    async def save(student):
        try:
            return await student.save()
        except Exception:
            await student.resync()  # a timed-out save may have landed: next one must not 409
            raise

    window = await loadgen.closed_loop(savers, save, recorder, iterations=None, duration=duration)
    return recorder, window, dict(watch.stop(), server_timing_ms=timing.means_ms())


def save_summary(recorder, window, used):
    s = recorder.summary()
    return {"saves": s["count"], "errors": s["errors"], "errors_by_kind": s["errors_by_kind"],
            **{k: s[k] for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms", "mean_ms")},
            "saves_per_s": round(s["count"] / window.wall, 1) if window.wall else 0.0,
            "loadgen_cpu": round(window.cpu_share, 3), "loadgen_cpu_warning": window.cpu_share > loadgen.CPU_WARNING,
            **used}


async def responsiveness_phase(url, hog_users, saver_users, duration, timeout=loadgen.REQUEST_TIMEOUT,
                               spin_up=1.0, server_pids=()):
    """Save latency of `saver_users` with nothing running, then while every
    one of `hog_users` runs HOG_PROGRAM (already saved). Returns a summary."""
    savers = [Student(user, user.username, SAVE_PATH) for user in saver_users]
    for student in savers:  # create the files (untimed; warms the connections)
        await student.save()
    idle = save_summary(*await save_loop(savers, duration, server_pids))
    hog_errors, stop_reasons = Counter(), Counter()
    async with contextlib.AsyncExitStack() as stack:
        metrics_http = await stack.enter_async_context(
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)))
        before_open = await sandbox_starts(metrics_http, url)
        sockets = await stack.enter_async_context(run_sockets(url, hog_users, timeout))
        if before_open[0] is not None:  # as in the IDE: the loops start in warm sandboxes
            await wait_for_sandboxes(metrics_http, url, before_open[0] + len(sockets))
        outcomes = await asyncio.gather(*(s.start_hog() for s in sockets), return_exceptions=True)
        running = []
        for sock, outcome in zip(sockets, outcomes):
            if isinstance(outcome, Exception):
                hog_errors[loadgen.error_kind(outcome)] += 1
            else:
                running.append(sock)
        await asyncio.sleep(spin_up)  # every loop now spinning
        try:
            busy = save_summary(*await save_loop(savers, duration, server_pids))
        finally:
            for reason in await asyncio.gather(*(s.stop_hog() for s in running)):
                stop_reasons[str(reason)] += 1
    ratio = {k: round(busy[k] / idle[k], 2) for k in ("p50_ms", "p95_ms", "p99_ms")
             if idle[k] and busy[k] is not None}
    return {"hogs": len(hog_users), "hogs_running": len(running), "hog_start_errors": dict(hog_errors),
            # "killed" is the expected end; anything else ended before we stopped it.
            "hog_exit_reasons": dict(stop_reasons), "savers": len(savers), "duration_s": duration,
            "idle": idle, "busy": busy, "busy_to_idle": ratio}


# -- the bare interpreter -------------------------------------------------------------------

def bare_interpreter(python, samples=BARE_SAMPLES, timeout=30):
    """Milliseconds from starting `python -c "print(1)"` to its first byte
    on stdout, `samples` times: {p50_ms, p95_ms, samples}."""
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        proc = subprocess.Popen([python, "-c", "print(1)"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL)
        try:
            first = os.read(proc.stdout.fileno(), 1)
            elapsed = time.perf_counter() - started
            proc.stdout.close()
            proc.wait(timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if first != b"1":
            raise Aborted(f"{python} -c 'print(1)' did not print 1")
        times.append(elapsed * 1000)
    times.sort()
    return {"samples": samples, "p50_ms": round(statistics.median(times), 2),
            "p95_ms": round(times[min(len(times) - 1, int(round(0.95 * len(times))) - 1)], 2)}


# -- which sandboxes work here ------------------------------------------------------------

def sandbox_problem(kind, cfg):
    """None if sandbox `kind` can run here, else why not (one line)."""
    if kind == "process":
        return None if os.path.exists(cfg.SANDBOX_PYTHON) else f"SANDBOX_PYTHON {cfg.SANDBOX_PYTHON} is missing"
    if kind == "local":
        from ..runs.sandbox_local import LocalSandbox
        if LocalSandbox.works(cfg):
            return None
        return ("bubblewrap cannot start a Python here (is bwrap installed, and are user namespaces "
                "allowed?)")
    if kind == "docker":
        try:
            from ..runs.sandbox_docker import DockerSandbox
        except Exception as e:
            return f"the docker sandbox cannot be imported ({e})"
        if DockerSandbox.works(cfg):
            return None
        return (f"no Docker daemon answers, or it has no image {cfg.SANDBOX_IMAGE} "
                "(scripts/start-docker, then scripts/build-sandbox-image)")
    return "unknown sandbox kind"


class ServerLog(collections.deque):
    """The server's last lines (as ServerUnderTest keeps them), plus every
    ERROR or WARNING record counted, and the last few of them kept whole
    (a traceback's lines with the record they belong to)."""

    RECORD = re.compile(r"^\d{4}-\d\d-\d\d ")  # a new log record starts with its date

    def __init__(self, maxlen=40):
        super().__init__(maxlen=maxlen)
        self.counts = Counter()
        self.problems = collections.deque(maxlen=5)  # [lines of one record]
        self._inside = False

    def append(self, line):
        line = line.rstrip("\n")
        if self.RECORD.match(line):
            level = next((lv for lv in ("ERROR", "WARNING", "CRITICAL") if f" {lv} " in line), None)
            self._inside = level is not None
            if level:
                self.counts[level] += 1
                self.problems.append([line])
        elif self._inside and len(self.problems[-1]) < 40:
            self.problems[-1].append(line)
        super().append(line + "\n")


# -- one sandbox kind, all measurements ------------------------------------------------------

def run_env(args, kind, dsn, data_dir):
    env = server_env(args.processes, dsn, data_dir)
    env.update({"SANDBOX": kind, "RUN_MAX_CONCURRENT": str(args.max_concurrent),
                "RUN_QUEUE_MAX": str(args.max_concurrent),
                # The loops must not hit the CPU limit while measured; the echo
                # program uses next to no CPU.
                "RUN_CPU_SECONDS": str(args.cpu_seconds),
                "RUN_IDLE_SECONDS": "300", "RUN_WALL_SECONDS": "900"})
    return env


async def sandbox_session(args, url, credentials, server_pids=()):
    """Everything measured on one server: log in, save the programs, the
    echo runs for every N, then the responsiveness measurement."""
    n_run = max(max(args.students), args.hogs)
    async with contextlib.AsyncExitStack() as stack:
        users = await log_in(url, credentials[:n_run + args.savers], stack, args.timeout)
        runners, savers = users[:n_run], users[n_run:]
        await save_everywhere(runners, ECHO_PATH, ECHO_PROGRAM)
        if args.hogs:
            await save_everywhere(runners[:args.hogs], HOG_PATH, HOG_PROGRAM)
        results = []
        for count in args.students:
            print(f"    {count} student(s) running for {args.duration:g} s ...", file=sys.stderr, flush=True)
            results.append(await echo_phase(url, runners[:count], args.duration, args.think, args.settle,
                                            args.timeout, server_pids=server_pids))
            await asyncio.sleep(1.0)  # the closed sockets' sandboxes go away
        responsiveness = None
        if args.hogs:
            print(f"    file saves by {args.savers} students, idle then with {args.hogs} endless loops ...",
                  file=sys.stderr, flush=True)
            responsiveness = await responsiveness_phase(url, runners[:args.hogs], savers, args.duration,
                                                        args.timeout, server_pids=server_pids)
        return results, responsiveness


def measure(args, kind, admin_dsn, base, credentials, deadline, python):
    name = f"bench_runs_{kind}_{secrets.token_hex(4)}"
    dsn, data_dir = new_server_space(admin_dsn, base, name, kind)
    server = ServerUnderTest({**run_env(args, kind, dsn, data_dir), "SANDBOX_PYTHON": python})
    server.tail = ServerLog()
    try:
        print(f"  sandbox {kind}: starting the server ...", file=sys.stderr, flush=True)
        server.start()  # applies the migrations: the users table exists after
        insert_users(dsn, credentials)
        # The bare interpreter again, right before this sandbox's runs: the
        # machine may be busier or quieter than at the start.
        bare = bare_interpreter(python)
        runs, responsiveness = run_async(sandbox_session(args, server.url, credentials, server.pids), deadline)
        if server.proc.poll() is not None:
            raise Aborted("the server died:\n" + server.output())
        result = {"sandbox": kind, "worker_pids": server.pids, "bare_interpreter_before": bare,
                  "runs": [{"sandbox": kind, **r} for r in runs], "responsiveness": responsiveness}
    finally:
        server.stop()
        # Containers a stopped server should have removed: a finding, and not
        # to be left on the daemon (only this server's, by their label).
        left = remove_containers_of(server.pids) if kind == "docker" else None
        admin_sql(admin_dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        shutil.rmtree(data_dir, ignore_errors=True)
    # After the stop: what it logged while shutting down counts too.
    result.update({"server_log_problems": dict(server.tail.counts),
                   "server_log_last_problems": list(server.tail.problems),
                   "docker_containers_left_after_stop": left})
    return result


def remove_containers_of(server_pids):
    """Remove the sandbox containers still on the Docker daemon that the
    server processes `server_pids` made (label pyclassroom.server-pid);
    returns how many there were (None if the daemon could not be asked)."""
    try:
        import docker
        from ..runs.sandbox_docker import PID_LABEL
        api = docker.APIClient(version="auto", timeout=30, **docker.utils.kwargs_from_env())
    except Exception:
        return None
    found = 0
    try:
        for pid in server_pids:
            for container in api.containers(all=True, filters={"label": f"{PID_LABEL}={pid}"}):
                found += 1
                with contextlib.suppress(Exception):
                    api.remove_container(container["Id"], force=True)
    except Exception:
        return None
    finally:
        api.close()
    return found


# -- report ---------------------------------------------------------------------------------

def fmt(value, spec=".1f"):
    return "-" if value is None else format(value, spec)


def pct(share):
    return "-" if share is None else f"{share:.0%}"


def targets(results, bare):
    """The figures the targets are about, per sandbox and student count."""
    out = []
    for block in results:
        for r in block["runs"]:
            p50 = r["first_output_p50_ms"]
            if p50 is None:
                continue
            near = block.get("bare_interpreter_before") or bare
            if block["sandbox"] == "local" and near["p50_ms"]:
                ratio = round(p50 / near["p50_ms"], 2)
                out.append({"sandbox": "local", "students": r["students"], "figure": "first-output p50 / bare p50",
                            "value": ratio, "target": f"<= {TARGET_LOCAL_RATIO:g}",
                            "met": ratio <= TARGET_LOCAL_RATIO})
            if block["sandbox"] == "docker":
                out.append({"sandbox": "docker", "students": r["students"], "figure": "first-output p50 ms",
                            "value": p50, "target": f"< {TARGET_DOCKER_MS:g}", "met": p50 < TARGET_DOCKER_MS})
        resp = block.get("responsiveness")
        if resp and resp["busy"]["p95_ms"] is not None:
            out.append({"sandbox": block["sandbox"], "students": resp["hogs"],
                        "figure": "save p95 ms with endless loops", "value": resp["busy"]["p95_ms"],
                        "target": f"< {TARGET_SAVE_P95_MS:g}", "met": resp["busy"]["p95_ms"] < TARGET_SAVE_P95_MS})
    return out


def report(args, info, bare, python, results, skipped):
    lines = [f"runs over /ws/run: each student runs {ECHO_PATH} (print, input(), print) in a loop for "
             f"{args.duration:g} s, a random {args.think * 0.5:g}-{args.think * 1.5:g} s pause between runs; WARM starts (the IDE's socket is open "
             "and its sandbox pre-started before the first run, and again during each pause)",
             f"server: {args.processes} process(es), RUN_MAX_CONCURRENT={args.max_concurrent} (nothing "
             f"queues), RUN_CPU_SECONDS={args.cpu_seconds}; first output = `run` sent -> first `output` frame "
             "(includes the server's output coalescing, up to 25 ms); exit = `run` sent -> `exit`",
             f"{'sandbox':>8} {'students':>8} {'runs':>5} {'errors':>6}  {'started':>7}  {'first p50':>9} {'p95':>6} "
             f"{'p99':>6}  {'exit p50':>8} {'p95':>6} {'p99':>6}  {'tail p95':>8} (ms)  {'runs/s':>6}  "
             f"{'sbx start':>9} {'new/reused':>10}  {'srv cpu':>7}  {'dockerd':>7}  {'machine':>7}  {'gen cpu':>7}"]
    for block in results:
        for r in block["runs"]:
            starts = r["server_sandbox_starts"] or {}
            lines.append(f"{r['sandbox']:>8} {r['students']:>8} {r['runs']:>5} {r['errors']:>6}  "
                         f"{fmt(r['started_p50_ms']):>7}  {fmt(r['first_output_p50_ms']):>9} "
                         f"{fmt(r['first_output_p95_ms']):>6} {fmt(r['first_output_p99_ms']):>6}  "
                         f"{fmt(r['exit_p50_ms']):>8} {fmt(r['exit_p95_ms']):>6} {fmt(r['exit_p99_ms']):>6}  "
                         f"{fmt(r['exit_after_output_p95_ms']):>8}       {r['runs_per_s']:>6.1f}  "
                         f"{fmt(starts.get('mean_ms')):>9} "
                         f"{str(starts.get('count', '-')) + '/' + str(r.get('server_sandbox_reuses', '-')):>10}  "
                         f"{pct(r['server_cpu']):>7}  "
                         f"{pct(r['docker_daemon_cpu'] if r['sandbox'] == 'docker' else None):>7}  "
                         f"{pct(r['machine_busy']):>7}  {r['loadgen_cpu']:>7.0%}")
    lines.append("(started: `run` -> `started` (p50); tail: last output frame -> `exit`; sbx start: the server's "
                 "mean time to start a sandbox until ready, during the loop, from its /metrics; new/reused: "
                 "sandboxes started afresh / made ready again after a run to serve the student's next one "
                 "(RUN_SANDBOX_RUNS), during the loop; srv cpu: the "
                 "server's processes, share of one core, sandboxes not included; dockerd: dockerd + containerd, of one "
                 "core; machine: all CPUs busy, of all; gen cpu: this load generator, of one core)")
    for block in results:
        near = block.get("bare_interpreter_before")
        if near:
            lines.append(f"bare interpreter right before the {block['sandbox']} runs: p50 {near['p50_ms']:.1f} ms, "
                         f"p95 {near['p95_ms']:.1f} ms")
    lines.append(f"bare interpreter at the start: {python} -c 'print(1)', start -> first stdout byte, {bare['samples']} times: "
                 f"p50 {bare['p50_ms']:.1f} ms, p95 {bare['p95_ms']:.1f} ms")
    lines.append("")
    resp_blocks = [b for b in results if b.get("responsiveness")]
    if resp_blocks:
        lines.append(f"file saves (PUT, If-Match, 2-4 KiB) by {args.savers} other students, closed loop "
                     f"{args.duration:g} s: idle, then while {args.hogs} students each run `while True: pass`")
        lines.append(f"{'sandbox':>8} {'load':>10} {'saves':>6} {'errors':>6}  {'p50':>7} {'p95':>7} {'p99':>7} "
                     f"{'max':>7} (ms)  {'saves/s':>7}  {'srv cpu':>7}  {'machine':>7}  {'gen cpu':>7}")
        for block in resp_blocks:
            resp = block["responsiveness"]
            for label, s in (("idle", resp["idle"]), (f"{resp['hogs_running']} loops", resp["busy"])):
                lines.append(f"{block['sandbox']:>8} {label:>10} {s['saves']:>6} {s['errors']:>6}  "
                             f"{fmt(s['p50_ms']):>7} {fmt(s['p95_ms']):>7} {fmt(s['p99_ms']):>7} "
                             f"{fmt(s['max_ms']):>7}       {s['saves_per_s']:>7.1f}  {pct(s['server_cpu']):>7}  "
                             f"{pct(s['machine_busy']):>7}  {s['loadgen_cpu']:>7.0%}")
            for label, s in (("idle", resp["idle"]), ("loops", resp["busy"])):
                parts = s.get("server_timing_ms") or {}
                lines.append(f"{'':>8} {label:>10} server time per save (Server-Timing, mean ms): " + ", ".join(
                    f"{k} {v:.1f}" for k, v in parts.items() if v))
            ratio = resp["busy_to_idle"]
            lines.append(f"{'':>8} {'busy/idle':>10} {'':>6} {'':>6}  {fmt(ratio.get('p50_ms'), '.2f'):>7} "
                         f"{fmt(ratio.get('p95_ms'), '.2f'):>7} {fmt(ratio.get('p99_ms'), '.2f'):>7}")
        lines.append("")
    for t in targets(results, bare):
        lines.append(f"target, {t['sandbox']}, {t['students']} students: {t['figure']} = {t['value']:.2f} "
                     f"(target {t['target']}): {'met' if t['met'] else 'NOT met'}")
    for block in results:
        kind = block["sandbox"]
        for r in block["runs"]:
            where = f"{kind}, {r['students']} students"
            if r["errors_by_kind"]:
                lines.append(f"errors, {where}: " + ", ".join(f"{k} {n}" for k, n in r["errors_by_kind"].items()))
            starts = r["server_sandbox_starts"] or {}
            if starts.get("mean_ms") and starts["mean_ms"] > r["think_s"] * 500:
                lines.append(f"WARNING, {where}: a sandbox took {starts['mean_ms']:.0f} ms on average to start, "
                             f"longer than the shortest pause ({r['think_s'] * 500:.0f} ms): some runs may have "
                             "waited for their sandbox, i.e. were not warm starts (a high `started` shows it)")
            if r["all_sandboxes_ready_s"] is not None and r["students"] > 1:
                lines.append(f"{where}: {r['students']} IDEs opened at once had all their sandboxes ready after "
                             f"{r['all_sandboxes_ready_s']:.2f} s")
            if not r["warm_sandboxes_reported"]:
                lines.append(f"WARNING, {where}: the server did not report every pre-started sandbox within "
                             f"{READY_WAIT:g} s: the first runs may not have been warm")
            if r["queued_messages"]:
                lines.append(f"WARNING, {where}: {r['queued_messages']} `queued` messages: admission queued "
                             "runs despite RUN_MAX_CONCURRENT")
            if r["loadgen_cpu_warning"]:
                lines.append(f"WARNING, {where}: the load generator used {r['loadgen_cpu']:.0%} of a core; "
                             "it may be the bottleneck")
        resp = block.get("responsiveness")
        if resp:
            where = f"{kind}, saves"
            for label in ("idle", "busy"):
                if resp[label]["errors_by_kind"]:
                    lines.append(f"errors, {where} ({label}): {resp[label]['errors_by_kind']}")
                if resp[label]["loadgen_cpu_warning"]:
                    lines.append(f"WARNING, {where} ({label}): the load generator used "
                                 f"{resp[label]['loadgen_cpu']:.0%} of a core")
            if resp["hog_start_errors"]:
                lines.append(f"endless loops that did not start, {kind}: {resp['hog_start_errors']}")
            if set(resp["hog_exit_reasons"]) - {"killed"}:
                lines.append(f"endless loops' exit reasons, {kind} (expected: killed): {resp['hog_exit_reasons']}")
        if block.get("docker_containers_left_after_stop"):
            lines.append(f"docker: {block['docker_containers_left_after_stop']} sandbox containers of the server "
                         "were still on the daemon after it stopped (removed by the benchmark)")
        if block["server_log_problems"]:
            lines.append(f"server log, {kind}: {block['server_log_problems']} records; the last ones:")
            for record in block["server_log_last_problems"]:
                lines.extend("    " + line[:300] for line in record)
    for kind, why in skipped.items():
        lines.append(f"skipped sandbox {kind}: {why}")
    lines.append(f"machine: {info['cpus']} CPUs ({info['usable_cpus']} usable, {info['cpu_model']}), "
                 f"{info['memory_gib']} GiB memory, Python {info['python']}, {info['platform']}")
    lines.append("the load generator runs on the same machine and competes with the server and sandboxes for CPU")
    return "\n".join(lines)


# -- main -------------------------------------------------------------------------------------

def sandbox_list(text):
    values = [v.strip() for v in text.split(",") if v.strip()]
    bad = [v for v in values if v not in SANDBOXES]
    if not values or bad:
        raise argparse.ArgumentTypeError(f"expected some of {','.join(SANDBOXES)} separated by commas, not {text!r}")
    return values


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m server.ops.bench_runs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sandbox", type=sandbox_list, default=list(SANDBOXES),
                        help="sandbox kinds to measure (default local,docker,process)")
    parser.add_argument("--students", type=int_list, default=[1, 10, 60],
                        help="students running programs at once (default 1,10,60)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of each measurement (default 10)")
    parser.add_argument("--processes", type=int, default=1, help="server worker processes (default 1)")
    parser.add_argument("--think", type=float, default=1.0,
                        help="seconds each student waits between runs (default 1)")
    parser.add_argument("--settle", type=float, default=1.0,
                        help="extra seconds after the warm sandboxes are reported (default 1)")
    parser.add_argument("--hogs", type=int, default=60,
                        help="students running endless loops for the responsiveness measurement (default 60; 0: skip)")
    parser.add_argument("--savers", type=int, default=5, help="students saving files meanwhile (default 5)")
    parser.add_argument("--max-concurrent", type=int, default=200, help="RUN_MAX_CONCURRENT (default 200)")
    parser.add_argument("--cpu-seconds", type=int, default=60, help="RUN_CPU_SECONDS (default 60)")
    parser.add_argument("--timeout", type=float, default=loadgen.REQUEST_TIMEOUT,
                        help="seconds allowed per run or request (default 30)")
    parser.add_argument("--max-seconds", type=float, default=1800, help="bound on the whole run (default 1800)")
    parser.add_argument("--json", metavar="OUT", help="also write every figure and setting to this file")
    args = parser.parse_args(argv)
    if args.duration <= 0 or args.think < 0 or args.settle < 0 or args.hogs < 0 or args.savers < 1:
        parser.error("--duration must be positive, --think/--settle/--hogs at least 0, --savers at least 1")
    if args.processes < 1:
        parser.error("--processes must be at least 1")
    if args.max_concurrent < max(max(args.students), args.hogs) * 1:
        parser.error("--max-concurrent must be at least the largest of --students and --hogs, "
                     "or runs would queue")
    if args.cpu_seconds < args.duration + 5:
        parser.error("--cpu-seconds must exceed --duration by a margin, or the loops hit the CPU limit")
    return args



def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    clean_up_on_sigterm()
    _raise_file_limit()
    deadline = time.monotonic() + args.max_seconds
    cfg = config.load()  # SANDBOX_PYTHON, SANDBOX_IMAGE, SANDBOX_UID_BASE as the server will see them
    results, skipped = [], {}
    try:
        with scratch("pyclassroom-bench-runs-") as (base, pg):
            kinds = []
            for kind in args.sandbox:
                why = sandbox_problem(kind, cfg)
                if why:
                    skipped[kind] = why
                    print(f"skipping sandbox {kind}: {why}", file=sys.stderr, flush=True)
                else:
                    kinds.append(kind)
            print(f"bare interpreter: {BARE_SAMPLES} x {cfg.SANDBOX_PYTHON} -c 'print(1)' ...", file=sys.stderr,
                  flush=True)
            bare = bare_interpreter(cfg.SANDBOX_PYTHON)
            if kinds:
                print("starting PostgreSQL and hashing passwords ...", file=sys.stderr, flush=True)
                admin_dsn = pg.start()
                credentials = make_credentials(max(max(args.students), args.hogs) + args.savers)
                for kind in kinds:
                    results.append(measure(args, kind, admin_dsn, base, credentials, deadline, cfg.SANDBOX_PYTHON))
    except Aborted as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; cleaned up", file=sys.stderr)
        return 130
    info = machine()
    print(report(args, info, bare, cfg.SANDBOX_PYTHON, results, skipped))
    if args.json:
        settings = {k: getattr(args, k) for k in ("sandbox", "students", "duration", "processes", "think", "settle",
                                                  "hogs", "savers", "max_concurrent", "cpu_seconds", "timeout")}
        settings.update({"sandbox_python": cfg.SANDBOX_PYTHON, "echo_program": ECHO_PROGRAM,
                         "hog_program": HOG_PROGRAM})
        with open(args.json, "w") as f:
            json.dump({"settings": settings, "machine": info, "bare_interpreter": bare, "results": results,
                       "skipped": skipped, "targets": targets(results, bare)}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
