"""The runner: a process that starts sandboxes for the web tier and relays
their launchers' frames, and does nothing else.

One WebSocket (/sandbox) per sandbox. The web tier opens it with a ticket
(runs/sandbox/tickets.py) in the `Authorization: Ticket ...` header; a ticket that is not
for this runner, expired, forged or seen before is refused with close code
4401 and logged. Then, on the socket:

    web -> runner   text   {"uid", "settings"}  start the sandbox (once, first)
                    binary  bytes for the launcher's stdin (its frames)
                    text   {"op": "ready" | "kill"}
                    text   {"op": "guard", "room", "file", "limit"}: the next run's write budget (sent
                            before its `go`); a run past it is killed after {"type": "disk_limit",
                            "wrote", "walks"} is sent
                    text   {"op": "put", "files": [{"path", "data" (base64), "at", "etag"}], "deleted": [path],
                            "clear"}: write into (delete from; empty first) the sandbox's home;
                            answered {"type": "put"[, "error"]}
                    text   {"op": "collect", "room", "max_file"}: what the last run changed in the home,
                            answered with {"type": "file", "path", "data", "at"[, "etag": on its last piece]}
                            for each file written, then {"type": "collected", "skipped": [[path, why]],
                            "deleted": [path], "partial"}
    runner -> web   text   {"type": "prepared", "proof", "defences"} | {"type": "error", "message"}
                    binary  the launcher's stdout, as it comes (its frames)
                    text   {"type": "counts", "oom_kills", "cpu_seconds"}, sent before
                            any output that follows a change of them
                    text   {"type": "exit", "code", "signal", "oom_killed"}: the kernel's exit,
                            after the last output

A sandbox's home is a private folder of the runner's (homes.py), which
holds what the web tier put there and nothing else: a runner never
reaches the storage. A sandbox lives as long as its socket: a socket that
closes, for any reason, kills it and removes its home. The runner holds
no secret but its own key: no cookie secret, no database address, no
cloud credentials (the web tier starts a child runner with an environment
of its own).
"""
import asyncio
import base64
import binascii
import json
import logging
from typing import Any

from tornado import httpclient, web, websocket

from ..config import Config
from ..runs.sandbox import Exit, SandboxError, SandboxKind, StartedSandbox
from ..errors import Refused as Declined
from ..runs.cgroups import worker_tag
from ..runs.disk_guard import DiskGuard
from ..runs.sandbox.tickets import Refused, Tickets, heartbeat, proof
from ..runs.scratch import make_folder, remove_folder, remove_orphans
from ..runs.shipping import as_pieces
from .homes import HomeCopy

log = logging.getLogger(__name__)

MAX_MESSAGE = 4 << 20  # a `go` frame carries the program's code and the attempt's checks
CHUNK = 64 << 10  # launcher output relayed at a time
REFUSED = 4401
FULL = 4503
HEARTBEAT_SECONDS = 1.0
PREPARE_TIMEOUT = 60.0  # a sandbox that has not started by then will not


