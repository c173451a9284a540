"""The application in the test process: a worker's Context (server/worker.py)
on a fresh PostgreSQL database, its sandboxes scripted (scripted_sandbox.py),
served by Tornado's HTTPServer on a loopback port from an IOLoop in a thread
of its own. The tests' synchronous helpers (People, RunClient over
`server.url`) work against it as against a server process, and `call` runs
a coroutine on its loop to look inside (`server.ctx`: the Context).

No `python -m server`, no bubblewrap, no Docker, no root: what it proves is
what the job, admission, the run manager, the run and the /ws/run socket
decide. The stories that need a real program stay on the real server, or
name a real kind (SANDBOX="local": the job tests' every defence, as root).
"""
import asyncio
import contextlib
import os
import threading

from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from server import config, worker
from server.app import make_app
from server.runs import sandbox
from server.assist.service import Assist
from server.instance import Instance

from loadtest.harness import ADMIN_PASSWORD, COOKIE_SECRET
from tests.scripted_sandbox import ScriptedKind

START_TIMEOUT = 60.0  # hang guards, not timings
STOP_TIMEOUT = 60.0


class InProcessServer:
    """Start with `start()`, stop with `stop()`; `url`, `env` (DATABASE_URL)
    and `client()` as loadtest.harness.ServerProcess has them."""

    processes = 1

    def __init__(self, dsn, data_dir, **settings):
        settings.setdefault("SANDBOX", "scripted")
        self.env = {"DATABASE_URL": dsn, "DATA_DIR": data_dir, "SANDBOX": settings["SANDBOX"]}
        scripted = settings["SANDBOX"] == "scripted"
        self.cfg = config.load({"DATABASE_URL": dsn, "DATA_DIR": data_dir, "COOKIE_SECRET": COOKIE_SECRET,
                                "ADMIN_PASSWORD": ADMIN_PASSWORD, "DEMO": "0", "ASSIST_PROCESSES": "0",
                                "FILE_PROCESSES": "1",
                                **{k: str(v) for k, v in settings.items()},
                                "SANDBOX": "process" if scripted else settings["SANDBOX"]})
        self.kind = ScriptedKind() if scripted else None  # None: the worker makes the real one
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="inprocess-server", daemon=True)
        self.url = None
        self.ctx = None
        self.leftovers = []  # tasks still pending after the drain, cancelled

    def call(self, coro, timeout=START_TIMEOUT):
        """Run `coro` on the server's loop; its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def client(self):
        from loadtest.client import Client
        return Client(self.url)

    def start(self):
        self.thread.start()
        self.call(self._start())
        return self

    async def _start(self):
        os.makedirs(self.cfg.STORAGE_ROOT, exist_ok=True)
        if self.kind is None:  # a real kind, resolved as a server's start does
            self.cfg = self.cfg.but(SANDBOX=sandbox.resolve(self.cfg))
        instance = Instance(self.cfg)
        instance.prepare_cookie_secret()  # COOKIE_SECRET: nothing written
        ctx = self.ctx = worker.Context(self.cfg, instance, 1, sandbox_kind=self.kind)
        await ctx.file_processes.start()
        await worker.open_database(ctx, self.cfg.DATABASE_URL)
        ctx.assist = await Assist.start(self.cfg, ctx.files)  # ASSIST_PROCESSES=0: editing help off
        self.http = HTTPServer(make_app(ctx), xheaders=False)
        sockets = bind_sockets(0, "127.0.0.1")
        self.http.add_sockets(sockets)
        self.url = f"http://127.0.0.1:{sockets[0].getsockname()[1]}"
        self.housekeeping = [asyncio.ensure_future(worker.periodic(ctx)), asyncio.ensure_future(worker.flusher(ctx))]
        ctx.teaching.start()

    def stop(self):
        """Drain as a worker does at SIGTERM, then stop the loop and its thread."""
        if self.loop.is_closed():
            return
        if self.ctx is not None and hasattr(self.ctx, "runs"):
            self.call(self._stop(), STOP_TIMEOUT)
        elif self.ctx is not None:  # the start failed half-way
            self.call(self.ctx.file_processes.close(), STOP_TIMEOUT)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(STOP_TIMEOUT)
        self.loop.close()

    async def _stop(self):
        for task in self.housekeeping:
            task.cancel()
        await asyncio.gather(*self.housekeeping, return_exceptions=True)
        await worker.drain(self.ctx, self.http)
        self.ctx.sandbox_kind.close()
        # What the worker leaves to finish on its own (a home's usage recount
        # due later) would outlive a worker process's loop too: cancelled
        # here, so that nothing of this test runs on into the next.
        current = asyncio.current_task()
        self.leftovers = [t for t in asyncio.all_tasks() if t is not current]
        for task in self.leftovers:
            task.cancel()
        await asyncio.gather(*self.leftovers, return_exceptions=True)

@contextlib.contextmanager
def started(dsn, data_dir):
    """start(**settings) -> a running InProcessServer on the test's database;
    stopped on leaving, which fails if a sandbox is left alive or the
    server's thread does not end (one test's leftovers must not reach the next)."""
    servers = []

    def start(**settings):
        assert not servers, "one in-process server per test: they would share its database"
        servers.append(InProcessServer(dsn, data_dir, **settings))
        return servers[-1].start()

    try:
        yield start
    finally:
        for server in servers:
            server.stop()
            assert not server.thread.is_alive(), "the in-process server's thread did not end"
            if server.kind is not None:
                assert not server.kind.live, f"sandboxes left alive after the drain: {server.kind.live}"
