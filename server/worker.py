"""One worker process: its IOLoop, database pool, thread pools and HTTP server.

Everything here is created after the fork (see `__main__`), so no worker
shares a loop, a thread or a connection with another. A worker holds only
caches and its own live connections; shared state is in PostgreSQL and on
STORAGE_ROOT, so any request may land on any worker.
"""
import asyncio
import logging
import os
import random
import signal
import socket
import time
from typing import Callable

import asyncpg
from tornado.httpserver import HTTPServer

from . import db, metrics, notify
from .app import make_app
from .batch import Batch
from .config import Config
from .instance import Instance
from .accounts import sessions, throttle
from .accounts.service import Accounts
from .accounts.uids import run_uid
from .assist.service import Assist
from .checks.checkers import CheckerSandboxes
from .checks.grader import Grader
from .accounts.sessions import Sessions
from .signin.service import SignIn
from .executor import BoundedExecutor
from .fifo import FifoGate
from .inbox import Inbox
from .exams.grading import Grading
from .exams.service import Exams
from .replay.service import Replays
from .exercises.service import Exercises
from .files.changes import FileChanges
from .files.processes import FileProcesses
from .files.service import Files
from .files.store import Limits, Store
from .runs import manager, runlock, sandbox
from .runs.admission import Admission
from .placement.demand import Publisher
from .placement.registry import Registry
from .runs.sandbox import SandboxKind
from .runs.sandbox.remote import RemoteKind
from .runs.starts import Starts
from .runs import scratch
from .runs.events import Guarded
from .runs.job import Jobs
from .runs.warm import WarmSandboxes
from .teaching.classes import Classes
from .teaching.service import Teaching

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.5  # how long batched bookkeeping (save times, session renewals) may wait: a save shows on
# the proctor view within a second (bench_exam: p95 1.1 s with a second here)


class Context:
    """What handlers reach through `self.ctx`: settings, pools, executors,
    and the services (accounts, files, teaching, exercises, runs), which exist once
    the database pool is open (open_database), and editing help (assist),
    whose processes start with the worker."""

    # From open_database on (serve calls it before the first request):
    pool: db.Pool
    notify: notify.Listener
    accounts: Accounts
    sessions: Sessions
    signin: SignIn
    files: Files
    inbox: Inbox
    teaching: Teaching
    exercises: Exercises
    exams: Exams
    replays: Replays
    exam_grading: Grading
    jobs: Jobs
    grader: Grader
    runs: manager.RunManager
    batches: list[Batch | Replays]
    registry: Registry  # the runners that registered (SANDBOX=remote)
    # From serve, once the files service is there:
    assist: Assist

    def __init__(self, cfg: Config, instance: Instance, processes: int, sandbox_kind: SandboxKind | None = None):
        self.cfg = cfg
        self.instance = instance
        self.pid = os.getpid()
        self.processes = processes
        self.cookie_secret = instance.cookie_secret()
        self.requests = FifoGate("request", cfg.REQUESTS_AT_ONCE, cfg.REQUEST_QUEUE)
        hash_threads = cfg.HASH_THREADS or os.cpu_count() or 1
        # A class logs in at once: room for every student's login to wait.
        self.hasher = BoundedExecutor("hash", hash_threads, max_pending=512)
        self.file_threads = BoundedExecutor("fs", cfg.FILE_THREADS, max_pending=4096)
        self.store = Store(cfg.STORAGE_ROOT, Limits(
            quota_bytes=cfg.QUOTA_BYTES, quota_files=cfg.QUOTA_FILES,
            max_file_bytes=cfg.MAX_FILE_BYTES, history_versions=cfg.HISTORY_VERSIONS,
            delay_ms=cfg.FS_DELAY_MS))
        self.file_processes = FileProcesses(self.store, cfg.FILE_PROCESSES, max_pending=4096)
        # (A test's in-process worker passes a kind of its own: tests/inprocess.py.)
        self.sandbox_kind: SandboxKind = sandbox_kind or sandbox.create(cfg)
        self.admission = Admission.share(cfg, processes)
        self.draining = False
        self.inflight = 0  # requests being served (drain waits for them)


