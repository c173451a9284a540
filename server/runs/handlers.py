"""WebSocket /ws/run: one connection per open IDE, one run at a time on it.

The socket keeps one sandbox started ahead of time (a launcher waiting for
`go`), so pressing Run costs only the fork of an already-started
interpreter. A run that ends by itself leaves its sandbox to serve the
next one (up to RUN_SANDBOX_RUNS; each run is a fresh fork and nothing of
the last run survives in it); one that is stopped, or the last, gets a
fresh sandbox. The protocol is written down in PROTOCOL.md.
"""
import asyncio
import json
import logging
import time

from tornado import websocket

from .. import metrics
from ..errors import Refused
from ..files import paths
from ..files.store import Area
from ..web import user_for_session
from . import runlock
from .admission import QueueFull
from .sandbox import Limits, run_uid
from .session import Run, Sandboxed

log = logging.getLogger(__name__)

MAX_ARGS = 32


class RunSocket(websocket.WebSocketHandler):
    @property
    def ctx(self):
        return self.application.settings["ctx"]

    async def prepare(self):
        """Refuse the upgrade (JSON 401) without a valid session."""
        self.user, problem, _ = await user_for_session(self)
        if self.user is None:
            self.set_status(401)
            self.set_header("Content-Type", "application/json; charset=utf-8")
            self.finish(json.dumps({"error": problem, "message": "Log in first."}))

    def open(self):
        self.set_nodelay(True)  # small frames must not wait for a delayed ACK
        self.ctx.websockets.add(self)
        metrics.SOCKETS.inc()
        self.run = None
        self.busy = False  # from `run` until its last message
        self.warm = None  # a task making the next Sandboxed
        self.closed = False
        self._warm_up()

    def on_close(self):
        self.closed = True
        self.ctx.websockets.discard(self)
        metrics.SOCKETS.dec()
        self._track(self._discard())

    async def _discard(self):
        if self.run:
            await self.run.stop("killed")
        if self.warm:
            warm, self.warm = self.warm, None
            sandboxed = await warm
            if sandboxed:
                await sandboxed.prepared.kill()

    # -- messages ---------------------------------------------------------

    async def on_message(self, message):
        try:
            msg = json.loads(message)
            if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
                raise ValueError
        except ValueError:
            return await self.send({"type": "error", "error": "bad_message",
                                    "message": "Messages are JSON objects with a \"type\"."})
        kind = msg["type"]
        try:
            if kind == "run":
                return self._start(msg)
            if self.run is None:
                if kind in ("stdin", "interrupt", "kill", "resize", "eof"):
                    return await self.send({"type": "error", "error": "not_running",
                                            "message": "No program is running."})
            elif kind == "stdin":
                return self.run.stdin(_text(msg, "data", 64 << 10))
            elif kind == "interrupt":
                return self.run.interrupt()
            elif kind == "eof":
                return self.run.end_of_input()
            elif kind == "kill":
                return await self.run.stop("killed")
            elif kind == "resize":
                return self.run.resize(_int(msg, "cols", 10, 500), _int(msg, "rows", 2, 200))
            await self.send({"type": "error", "error": "unknown_type",
                             "message": f"Unknown message type {kind!r}."})
        except Refused as e:
            await self.send({"type": "error", "error": e.code, "message": e.message})

    def _start(self, msg):
        if self.busy:
            raise Refused(409, "already_running", "A program is already running here. Stop it first.")
        parts = paths.parse(_text(msg, "path", paths.MAX_PATH_BYTES), allow_root=False)
        args = msg.get("args", [])
        if not isinstance(args, list) or len(args) > MAX_ARGS or not all(
                isinstance(a, str) and len(a) <= 1000 and "\x00" not in a for a in args):
            raise Refused(400, "bad_args", f"args must be a list of at most {MAX_ARGS} strings.")
        cols = _int(msg, "cols", 10, 500, default=80)
        rows = _int(msg, "rows", 2, 200, default=24)
        self.busy = True
        self._track(self._run(parts, args, cols, rows))

    def _track(self, coroutine):
        """Run it as a task the worker waits for when it shuts down, so no run
        lock or sandbox is left behind when the database pool closes."""
        task = asyncio.ensure_future(coroutine)
        self.ctx.run_tasks.add(task)
        task.add_done_callback(self.ctx.run_tasks.discard)

    # -- a run --------------------------------------------------------------

    async def _run(self, parts, args, cols, rows):
        """One run, start to end. Its last message (`exit` or `error`) is sent
        only after the run lock and the place in admission are given back, so
        a Run pressed right after it is never refused as already running."""
        try:
            last = await self._run_locked(parts, args, cols, rows)
        finally:
            self.busy = False
            if not self.closed:
                self._warm_up()
        await self.send(last)

    async def _run_locked(self, parts, args, cols, rows):
        ctx, username = self.ctx, self.user["username"]
        try:
            is_file = await ctx.files.run(ctx.store.is_file, Area.home(username), parts)
        except Refused as e:
            return {"type": "error", "error": e.code, "message": e.message}
        if not is_file:
            return {"type": "error", "error": "not_a_file", "message": "Only a file can be run."}
        run_id_claim = f"{id(self):x}-{time.monotonic_ns():x}"
        if not await runlock.claim(ctx.pool, username, run_id_claim):
            return {"type": "error", "error": "already_running",
                    "message": "You already have a program running (in another tab or window). "
                               "Stop it there first."}
        try:
            # The sandbox first, then a place in the host's line: a run waiting
            # for its sandbox to start must not hold a place another run could use.
            sandboxed = await self._sandbox()
            if sandboxed is None:
                return {"type": "error", "error": "sandbox_failed",
                        "message": "The sandbox could not start. Tell your teacher."}
            queued_at = time.monotonic()
            try:
                await ctx.admission.enter(self._queued)
            except QueueFull:
                self.warm = asyncio.ensure_future(_ready(sandboxed))  # for the next try
                return {"type": "error", "error": "server_busy",
                        "message": "The server is busy. Try again in a moment."}
            metrics.RUN_QUEUE_WAIT.observe(time.monotonic() - queued_at)
            try:
                return await self._run_admitted(sandboxed, parts, args, cols, rows, run_id_claim)
            finally:
                ctx.admission.leave()
        finally:
            await runlock.release(ctx.pool, username, run_id_claim)

    async def _queued(self, position):
        metrics.RUN_QUEUE.set(len(self.ctx.admission.waiting))
        await self.send({"type": "queued", "position": position})

    async def _sandbox(self):
        """The socket's waiting sandbox, or a fresh one if it has none (or it
        failed); None if none can start or the socket closed meanwhile."""
        warm, self.warm = self.warm, None
        sandboxed = await warm if warm else None
        if sandboxed is None:
            sandboxed = await self._prepare()
        if sandboxed is not None and self.closed:
            await sandboxed.prepared.kill()
            return None
        return sandboxed

    async def _run_admitted(self, sandboxed, parts, args, cols, rows, claim_id):
        ctx = self.ctx
        metrics.RUN_QUEUE.set(len(ctx.admission.waiting))
        if self.closed:  # while it waited in line
            await sandboxed.prepared.kill()
            return {"type": "error", "error": "sandbox_failed",
                    "message": "The sandbox could not start. Tell your teacher."}
        self.run = run = Run(ctx.cfg, sandboxed, self.send)
        run.claim_id = claim_id
        ctx.runs.add(run)
        metrics.RUNS_ACTIVE.inc()
        try:
            await self.send({"type": "started", "run_id": run.id})
            exit_msg = await run.execute("/".join(parts), args, cols, rows)
            metrics.RUN_DURATION.observe(exit_msg["duration"])
            metrics.RUN_EXITS.labels(exit_msg["reason"]).inc()
            return exit_msg
        finally:
            metrics.RUNS_ACTIVE.dec()
            ctx.runs.discard(run)
            self.run = None
            if run.reusable:
                if self.closed or ctx.draining or self.warm:
                    await sandboxed.prepared.kill()
                else:
                    self.warm = asyncio.ensure_future(self._reuse(sandboxed))

    def _warm_up(self):
        if self.warm is None and not self.ctx.draining:
            self.warm = asyncio.ensure_future(self._prepare())

    async def _reuse(self, sandboxed):
        """The sandbox of the run that just ended, once it is ready again."""
        if await sandboxed.ready():
            metrics.SANDBOX_REUSED.inc()
            return sandboxed
        await sandboxed.prepared.kill()
        return None

    async def _prepare(self):
        """Start a sandbox for this user and wait until its launcher is ready."""
        ctx = self.ctx
        started = time.monotonic()
        uid = run_uid(ctx.cfg, self.user["id"])
        try:
            await ctx.files.run(ctx.store.ensure_home, self.user["username"],
                                self.user["role"] == "student", uid)
            home = ctx.store.home_path(self.user["username"])
            runs = ctx.cfg.RUN_SANDBOX_RUNS if ctx.sandbox.reusable else 1
            settings = {"limits": Limits.from_config(ctx.cfg).__dict__, "nice": 10, "runs": runs}
            prepared = await ctx.sandbox.prepare(home, uid, settings)
        except Exception:
            log.exception("could not start a %s sandbox", ctx.sandbox.name)
            return None
        sandboxed = Sandboxed(prepared, runs)
        if not await sandboxed.ready():
            await prepared.kill()
            why = await prepared.stderr.read(2000)
            log.error("a %s sandbox did not become ready: %s", ctx.sandbox.name,
                      why.decode(errors="replace").strip() or "(it said nothing)")
            return None
        metrics.SANDBOX_START.observe(time.monotonic() - started)
        return sandboxed

    async def send(self, message):
        if self.closed:
            return
        try:
            await self.write_message(json.dumps(message))
        except websocket.WebSocketClosedError:
            self.closed = True
            if self.run:
                asyncio.ensure_future(self.run.stop("killed"))


async def _ready(sandboxed):
    return sandboxed


def _text(msg, key, max_len):
    value = msg.get(key)
    if not isinstance(value, str) or len(value) > max_len:
        raise Refused(400, "bad_field", f"'{key}' must be text of at most {max_len} characters.")
    return value


def _int(msg, key, lo, hi, default=None):
    value = msg.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise Refused(400, "bad_field", f"'{key}' must be a whole number from {lo} to {hi}.")
    return value
