"""The `remote` kind: sandboxes on runners (server/runner), other processes
or hosts that hold none of the web tier's secrets.

A sandbox here is one WebSocket to a runner (the wire: runner/service.py),
opened with a ticket for that runner (runs/sandbox/tickets.py); the runner proves
itself in its first answer. The launcher's frames cross it unchanged, so
run.py, the job and the warm sandboxes drive a remote sandbox as a local
one. Its end comes from the runner, which has it from the kernel; a runner
that stops answering (nothing, not even a pong, for SILENCE seconds) or
whose socket breaks ends the sandbox as `lost`, which the student is told
in those words.

The runners are those of RUNNERS and those that registered (placement/),
tried least busy first (by their heartbeats' load, then this worker's own
count of its sandboxes on each); one that refuses or cannot be reached is
tried last for DOWN_SECONDS, and a start with no runner to take it waits
(ROOM_WAIT) for one. With neither RUNNERS nor RUNNER_SECRET, each worker
starts a runner of its own as a child process (ChildRunner: the embedded
default, one command), with a key that never leaves the two processes,
and starts it again if it stops.
"""
import asyncio
import collections
import json
import logging
import os
import re
import secrets
import sys
import time
from typing import Any, AsyncIterator, Callable, Protocol, Sequence

from tornado import httpclient, websocket

from ... import config, metrics
from ...config import Config
from ..disk_guard import GroupWrites
from .tickets import home_key, issue, proof_holds, runner_key
from . import Held, HomeCopy
from .launch import STREAM_LIMIT, Exit, OutputGate, SandboxError

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 3.0
PREPARE_TIMEOUT = 60.0
# A runner that says nothing (no message, no pong) for SILENCE seconds is
# lost: a ping every PING_INTERVAL keeps a live one talking. Tornado's own
# ping timeout starts a polite close that waits 5 s more for the runner's
# answer, so a frozen or cut-off runner was noticed only after about 8 s.
PING_INTERVAL = 0.5
SILENCE = 2.0
KILL_WAIT = 10.0
DOWN_SECONDS = 5.0
ROOM_WAIT = 30.0  # seconds a start waits for a runner with room before it fails (and is tried once more)
ROOM_POLL = 0.5
AFFINITY_SLACK = 0.2  # busy share by which the runner that kept a home's copy may exceed the freest and still get it
KEPT_HOMES = 10000  # homes whose runner a worker remembers
KEEP_WAIT = 5.0  # seconds for a runner to say it kept a home's copy
MAX_MESSAGE = 4 << 20
MAX_PENDING = 4 << 20  # bytes sent to a runner and not yet written to its socket


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SERVING = re.compile(r"^runner \S+ serving (ws://\S+)")
CHILD_START_TIMEOUT = 60.0
CHILD_LINES = 40  # of what a child runner said before it failed to start, for the error


class Heard(Protocol):
    """A runner as its latest heartbeat said (placement/registry.py's Registered)."""

    @property
    def id(self) -> str: ...
    @property
    def address(self) -> str: ...
    @property
    def capacity(self) -> int: ...
    @property
    def busy(self) -> int: ...


class Registry(Protocol):
    """The runners that registered (placement/registry.py, which the worker gives)."""

    async def alive(self) -> Sequence[Heard]: ...


