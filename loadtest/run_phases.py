"""What bench_runs measures on one server per sandbox kind: warm runs of
the echo program by N students at once (`echo_phase`), and file saves by
other students, idle and then while students run endless loops
(`responsiveness_phase`); plus which sandbox kinds can run here."""
import asyncio
import collections
import contextlib
import os
import random
import re
import secrets
import tempfile
import time
from collections import Counter

import aiohttp

from . import loadgen
from .cli import REQUEST_TIMEOUT, Aborted, say
from .client import Student, VirtualUser, error_kind, log_in_all, save_file
from .harness import RunnerProcess, fresh_server, run_async, tail
from .machine import CpuWatch, bare_interpreter
from .recording import CPU_WARNING, Recorder
from .run_client import ECHO_PROGRAM, HOG_PROGRAM, open_ides
from .server_metrics import sandbox_reuses, sandbox_starts, starts_between, wait_for_sandboxes

ECHO_PATH = "bench_echo.py"
HOG_PATH = "bench_hog.py"
SAVE_PATH = "bench_save.py"


# -- setting up students ---------------------------------------------------------------

async def log_in(url, credentials, stack, timeout):
    """Every (username, password) signed in, as VirtualUsers in order; the
    first failure aborts: the benchmark needs them all."""
    users, failed = await log_in_all(lambda: VirtualUser(url, timeout), credentials, stack)
    if failed:
        raise Aborted(f"students could not log in: {dict(failed)}")
    return users


async def save_everywhere(users, path, text):
    outcomes = await asyncio.gather(*(save_file(u, path, text) for u in users), return_exceptions=True)
    failed = Counter(error_kind(o) for o in outcomes if isinstance(o, Exception))
    if failed:
        raise Aborted(f"could not save {path} for every student: {dict(failed)}")


async def ides(url, users, stack, timeout):
    """Every user's IDE socket, opened at once; the first failure aborts."""
    sockets, failed = await open_ides(url, users, stack, timeout)
    if failed:
        raise Aborted(f"WebSockets could not be opened: {dict(failed)}")
    return sockets


# -- measurement: warm runs ---------------------------------------------------------------

async def echo_phase(url, users, duration, think=1.0, settle=1.0, timeout=REQUEST_TIMEOUT,
                     path=ECHO_PATH, server_pids=()):
    """Every user's IDE opens, waits for its warm sandbox, then runs `path`
    (the echo program, already saved) in a loop for `duration` seconds.
    `server_pids`: the server's processes, whose CPU use is reported.
    Returns a summary dict."""
    # One recorder per figure; errors are counted in "exit" only.
    rec = {name: Recorder() for name in ("started", "first", "exit", "tail")}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as metrics_http:
        before_open = await sandbox_starts(metrics_http, url)
        opened = time.perf_counter()
        async with contextlib.AsyncExitStack() as stack:
            sockets = await ides(url, users, stack, timeout)  # closed on the way out: their sandboxes go
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
                        rec["exit"].error(error_kind(e))
                        await sock.recover(e)
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
        "loadgen_cpu": round(window.cpu_share, 3), "loadgen_cpu_warning": window.cpu_share > CPU_WARNING,
        # server_cpu: share of one core, the server's processes together (not its sandboxes);
        # docker_daemon_cpu: dockerd + containerd, of one core; machine_busy: of all cores.
        **used,
    }


# -- measurement: responsiveness under load ------------------------------------------------

async def save_loop(savers, duration, server_pids=()):
    """Each saver saves its own file in a closed loop for `duration` s:
    (recorder, window, {server CPU meanwhile, server_timing_ms})."""
    recorder = Recorder()
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
            "loadgen_cpu": round(window.cpu_share, 3), "loadgen_cpu_warning": window.cpu_share > CPU_WARNING,
            **used}


async def responsiveness_phase(url, hog_users, saver_users, duration, timeout=REQUEST_TIMEOUT,
                               spin_up=1.0, server_pids=()):
    """Save latency of `saver_users` with nothing running, then while every
    one of `hog_users` runs HOG_PROGRAM (already saved). Returns a summary."""
    savers = [Student(user, SAVE_PATH) for user in saver_users]
    for student in savers:  # create the files (untimed; warms the connections)
        await student.save()
    idle = save_summary(*await save_loop(savers, duration, server_pids))
    hog_errors, stop_reasons = Counter(), Counter()
    async with contextlib.AsyncExitStack() as stack:
        metrics_http = await stack.enter_async_context(
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)))
        before_open = await sandbox_starts(metrics_http, url)
        sockets = await ides(url, hog_users, stack, timeout)
        if before_open[0] is not None:  # as in the IDE: the loops start in warm sandboxes
            await wait_for_sandboxes(metrics_http, url, before_open[0] + len(sockets))
        outcomes = await asyncio.gather(*(s.start_hog(HOG_PATH) for s in sockets), return_exceptions=True)
        running = []
        for sock, outcome in zip(sockets, outcomes):
            if isinstance(outcome, Exception):
                hog_errors[error_kind(outcome)] += 1
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


# -- which sandboxes work here ------------------------------------------------------------

def sandbox_problem(kind, cfg):
    """None if sandbox `kind` can run here, else why not (one line)."""
    if kind == "remote":  # runners of the local kind
        return sandbox_problem("local", cfg)
    if kind == "process":
        return None if os.path.exists(cfg.SANDBOX_PYTHON) else f"SANDBOX_PYTHON {cfg.SANDBOX_PYTHON} is missing"
    if kind == "local":
        from server.runs.sandbox.local import LocalKind
        if LocalKind.works(cfg):
            return None
        return ("bubblewrap cannot start a Python here (is bwrap installed, and are user namespaces "
                "allowed?)")
    if kind == "docker":
        try:
            from server.runs.sandbox.docker import DockerKind
        except Exception as e:
            return f"the docker sandbox cannot be imported ({e})"
        if DockerKind.works(cfg):
            return None
        return (f"no Docker daemon answers, or it has no image {cfg.SANDBOX_IMAGE} "
                "(scripts/start-docker, then scripts/build-sandbox-image)")
    return "unknown sandbox kind"