async def open_database(ctx: Context, dsn: str) -> None:
    """The pool, the services over it, the schema up to date and, on an
    empty database, the first accounts."""
    pool_size = max(1, ctx.cfg.DB_POOL_MAX // ctx.processes)
    ctx.pool = await db.create_pool(dsn, pool_size, ctx.cfg.DB_ACQUIRE_TIMEOUT, ctx.cfg.DB_QUERY_TIMEOUT)
    ctx.notify = notify.Listener(dsn)
    ctx.accounts = Accounts(ctx.pool, ctx.hasher, ctx.cfg, ctx.cookie_secret)
    ctx.sessions = sessions.Sessions(ctx.pool, ctx.cfg.SESSION_TTL, ctx.cfg.SESSION_CACHE_SECONDS, ctx.notify)
    ctx.signin = SignIn(ctx.pool, ctx.cfg, ctx.accounts)
    classes = Classes(ctx.pool)
    # Threads of the files' own: a call stuck in a hung storage holds one of
    # these, never one that /metrics or /api/status need.
    storage_threads = BoundedExecutor("fs", ctx.cfg.FILE_THREADS, max_pending=4096)
    ctx.files = Files(ctx.store, ctx.file_processes, storage_threads, ctx.pool, ctx.cfg, classes)
    ctx.files.changes = FileChanges(ctx.pool, ctx.notify)
    ctx.inbox = Inbox(ctx.pool, ctx.notify)  # what teaching tells the students' open IDEs
    ctx.teaching = Teaching(ctx.pool, ctx.files, ctx.cfg, classes, ctx.accounts, ctx.notify, ctx.inbox)
    ctx.exercises = Exercises(ctx.pool, ctx.files, classes)
    ctx.exams = ctx.files.exams = Exams(ctx.pool, classes, ctx.exercises)  # (its folders: every change asks it)
    ctx.replays = Replays(ctx.pool, ctx.files, ctx.cfg.REPLAY_KEEP_BYTES, lambda: ctx.draining)
    ctx.teaching.live.exams = ctx.exams  # (the proctor view: the class view in an exam's mode)
    ctx.registry = Registry(ctx.pool)
    if isinstance(ctx.sandbox_kind, RemoteKind):
        ctx.sandbox_kind.registry = ctx.registry  # runners that register, beside those in RUNNERS
        ctx.sandbox_kind.draining = lambda: ctx.draining  # a start waiting for a runner gives up at shutdown
    # Every sandbox this worker starts waits its turn there (runs/starts.py).
    starts = Starts(ctx.sandbox_kind, ctx.cfg, ctx.processes)
    warm = WarmSandboxes(starts, ctx.files.ensure_home, lambda user: run_uid(ctx.cfg, user["id"]),
                         lambda: ctx.draining)
    # Every run of this worker is a job (runs/job.py); the IDE sockets' manager makes theirs.
    ctx.jobs = Jobs(ctx.cfg, ctx.pool, ctx.files, ctx.admission, warm, Guarded(ctx.teaching), lambda: ctx.draining)
    ctx.grader = Grader(ctx.cfg, ctx.jobs, CheckerSandboxes(starts), ctx.exercises, ctx.files,
                        ctx.processes)
    ctx.runs = manager.RunManager(ctx.jobs, ctx.grader)
    ctx.exam_grading = Grading(ctx.pool, ctx.exams, ctx.grader)  # (submissions wait in the checks' line)
    # Writes that wait for the worker's next flush (flush_batches).
    ctx.batches = [ctx.sessions.renewals, ctx.files.save_times, ctx.teaching.viewing, ctx.replays]
    # Its own connection, without the request paths' timeouts: migrating (or
    # waiting for another worker's migrations) may take longer than a query may.
    conn = await asyncpg.connect(dsn)
    try:
        async with db.locked(conn):
            await db.migrate(conn)
            created = await ctx.accounts.bootstrap(conn, ctx.cfg.ADMIN_PASSWORD, ctx.cfg.DEMO)
    finally:
        await conn.close()
    if created:
        lines = [f"    {username:<10} {password:<20} ({role})" for username, role, password in created]
        print("\nAccounts created on this empty database (the passwords are shown only once):\n"
              + "\n".join(lines) + "\n", flush=True)
    await ctx.notify.start()  # after the callbacks are registered (by the services above)


async def flush_batches(ctx: Context) -> None:
    """Write every batch's pending items (batch.py). An outage keeps them
    for the next flush, logged once by the pool; anything else is logged."""
    for batch in ctx.batches:
        try:
            await batch.flush()
        except Exception as e:
            if not db.unavailable(e):
                log.exception("writing the %s failed", batch.name)


async def flusher(ctx: Context) -> None:
    """Once a second: the batches, and the session cache's stale entries."""
    while True:
        await asyncio.sleep(FLUSH_SECONDS)
        await flush_batches(ctx)
        ctx.sessions.sweep()


async def periodic(ctx: Context) -> None:
    """Per-worker housekeeping: sessions of open run sockets every second,
    gauges and run heartbeats every few seconds, pruning now and then
    (jittered so N workers do not all prune at once)."""
    next_prune = time.monotonic() + random.uniform(60, 600)
    next_heartbeat = 0.0
    while True:
        try:
            await ctx.runs.close_ended_sessions()
        except Exception as e:
            if not db.unavailable(e):  # an outage is logged once, by the pool
                log.exception("closing the ended sessions' run sockets failed")
        if time.monotonic() > next_heartbeat:
            next_heartbeat = time.monotonic() + runlock.HEARTBEAT
            metrics.update_pool(ctx.pool)
            try:
                await runlock.heartbeat(ctx.pool, ctx.jobs.claims())
            except Exception as e:
                if not db.unavailable(e):
                    log.exception("run heartbeat failed")
        if time.monotonic() > next_prune:
            next_prune = time.monotonic() + 600
            try:
                await sessions.prune(ctx.pool)
                await throttle.prune(ctx.pool)
                await ctx.signin.prune()
            except Exception as e:
                if not db.unavailable(e):
                    log.exception("pruning failed")
        await asyncio.sleep(manager.SESSION_LOOK_SECONDS)


async def serve(cfg: Config, instance: Instance, sockets: list[socket.socket], dsn: str, processes: int,
                on_ready: Callable[[], None]) -> None:
    # Sandboxes are child processes: watch them with pidfds, not a thread each.
    watcher = asyncio.PidfdChildWatcher()
    watcher.attach_loop(asyncio.get_running_loop())
    asyncio.set_child_watcher(watcher)
    ctx = Context(cfg, instance, processes)
    try:
        removed = await ctx.sandbox_kind.cleanup_leftovers()
        if removed:
            log.info("removed %d sandboxes left by a stopped worker", removed)
        removed = await asyncio.get_running_loop().run_in_executor(None, scratch.remove_leftovers, cfg)
        if removed:
            log.info("removed %d checks' scratch folders left by a stopped worker", removed)
    except Exception:
        log.exception("could not remove sandboxes left by a previous worker")
    await ctx.file_processes.start()
    await open_database(ctx, dsn)
    ctx.assist = await Assist.start(cfg, ctx.files)
    app = make_app(ctx)
    # xheaders stays off: Tornado would also believe X-Real-Ip and X-Scheme,
    # which load balancers pass through from the client (see web.client_address).
    # Idle keep-alive connections outlive the load balancer's (3600 s), so it
    # never sends a request on a connection we are closing (a 502).
    server = HTTPServer(app, xheaders=False,
                        max_body_size=max(cfg.MAX_BODY_BYTES, cfg.MAX_FILE_BYTES + (64 << 10)) + 1,
                        idle_connection_timeout=3700)
    server.add_sockets(sockets)
    metrics.WORKERS.set(1)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    tasks = [asyncio.create_task(periodic(ctx)), asyncio.create_task(flusher(ctx))]
    if cfg.SANDBOX == "remote" and cfg.CLOUDWATCH_NAMESPACE:  # the runners' autoscaling reads it
        tasks.append(asyncio.create_task(Publisher(cfg.CLOUDWATCH_NAMESPACE).publish(
            ctx.registry.alive, lambda: len(ctx.jobs.warm.starts.line.waiting))))
    ctx.teaching.start()
    on_ready()
    await stop.wait()
    for task in tasks:
        task.cancel()
    await drain(ctx, server)


async def drain(ctx: Context, server: HTTPServer) -> None:
    """Stop accepting, tell WebSocket clients, let requests in flight finish
    (up to SHUTDOWN_TIMEOUT), then close everything."""
    log.info("worker %d shutting down", os.getpid())
    ctx.draining = True
    server.stop()
    # Runs end first and give back their locks, so each client is told why
    # before its socket closes and no student stays locked out; then the
    # ready sandboxes go, while the sandbox engine and the database are there.
    await ctx.runs.shutdown()
    await ctx.teaching.close()  # after the runs: their ends are recorded
    deadline = time.monotonic() + ctx.cfg.SHUTDOWN_TIMEOUT
    while ctx.inflight > 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    if ctx.inflight:
        log.warning("worker %d: %d requests still running at the shutdown deadline", os.getpid(), ctx.inflight)
    try:
        await asyncio.wait_for(server.close_all_connections(), timeout=2)
    except asyncio.TimeoutError:
        pass
    # What the last requests left to write, before the pool goes.
    try:
        await asyncio.wait_for(flush_batches(ctx), timeout=ctx.cfg.DB_QUERY_TIMEOUT + ctx.cfg.DB_ACQUIRE_TIMEOUT)
    except asyncio.TimeoutError:
        log.warning("worker %d: the last batched writes did not finish in time", os.getpid())
    await ctx.notify.close()
    try:
        await asyncio.wait_for(ctx.pool.close(), timeout=2)
    except asyncio.TimeoutError:
        ctx.pool.terminate()
    await ctx.assist.close()
    await ctx.file_processes.close()
    ctx.hasher.shutdown()
    ctx.file_threads.shutdown()
    ctx.files.threads.shutdown()
    ctx.files.health.close()


def main(cfg: Config, instance: Instance, sockets: list[socket.socket], dsn: str, processes: int,
         on_ready: Callable[[], None]) -> None:
    """Serve until SIGTERM/SIGINT; the process then exits 0."""
    asyncio.run(serve(cfg, instance, sockets, dsn, processes, on_ready))