class Runner:
    """What the runner's sockets share: its kind of sandbox and its tickets."""

    def __init__(self, cfg: Config, kind: SandboxKind, runner_id: str, key: bytes, capacity: int = 1000,
                 fleet: str | None = None) -> None:
        self.cfg = cfg
        self.kind = kind
        self.id = runner_id
        self.capacity = capacity  # sandboxes at once: one more is refused (FULL), and the web tier asks another
        self.fleet = fleet  # of a fleet: `key` is the fleet's until the web tier gives it its own (enrolled)
        self.fleet_key = key if fleet else None
        self.key = b"" if fleet else key
        self.tickets: Tickets | None = None if fleet else Tickets(key, runner_id)
        self.sandboxes: set["SandboxSocket"] = set()  # live, for the count and the drain

    def app(self) -> web.Application:
        return web.Application([(r"/sandbox", SandboxSocket, {"runner": self}),
                                (r"/healthz", Health, {"runner": self})],
                               websocket_max_message_size=MAX_MESSAGE, websocket_ping_interval=2,
                               websocket_ping_timeout=2)

    def homes(self) -> str:
        """Where its sandboxes' homes are: its own, never the storage
        (__main__ points STORAGE_ROOT there)."""
        return self.cfg.STORAGE_ROOT

    async def heartbeats(self, server: str, address: str) -> None:
        """Tell the web tier at `server`, every HEARTBEAT_SECONDS, that this
        runner listens at `address` and how busy it is (placement/)."""
        client = httpclient.AsyncHTTPClient()
        failing = False
        while True:
            enrolling = self.tickets is None
            beat = heartbeat(self.fleet_key or b"", self.id, address, self.capacity, 0, fleet=self.fleet) \
                if enrolling else heartbeat(self.key, self.id, address, self.capacity, len(self.sandboxes))
            try:
                answer = await client.fetch(server + "/api/runners/heartbeat", method="POST",
                                            body=json.dumps({"heartbeat": beat}),
                                            headers={"Content-Type": "application/json"},
                                            request_timeout=HEARTBEAT_SECONDS * 2)
                if enrolling:
                    self.enrolled(bytes.fromhex(json.loads(answer.body)["key"]))
                if failing:
                    log.info("the web tier at %s takes this runner's heartbeats again", server)
                failing = False
            except (OSError, httpclient.HTTPError, ValueError, KeyError, TypeError) as e:
                if not failing:  # once per episode
                    log.warning("the web tier at %s did not take this runner's heartbeat: %s", server, e)
                failing = True
            await asyncio.sleep(HEARTBEAT_SECONDS)

    def enrolled(self, key: bytes) -> None:
        """The web tier gave this fleet member its own key: it takes tickets from now on."""
        if len(key) != 32:
            raise ValueError("a runner's key has 32 bytes")
        self.key, self.tickets = key, Tickets(key, self.id)
        log.info("runner %s enrolled in fleet %s", self.id, self.fleet)

    def remove_leftovers(self) -> int:
        """The homes of runners that are gone (kill -9, a crash) go:
        how many. Blocking: call it before serving."""
        return remove_orphans(self.homes())


class Health(web.RequestHandler):
    def initialize(self, runner: Runner) -> None:
        self.runner = runner

    def get(self) -> None:
        self.write({"runner": self.runner.id, "sandboxes": len(self.runner.sandboxes)})