class ServerLog(collections.deque):
    """A ServerProcess `log`: its last lines (as `harness.tail` keeps), plus every
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

def sandbox_settings(args, kind, python):
    """The server's settings for measuring sandbox `kind`: admission never queues."""
    return {"SANDBOX": kind, "SANDBOX_PYTHON": python, "RUN_MAX_CONCURRENT": str(args.max_concurrent),
            "RUN_QUEUE_MAX": str(args.max_concurrent),
            # The loops must not hit the CPU limit while measured; the echo
            # program uses next to no CPU.
            "RUN_CPU_SECONDS": str(args.cpu_seconds),
            "RUN_IDLE_SECONDS": "300", "RUN_WALL_SECONDS": "900"}


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
            say(f"    {count} student(s) running for {args.duration:g} s ...")
            results.append(await echo_phase(url, runners[:count], args.duration, args.think, args.settle,
                                            args.timeout, server_pids=server_pids))
            await asyncio.sleep(1.0)  # the closed sockets' sandboxes go away
        responsiveness = None
        if args.hogs:
            say(f"    file saves by {args.savers} students, idle then with {args.hogs} endless loops ...")
            responsiveness = await responsiveness_phase(url, runners[:args.hogs], savers, args.duration,
                                                        args.timeout, server_pids=server_pids)
        return results, responsiveness


@contextlib.contextmanager
def runners(count, base, settings):
    """`count` runners (python -m server.runner, local sandboxes), each
    with a folder of its own in `base`: yields the server's settings that
    send its programs there, and the RunnerProcesses. None for 0: the
    server's workers start a child runner each (SANDBOX=remote alone)."""
    if not count:
        yield {}, []
        return
    secret = secrets.token_urlsafe(32)
    sandbox = {k: v for k, v in settings.items() if k.startswith(("RUN_", "SANDBOX_"))}
    with contextlib.ExitStack() as stack:
        started = []
        for i in range(count):
            folder = tempfile.mkdtemp(prefix=f"runner-{i + 1}-", dir=base)
            os.chmod(folder, 0o755)
            runner = RunnerProcess(f"r{i + 1}", secret, folder, sandbox, log=tail())
            stack.callback(runner.stop)
            started.append(runner.start())
        yield ({"RUNNER_SECRET": secret,
                "RUNNERS": " ".join(f"{r.id}={r.url}" for r in started)}, started)


def measure(args, kind, admin_dsn, base, credentials, deadline, python, runner_count=0):
    """Everything measured with sandbox `kind`, on a server of its own (for
    remote: on `runner_count` runners, or a child runner per worker)."""
    log, pids = ServerLog(), []
    label = kind if kind != "remote" else f"remote/{runner_count or 'child'}"
    say(f"  sandbox {label}: starting the server ...")
    settings = sandbox_settings(args, kind, python)
    try:
        with runners(runner_count, base, settings) as (remote, started), \
                fresh_server(admin_dsn, base, args.processes, credentials, f"bench_runs_{kind}", log,
                             **settings, **remote) as (server, logins):
            pids = server.pids
            # The bare interpreter again, right before this sandbox's runs: the
            # machine may be busier or quieter than at the start.
            bare = bare_interpreter(python)
            # The server's CPU: its workers' (and their children's), and its runners'.
            runner_pids = [r.proc.pid for r in started]
            with split_cpus(server.pids, runner_pids) if getattr(args, "split_cpus", False) \
                    else contextlib.nullcontext():
                runs, responsiveness = run_async(sandbox_session(args, server.url, logins,
                                                                 server.pids + runner_pids), deadline)
            server.ensure_running()
    finally:
        # Containers a stopped server should have removed: a finding, and not
        # to be left on the daemon (only this server's, by their label).
        left = remove_containers_of(pids) if kind == "docker" else None
    # After the stop: what it logged while shutting down counts too.
    return {"sandbox": label, "worker_pids": pids, "bare_interpreter_before": bare,
            "runs": [{"sandbox": label, **r} for r in runs], "responsiveness": responsiveness,
            "server_log_problems": dict(log.counts), "server_log_last_problems": list(log.problems),
            "docker_containers_left_after_stop": left}


@contextlib.contextmanager
def split_cpus(server_pids, runner_pids):
    """As if the runners had a host of their own: the server, its children
    (sandboxes, for local) and this load generator on the first half of the
    CPUs, the runners and theirs on the other half (what they start later
    inherits it). The load generator's own CPUs come back after."""
    import psutil
    mine = sorted(os.sched_getaffinity(0))
    web, rest = mine[:len(mine) // 2], mine[len(mine) // 2:]
    for pids, cpus in ((server_pids, web), (runner_pids, rest)):
        for pid in pids:
            with contextlib.suppress(psutil.Error):
                for proc in [psutil.Process(pid)] + psutil.Process(pid).children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        proc.cpu_affinity(cpus)
    os.sched_setaffinity(0, web)
    say(f"    the server and this load generator on CPUs {web}, the runners on {rest}")
    try:
        yield
    finally:
        os.sched_setaffinity(0, mine)


def remove_containers_of(server_pids):
    """Remove the sandbox containers still on the Docker daemon that the
    server processes `server_pids` made (label pyclassroom.server-pid);
    returns how many there were (None if the daemon could not be asked)."""
    try:
        import docker
        from server.runs.sandbox.docker import PID_LABEL
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