class ChildRunner:
    """A runner started by this worker (`python -m server.runner`) on
    127.0.0.1, with a key made here for it alone and the sandbox settings of
    this server. It dies with the worker, and a runner that stops is
    started again at the next sandbox asked of it. It shares this host and
    its user: it keeps students' programs in a process without the
    server's secrets in its memory, not on another machine."""

    ID = "local"

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.key = secrets.token_bytes(32)
        self.proc: asyncio.subprocess.Process | None = None
        self.url: str | None = None
        self.lock = asyncio.Lock()
        self.output: asyncio.Task[None] | None = None  # its log relay, held here: the loop keeps only a weak reference

    def environment(self) -> dict[str, str]:
        """The sandbox settings and the runner's own: nothing else of ours."""
        env = {name: os.environ[name] for name in ("PATH", "LANG", "TZ", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE",
                                                   "PYTHONPYCACHEPREFIX") if name in os.environ}
        for setting in config.SETTINGS:
            if setting.name.startswith(("SANDBOX_", "RUN_")):
                value = getattr(self.cfg, setting.name)
                env[setting.name] = ("1" if value else "0") if isinstance(value, bool) else str(value)
        return {**env, "SANDBOX": self.cfg.RUNNER_SANDBOX, "DATA_DIR": os.path.join(self.cfg.DATA_DIR, "runner"),
                "LOG_LEVEL": self.cfg.LOG_LEVEL, "RUNNER_ID": self.ID, "RUNNER_KEY": self.key.hex(),
                "RUNNER_HOST": "127.0.0.1", "RUNNER_PORT": "0", "RUNNER_PARENT": str(os.getpid())}

    async def address(self) -> str:
        """The running child's address, started (again) if need be."""
        async with self.lock:
            if self.url is None or self.proc is None or self.proc.returncode is not None:
                self.url = await self._start()
            return self.url

    async def _start(self) -> str:
        proc = self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "server.runner", cwd=ROOT, env=self.environment(),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True)
        assert proc.stdout is not None  # (spawned with a pipe)
        said: list[str] = []
        try:
            async with asyncio.timeout(CHILD_START_TIMEOUT):
                while line := (await proc.stdout.readline()).decode(errors="replace"):
                    said = (said + [line.rstrip()])[-CHILD_LINES:]
                    if m := SERVING.match(line):
                        log.info("%s", line.strip())
                        self.output = asyncio.ensure_future(self._log(proc, proc.stdout))
                        return m.group(1)
        except TimeoutError:
            pass
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        raise SandboxError("the runner did not start: " + " | ".join(said[-5:]))

    async def _log(self, proc: asyncio.subprocess.Process, out: asyncio.StreamReader) -> None:
        """What the runner says goes to our log; its end is told there too."""
        while True:
            try:
                line = await out.readline()
            except ValueError:  # a line longer than the stream's limit: read on, a piece at a time
                line = await out.read(STREAM_LIMIT)
            if not line:
                break
            log.info("runner: %s", line.decode(errors="replace").rstrip())
        code = await proc.wait()
        log.warning("the child runner (pid %d) stopped with %s; the next run starts another", proc.pid, code)

    def close(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()


class RemoteKind:
    name = "remote"
    reusable = True  # runners run local or docker sandboxes
    copies_home = True
    hides_host_paths = True

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.registry: Registry | None = None  # set by the worker: the runners that registered
        self.draining: Callable[[], bool] = lambda: False  # set by the worker: True once it shuts down
        self.child = None if cfg.RUNNERS or cfg.RUNNER_SECRET else ChildRunner(cfg)
        if self.child is not None:
            self.runners = {ChildRunner.ID: ""}  # its address once it runs
            self.keys = {ChildRunner.ID: self.child.key}
        elif not cfg.RUNNER_SECRET:
            raise SandboxError("SANDBOX=remote with RUNNERS needs RUNNER_SECRET, from which each runner's key is made")
        else:
            self.runners = dict(cfg.RUNNERS)  # and those that register, as they come (`candidates`)
            self.keys = {runner: runner_key(cfg.RUNNER_SECRET, runner) for runner in self.runners}
        self.busy: dict[str, int] = collections.defaultdict(int)  # this worker's sandboxes on each
        self.down_until: dict[str, float] = collections.defaultdict(float)
        self.load: dict[str, float] = {}  # a registered runner's busy share, as its heartbeat said
        self.seen_defences: dict[str, dict[str, Any]] = {}
        # home -> the runner its copy was last kept on by this worker (at most KEPT_HOMES, the latest)
        self.kept_at: collections.OrderedDict[str, str] = collections.OrderedDict()

    def defences(self) -> dict[str, Any]:
        """What the runners said holds student code there (once one has
        answered), with the runners' names."""
        seen = next(iter(self.seen_defences.values()), {})
        return {"seccomp": seen.get("seccomp"), "cgroup": seen.get("cgroup"), "own_uid": seen.get("own_uid"),
                "namespaces": seen.get("namespaces"), "user_namespaces": seen.get("user_namespaces"),
                "host_paths_hidden": seen.get("host_paths_hidden", True),
                "runners": sorted(self.runners) if self.child is not None else sorted(r for r, _ in self.cfg.RUNNERS)}

    async def cleanup_leftovers(self) -> int:
        return 0  # a runner kills the sandbox of every socket that closes

    def close(self) -> None:
        if self.child is not None:
            self.child.close()

    async def candidates(self) -> list[str]:
        """The runners to try: those in RUNNERS and those alive in the
        registry with room, least busy first, those refused lately last."""
        static = {runner for runner, _ in self.cfg.RUNNERS} if self.child is None else set(self.runners)
        names = set(static)
        if self.registry is not None and self.child is None:
            self.load = {}
            for registered in await self.registry.alive():
                if registered.id in static or registered.busy >= registered.capacity:
                    continue  # (RUNNERS names it for good; one that is full says so)
                if registered.id not in self.keys:
                    self.keys[registered.id] = runner_key(self.cfg.RUNNER_SECRET, registered.id)
                self.runners[registered.id] = registered.address
                self.load[registered.id] = registered.busy / max(1, registered.capacity)
                names.add(registered.id)
        now = time.monotonic()
        return sorted(names, key=lambda r: (self.down_until[r] > now, self.load.get(r, 0.0), self.busy[r], r))

    def where_kept(self, home: str, order: list[str]) -> list[str]:
        """`order`, with the runner that kept `home`'s copy first if it is
        nearly as free as the first (AFFINITY_SLACK): a new sandbox there
        is sent only what changed, but students still move to a runner
        that is added."""
        runner = self.kept_at.get(home)
        if runner not in order or not order or self.down_until[runner] > time.monotonic() \
                or self.load.get(runner, 0.0) > self.load.get(order[0], 0.0) + AFFINITY_SLACK:
            return order
        return [runner] + [r for r in order if r != runner]

    def keeps(self, home: str) -> bool:
        """Whether `home`'s copy is worth keeping on a runner for its next
        sandbox: a student's home is; a scratch folder, emptied after each
        check, is not."""
        return os.path.commonpath([self.cfg.STORAGE_ROOT, home]) == self.cfg.STORAGE_ROOT

    def was_kept(self, home: str, runner: str) -> None:
        self.kept_at[home] = runner
        self.kept_at.move_to_end(home)
        while len(self.kept_at) > KEPT_HOMES:
            self.kept_at.popitem(last=False)

    async def prepare(self, home: str, uid: int | None, settings: dict[str, Any]) -> "RemoteSandbox":
        """A sandbox on the least busy runner that starts one; its home
        there is a folder of the runner's own, not `home`, which the job
        keeps in step with it (runs/shipping.py). With no runner that has
        room, it waits (ROOM_WAIT at most) for one to register or free up,
        in its place in the line of starts (starts.py)."""
        deadline = time.monotonic() + ROOM_WAIT
        reasons: list[str] = []
        while True:
            if self.child is not None:  # (started again if it stopped)
                self.runners[ChildRunner.ID] = await self.child.address()
            for runner in self.where_kept(home, await self.candidates()):
                try:
                    return await RemoteSandbox.open(self, runner, uid, settings, home if self.keeps(home) else None)
                except SandboxError as e:
                    self.down_until[runner] = time.monotonic() + DOWN_SECONDS
                    log.warning("runner %s: %s", runner, e)
                    reasons = (reasons + [f"{runner}: {e}"])[-4:]
            if time.monotonic() >= deadline or self.draining():  # (a worker that shuts down waits for nobody)
                raise SandboxError("no runner could start a sandbox (" + ("; ".join(reasons) or "none has room")
                                   + ")")
            await asyncio.sleep(ROOM_POLL)


class RemoteSandbox:
    """One sandbox on a runner, as StartedSandbox has it. Its home is a
    copy on the runner (HomeCopy: put, collect)."""

    writes: GroupWrites | None = None  # the runner's cgroup is not reachable from here: it guards (`guard`)

    def __init__(self, kind: RemoteKind, runner: str, ws: websocket.WebSocketClientConnection) -> None:
        self.kind = kind
        self.runner = runner
        self.ws = ws
        self._gate = OutputGate()  # the runner's socket is read only while `stdout` has room: bounded
        self.stdout = self._gate.reader()
        self.output_ended = False
        self.counts: tuple[int, float | None] | None = None
        self.last_counts: tuple[int, float | None] = (0, None)
        self.exit: asyncio.Future[Exit] = asyncio.get_running_loop().create_future()
        self.pending = 0
        self.said = ""
        self.reader: asyncio.Task[None] | None = None
        self.watch: asyncio.Task[None] | None = None
        self.heard = time.monotonic()  # the runner's last message or pong
        self.copy: HomeCopy | None = self  # its home is a copy on the runner
        self.held: dict[str, Held | None] = {}
        self.home: str | None = None  # whose copy is kept on the runner after it (`open`)
        self.adopted = False  # asked for the copy the runner kept, or given files
        self.answers: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=2)  # to put and collect: read in turn
        self.guarded: RemoteGuard | None = None  # the write budget of its latest run
        setattr(ws, "on_pong", self._heard)  # Tornado calls the connection's on_pong for each pong: this one's is ours
        kind.busy[runner] += 1

    def _heard(self, _: bytes = b"") -> None:
        self.heard = time.monotonic()

    async def _watch(self) -> None:
        """Ping the runner; one silent for SILENCE seconds is lost (see above)."""
        while not self.exit.done():
            try:
                self.ws.ping(b"")
            except websocket.WebSocketClosedError:
                return
            await asyncio.sleep(PING_INTERVAL)
            if time.monotonic() - self.heard > SILENCE and not self.exit.done():
                self.said = f"the runner said nothing for {SILENCE:.0f} s"
                log.warning("runner %s: %s; its sandbox is lost", self.runner, self.said)
                self._lost()
                return

    def _lost(self) -> None:
        """The sandbox is over as far as we can tell: its output ends, its end is `lost`."""
        if not self.exit.done():
            self.exit.set_result(Exit(lost=True))
        if not self.output_ended:
            self.output_ended = True
            self.stdout.feed_eof()
        self.ws.close()

    @classmethod
    async def open(cls, kind: RemoteKind, runner: str, uid: int | None, settings: dict[str, Any],
                   home: str | None) -> "RemoteSandbox":
        """A sandbox on `runner`; `home`: the home whose copy the runner keeps
        for the next sandbox after this one, and gives this one if it has it."""
        ticket, sandbox_id = issue(kind.keys[runner], runner)
        key = None if home is None else home_key(kind.keys[runner], home)
        request = httpclient.HTTPRequest(kind.runners[runner] + "/sandbox", connect_timeout=CONNECT_TIMEOUT,
                                         request_timeout=CONNECT_TIMEOUT,
                                         headers={"Authorization": "Ticket " + ticket})
        try:
            ws = await websocket.websocket_connect(request, max_message_size=MAX_MESSAGE)
        except (OSError, httpclient.HTTPClientError, websocket.WebSocketError, asyncio.TimeoutError) as e:
            raise SandboxError(f"could not reach it ({e})") from None
        if ws.protocol is not None:
            # Puts, collects and input are small messages answered at once:
            # Nagle's algorithm held each ~40 ms for an acknowledgement.
            ws.protocol.set_nodelay(True)
        try:
            await ws.write_message(json.dumps({"uid": uid, "settings": settings, "keep": key}))
            answer = await asyncio.wait_for(ws.read_message(), PREPARE_TIMEOUT)
        except (websocket.WebSocketClosedError, asyncio.TimeoutError):
            answer = None
        try:
            said = json.loads(answer) if isinstance(answer, str) else None
        except ValueError:
            said = None
        if not isinstance(said, dict) or said.get("type") != "prepared":
            ws.close()
            why = said.get("message") if isinstance(said, dict) else None
            raise SandboxError(f"no sandbox ({why or ws.close_reason or 'it closed the socket'})")
        if not proof_holds(kind.keys[runner], sandbox_id, said.get("proof")):
            ws.close()
            log.error("runner %s at %s answered without its key's proof: refused", runner, kind.runners[runner])
            raise SandboxError("it did not prove it is that runner")
        if isinstance(said.get("defences"), dict):
            kind.seen_defences[runner] = said["defences"]
        sandbox = cls(kind, runner, ws)
        sandbox.home = home
        sandbox.reader = asyncio.ensure_future(sandbox._read())
        sandbox.watch = asyncio.ensure_future(sandbox._watch())
        return sandbox

    async def _read(self) -> None:
        """The runner's messages: output into `stdout` (a slow reader here
        slows the runner's socket, never a buffer), counts, the exit."""
        try:
            while True:
                await self._gate.open.wait()
                message = await self.ws.read_message()
                if message is None:
                    break
                self._heard()
                if isinstance(message, bytes):
                    if not self.output_ended:  # (once lost, what comes late is dropped)
                        self.stdout.feed_data(message)
                    continue
                said = json.loads(message)
                if said.get("type") in ("put", "file", "collected", "adopted", "kept"):
                    await self.answers.put(said)
                elif said.get("type") == "disk_limit" and self.guarded is not None:
                    self.guarded.said(int(said.get("wrote") or 0), int(said.get("walks") or 0))
                elif said.get("type") == "counts":
                    self.last_counts = (int(said.get("oom_kills") or 0), said.get("cpu_seconds"))
                elif said.get("type") == "exit" and not self.exit.done():
                    self.exit.set_result(Exit(code=said.get("code"), signal=said.get("signal"),
                                              oom_killed=bool(said.get("oom_killed"))))
        except (ValueError, AttributeError, TypeError, ConnectionError) as e:
            self.said = f"a message from the runner that makes no sense ({e})"
            log.error("runner %s: %s", self.runner, self.said)
        finally:
            if not self.exit.done():
                self.said = self.said or "the runner's socket closed before the sandbox's end"
            self._lost()
            self.kind.busy[self.runner] -= 1

    def send(self, frame: bytes) -> None:
        if self.exit.done() or self.pending + len(frame) > MAX_PENDING:
            if not self.exit.done():
                self.ws.close(1008, "too much unsent input")
            return
        self.pending += len(frame)
        try:
            done = self.ws.write_message(frame, binary=True)
        except websocket.WebSocketClosedError:
            return
        size = len(frame)

        def written(_: Any) -> None:
            self.pending -= size
        done.add_done_callback(written)

    def _op(self, op: str, **more: Any) -> None:
        try:
            self.ws.write_message(json.dumps({"op": op, **more}))
        except websocket.WebSocketClosedError:
            pass

    # -- its home, a copy on the runner (HomeCopy) ---------------------------------

    async def adopt(self) -> None:
        if self.adopted:
            return
        self.adopted = True
        if self.home is None:
            return
        self._op("adopt")
        answer = await self._answer()
        held = answer.get("held")
        if answer.get("type") != "adopted" or not isinstance(held, dict):
            raise SandboxError(f"the runner answered an adopt with {answer.get('type')}")
        for path, was in held.items():
            if isinstance(was, list) and len(was) == 3 and isinstance(was[0], int) \
                    and isinstance(was[1], (int, float)) and isinstance(was[2], str):
                self.held[path] = (was[0], was[1], was[2])
        if self.held:
            metrics.RUNNER_COPIES_ADOPTED.inc()

    async def put(self, files: list[dict[str, Any]], deleted: list[str], clear: bool = False) -> None:
        self.adopted = True  # (a copy given files takes no other)
        metrics.RUNNER_FILES_SENT.inc(sum("etag" in piece for piece in files))
        self._op("put", files=files, deleted=deleted, clear=clear)
        answer = await self._answer()
        if answer.get("type") != "put" or "error" in answer:
            raise SandboxError(f"the runner refused the files ({answer.get('error', answer.get('type'))})")

    async def collect(self, room: int, max_file: int) -> AsyncIterator[dict[str, Any]]:
        self._op("collect", room=room, max_file=max_file)
        while True:
            answer = await self._answer()
            if answer.get("type") not in ("file", "collected"):
                raise SandboxError(f"the runner answered a collect with {answer.get('type')}")
            yield answer
            if answer["type"] == "collected":
                return

    def guard(self, room: int, file_bytes: int, limit: int | None) -> "RemoteGuard":
        self.guarded = RemoteGuard()
        self._op("guard", room=room, file=file_bytes, limit=limit)
        return self.guarded

    async def _answer(self) -> dict[str, Any]:
        """The runner's next answer to a put or collect; SandboxError once it is lost."""
        answer = asyncio.ensure_future(self.answers.get())
        assert self.reader is not None  # (open starts it)
        await asyncio.wait([answer, self.reader], return_when=asyncio.FIRST_COMPLETED)
        if not answer.done():
            answer.cancel()
            raise SandboxError("the runner is lost")
        return answer.result()

    async def on_ready(self) -> None:
        self._op("ready")

    async def wait(self) -> Exit:
        return await asyncio.shield(self.exit)

    async def kill(self) -> None:
        """(Its home stays on the runner, for collect, until `release`.)"""
        if not self.exit.done():
            self._op("kill")
            try:
                await asyncio.wait_for(asyncio.shield(self.exit), KILL_WAIT)
            except asyncio.TimeoutError:
                log.error("runner %s did not end a killed sandbox within %.0f s", self.runner, KILL_WAIT)
                self.ws.close()  # the runner kills whatever is left of a sandbox whose socket closes

    async def release(self) -> None:
        """The socket closes (politely: a runner that is gone is not waited
        for, as Tornado would for 5 s); the runner keeps the home's copy
        first, if it has one worth keeping."""
        if self.home is not None and self.held and self.exit.done() and not self.exit.result().lost:
            self._op("keep", held={path: list(was) for path, was in self.held.items() if was is not None})
            try:
                answer = await asyncio.wait_for(self._answer(), KEEP_WAIT)
                if answer.get("type") == "kept":
                    self.kind.was_kept(self.home, self.runner)
            except (SandboxError, asyncio.TimeoutError):
                pass  # (then the next sandbox is sent the whole home)
        self.ws.close()
        for task in (self.watch, self.reader):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    def diagnostics(self) -> str:
        return f"runner {self.runner}" + (f": {self.said}" if self.said else "")

    def oom_kills(self) -> int:
        return self.last_counts[0]

    def cpu_seconds(self) -> float | None:
        return self.last_counts[1]


class RemoteGuard:
    """A run's write budget, watched on its runner by a DiskGuard over the
    sandbox's cgroup and its copy of the home, which freezes and kills the
    run there and says so ("disk_limit") before anything that follows."""

    def __init__(self) -> None:
        self.over = asyncio.Event()
        self.written = 0
        self.walks = 0

    def said(self, wrote: int, walks: int) -> None:
        self.written, self.walks = wrote, walks
        self.over.set()

    def wrote(self) -> int:
        return self.written

    async def over_quota(self) -> bool:
        await self.over.wait()
        return True

    def kill(self) -> None:
        pass  # the runner killed it as it said so