class SandboxSocket(websocket.WebSocketHandler):
    runner: Runner
    sandbox: StartedSandbox | None

    def initialize(self, runner: Runner) -> None:
        self.runner = runner
        self.sandbox = None
        self.sandbox_id = ""
        self.preparing: asyncio.Task[None] | None = None
        self.relay: asyncio.Task[None] | None = None
        self.ops: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=8)  # in order
        self.worker: asyncio.Task[None] | None = None
        self.counts: tuple[int, float | None] | None = None
        self.home: HomeCopy | None = None
        self.guarding: asyncio.Task[None] | None = None  # the write budget of its latest run

    def check_origin(self, origin: str) -> bool:
        return False  # no browser has any business here; the web tier sends no Origin

    def open(self, *args: Any, **kwargs: Any) -> None:
        header = self.request.headers.get("Authorization", "")
        try:
            if not header.startswith("Ticket "):
                raise Refused("no ticket")
            if self.runner.tickets is None:
                raise Refused("not enrolled yet: no ticket can be for this runner")
            self.sandbox_id = self.runner.tickets.accept(header[len("Ticket "):])
        except Refused as e:
            log.warning("refused a sandbox socket from %s: %s", self.request.remote_ip, e)
            self.close(REFUSED, "refused")
            return
        if len(self.runner.sandboxes) >= self.runner.capacity:
            log.info("refused a sandbox: %d run here already (RUNNER_CAPACITY)", len(self.runner.sandboxes))
            self.close(FULL, "full")
            return
        # A program's output and its end are small messages the web tier waits
        # for: without this, Nagle's algorithm held the end ~40 ms for an ACK.
        self.set_nodelay(True)
        self.runner.sandboxes.add(self)

    def on_message(self, message: str | bytes) -> None:
        if self.sandbox_id == "":
            return
        if isinstance(message, bytes):
            if self.sandbox is not None:
                self.sandbox.send(message)
            return
        try:
            asked = json.loads(message)
        except ValueError:
            asked = None
        if not isinstance(asked, dict):
            self.close(1003, "not a message")
        elif self.preparing is None:
            self.preparing = asyncio.ensure_future(self.start_sandbox(asked))
        elif asked.get("op") == "guard":
            self._guard_next(asked)
        elif asked.get("op") in ("ready", "kill", "put", "collect"):
            try:
                self.ops.put_nowait(asked)
            except asyncio.QueueFull:
                self.close(1008, "too many requests at once")
        else:
            self.close(1003, "not a message")

    async def start_sandbox(self, asked: dict[str, Any]) -> None:
        loop = asyncio.get_running_loop()
        try:
            uid, settings = asked.get("uid"), asked.get("settings")
            if not (uid is None or (isinstance(uid, int) and not isinstance(uid, bool) and uid > 0)) \
                    or not isinstance(settings, dict):
                raise SandboxError("a sandbox is asked for with a uid and settings")
            folder = await loop.run_in_executor(None, make_folder, self.runner.homes(), worker_tag() + ".", uid)
            self.home = HomeCopy(folder, uid)
            self.sandbox = await asyncio.wait_for(self.runner.kind.prepare(folder, uid, settings), PREPARE_TIMEOUT)
        except (SandboxError, OSError, asyncio.TimeoutError) as e:
            log.warning("sandbox %s did not start: %s", self.sandbox_id, e)
            await self._send({"type": "error", "message": str(e) or "the sandbox did not start"})
            self.close(1011, "no sandbox")
            return
        if self.ws_connection is None:  # the web tier left while it started
            await self._end_sandbox()
            return
        await self._send({"type": "prepared", "proof": proof(self.runner.key, self.sandbox_id),
                          "defences": self.runner.kind.defences()})
        self.relay = asyncio.ensure_future(self._relay(self.sandbox))
        self.worker = asyncio.ensure_future(self._ops(self.sandbox))

    async def _send(self, message: dict[str, Any] | bytes) -> None:
        try:
            if isinstance(message, bytes):
                await self.write_message(message, binary=True)
            else:
                await self.write_message(json.dumps(message))
        except websocket.WebSocketClosedError:
            pass

    async def _relay(self, sandbox: StartedSandbox) -> None:
        """The launcher's output to the web tier, as it comes (each write
        awaited: a web tier that reads slowly slows the launcher, never a
        buffer here), its counts before output that follows their change,
        then the kernel's exit."""
        while True:
            chunk = await sandbox.stdout.read(CHUNK)
            await self._send_counts(sandbox)
            if not chunk:
                break
            await self._send(chunk)
        exit_: Exit = await sandbox.wait()
        await self._send_counts(sandbox)
        await self._send({"type": "exit", "code": exit_.code, "signal": exit_.signal, "oom_killed": exit_.oom_killed})

    async def _send_counts(self, sandbox: StartedSandbox) -> None:
        counts = (sandbox.oom_kills(), sandbox.cpu_seconds())
        if counts != self.counts:
            self.counts = counts
            await self._send({"type": "counts", "oom_kills": counts[0], "cpu_seconds": counts[1]})

    async def _ops(self, sandbox: StartedSandbox) -> None:
        while True:
            asked = await self.ops.get()
            if asked["op"] == "ready":
                await sandbox.on_ready()
                await self._send_counts(sandbox)
            elif asked["op"] == "kill":
                await sandbox.kill()
            elif asked["op"] == "put":
                await self._put(asked)
            else:
                await self._collect(asked)

    def _guard_next(self, asked: dict[str, Any]) -> None:
        """The next run's write budget (before its `go`, which follows on the
        socket): a DiskGuard over the sandbox's cgroup, measuring the home's
        copy against `limit`; a run past it is killed, after the web tier is
        told. Without a cgroup (no write count) there is none, as in the web tier."""
        room, file_bytes, limit = asked.get("room"), asked.get("file"), asked.get("limit")
        if not isinstance(room, int) or not isinstance(file_bytes, int) or room < 0 or file_bytes < 0 \
                or not (limit is None or isinstance(limit, int)):
            self.close(1003, "not a message")
            return
        if self.guarding is not None:
            self.guarding.cancel()  # (thaws what it froze)
        sandbox, home = self.sandbox, self.home
        if sandbox is None or sandbox.writes is None or home is None:
            return
        loop = asyncio.get_running_loop()

        async def measure() -> int | None:
            if limit is None:
                return None
            size = await loop.run_in_executor(None, home.size)
            return None if size is None or size > limit else limit - size

        guard = DiskGuard(sandbox.writes, measure, room, file_bytes)

        async def watch() -> None:
            if await guard.over_quota():
                log.info("sandbox %s: its run wrote %d bytes, past its budget (%d walks): killed",
                         self.sandbox_id, guard.wrote(), guard.walks)
                await self._send({"type": "disk_limit", "wrote": guard.wrote(), "walks": guard.walks})
                guard.kill()
        self.guarding = asyncio.ensure_future(watch())

    async def _put(self, asked: dict[str, Any]) -> None:
        """Files into the home (between runs: the launcher waits for `go`)."""
        assert self.home is not None  # (made before the sandbox)
        loop, home = asyncio.get_running_loop(), self.home
        try:
            files, deleted = asked.get("files", []), asked.get("deleted", [])
            if not isinstance(files, list) or not isinstance(deleted, list):
                raise ValueError("files and deleted are lists")
            if asked.get("clear") is True:
                await loop.run_in_executor(None, home.clear)
            for path in deleted:
                await loop.run_in_executor(None, home.delete, path)
            for piece in files:
                at, etag = piece["at"], piece.get("etag")
                if not isinstance(at, int) or isinstance(at, bool) or at < 0 \
                        or not (etag is None or isinstance(etag, str)):
                    raise ValueError("a piece is at an offset, with the file's etag or none")
                data = base64.b64decode(piece["data"], validate=True)
                await loop.run_in_executor(None, home.put, piece["path"], data, at, etag)
        except (ValueError, TypeError, KeyError, binascii.Error, OSError, Declined) as e:
            log.warning("sandbox %s: a put refused: %s", self.sandbox_id, e)
            await self._send({"type": "put", "error": str(e)})
            return
        await self._send({"type": "put"})

    async def _collect(self, asked: dict[str, Any]) -> None:
        """What the run changed in the home, read back a piece at a time."""
        assert self.home is not None  # (made before the sandbox)
        loop, home = asyncio.get_running_loop(), self.home
        room, max_file = asked.get("room"), asked.get("max_file")
        if not isinstance(room, int) or not isinstance(max_file, int):
            self.close(1003, "not a message")
            return
        changes = await loop.run_in_executor(None, home.changes, room, max_file)
        for path, etag in changes.written:
            data = await loop.run_in_executor(None, home.read, path, etag, max_file)
            if data is None:  # (nothing of the program runs now: a file read back does not change)
                changes.skipped.append((path, "changed"))
                continue
            for piece in as_pieces(path, data, etag):  # as the web tier's puts are cut
                await self._send({"type": "file", **piece})
        await self._send({"type": "collected", "skipped": changes.skipped, "deleted": changes.deleted,
                          "partial": changes.partial})

    async def _end_sandbox(self) -> None:
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is not None:
            await sandbox.kill()
            await sandbox.release()
        home, self.home = self.home, None
        if home is not None:
            await asyncio.get_running_loop().run_in_executor(None, remove_folder, home.folder)

    def on_close(self) -> None:
        self.runner.sandboxes.discard(self)
        for task in (self.worker, self.guarding):
            if task is not None:
                task.cancel()
        asyncio.ensure_future(self._closed())

    async def _closed(self) -> None:
        """The socket is gone (the web tier ended the sandbox, or lost us):
        nothing of the sandbox outlives it."""
        if self.preparing is not None:
            await asyncio.gather(self.preparing, return_exceptions=True)
        await self._end_sandbox()
        if self.relay is not None:
            self.relay.cancel()
