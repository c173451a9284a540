"""The runner: a process that starts sandboxes for the web tier and relays
their launchers' frames, and does nothing else.

One WebSocket (/sandbox) per sandbox. The web tier opens it with a ticket
(runs/sandbox/tickets.py) in the `Authorization: Ticket ...` header; a ticket that is not
for this runner, expired, forged or seen before is refused with close code
4401 and logged. Then, on the socket:

    web -> runner   text   {"uid", "settings"[, "keep"]}  start the sandbox (once, first)
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
                    text   {"op": "keep", "held"}: (a sandbox asked for with a "keep" key, once its
                            program ended) the sandbox ends, but its home is kept for the next sandbox asked for
                            with that key, with `held`, what the web tier knew of it; answered {"type": "kept"}
                    text   {"op": "adopt"}: (before the first put) the home kept under the sandbox's key, if
                            any, becomes its home; answered {"type": "adopted", "held"}: what the web tier
                            knew of it, less what changed since
    runner -> web   text   {"type": "prepared", "proof", "defences"} | {"type": "error", "message"}
                    binary  the launcher's stdout, as it comes (its frames)
                    text   {"type": "counts", "oom_kills", "cpu_seconds"}: the kernel's, as they change:
                            every COUNTS_SECONDS while a run goes, and before the output that holds its end
                    text   {"type": "exit", "code", "signal", "oom_killed"}: the kernel's exit,
                            after the last output

A sandbox's home is a private folder of the runner's (homes.py), which
holds what the web tier put there and nothing else: a runner never
reaches the storage. A sandbox lives as long as its socket: a socket that
closes, for any reason, kills it and removes its home, unless the web
tier asked for it to be kept ("keep"): then the next sandbox of the same
home here starts with its files, and only what changed is sent again.
The key is the web tier's (a MAC of the home's path): the runner learns
no name from it, and a sandbox of another home or uid never gets the copy. The runner holds
no secret but its own key: no cookie secret, no database address, no
cloud credentials (the web tier starts a child runner with an environment
of its own).
"""
import asyncio
import base64
import binascii
import collections
import contextlib
import json
import logging
import re
import time
from typing import Any

from tornado import httpclient, web, websocket

from ..config import Config
from ..runs.sandbox import Exit, SandboxError, SandboxKind, StartedSandbox
from ..errors import Refused as Declined
from ..runs.cgroups import worker_tag
from ..runs.disk_guard import DiskGuard
from ..runs.protocol import FrameKinds
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
KEEP_WAIT = 3.0  # seconds a sandbox waits for the copy its predecessor is ending with
KEPT_SECONDS = 900.0  # a home kept for its next sandbox that none took by then goes
KEY = re.compile(r"[0-9a-f]{32}")
COUNTS_SECONDS = 0.25  # as often as the web tier's watchdog looks at a run's CPU (runs/run.py)


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
        # key -> (a home kept for the next sandbox asked for with that key, what the web tier knew of it, when);
        # as many as the sandboxes it may hold, the oldest going first
        self.ending: dict[str, asyncio.Event] = {}  # key -> set once the sandbox with that key that ends has ended
        self.kept: collections.OrderedDict[str, tuple[HomeCopy, dict[str, Any], float]] = collections.OrderedDict()

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

    async def keep(self, key: str, home: HomeCopy, held: dict[str, Any]) -> None:
        """Keep `home` for the next sandbox asked for with `key`."""
        gone = [self.kept.pop(key)[0]] if key in self.kept else []
        self.kept[key] = (home, held, time.monotonic())
        while len(self.kept) > self.capacity:
            gone.append(self.kept.popitem(last=False)[1][0])
        await _removed(gone)

    async def forget(self, older_than: float = KEPT_SECONDS) -> None:
        """The homes kept that no sandbox took within `older_than` seconds go."""
        gone = []
        while self.kept and time.monotonic() - next(iter(self.kept.values()))[2] >= older_than:
            gone.append(self.kept.popitem(last=False)[1][0])
        await _removed(gone)

    async def forgets(self) -> None:
        while True:
            await asyncio.sleep(KEPT_SECONDS / 10)
            await self.forget()

    def adopt(self, key: str, uid: int | None) -> tuple[HomeCopy, dict[str, Any]] | None:
        """The home kept under `key` and what the web tier knew of it, if
        its programs ran as `uid` (it is no longer kept)."""
        if key not in self.kept or self.kept[key][0].uid != uid:
            return None
        home, held, _ = self.kept.pop(key)
        return home, held

    def remove_leftovers(self) -> int:
        """The homes of runners that are gone (kill -9, a crash) go:
        how many. Blocking: call it before serving."""
        return remove_orphans(self.homes())


async def _removed(homes: list[HomeCopy]) -> None:
    for home in homes:
        await asyncio.get_running_loop().run_in_executor(None, remove_folder, home.folder)


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
        self.counting: asyncio.Task[None] | None = None  # sends the counts of the run that goes
        self.home: HomeCopy | None = None
        self.keep_key: str | None = None  # the key its home is kept under, if the web tier asked for that
        self.adopted = False
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
                if message[:1] == b"g" and self.counting is None:  # a run's `go`
                    self.counting = asyncio.ensure_future(self._count(self.sandbox))
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
        elif asked.get("op") in ("ready", "kill", "put", "collect", "keep", "adopt"):
            if asked["op"] == "kill":
                self._ending()
            try:
                self.ops.put_nowait(asked)
            except asyncio.QueueFull:
                self.close(1008, "too many requests at once")
        else:
            self.close(1003, "not a message")

    async def start_sandbox(self, asked: dict[str, Any]) -> None:
        loop = asyncio.get_running_loop()
        try:
            uid, settings, keep = asked.get("uid"), asked.get("settings"), asked.get("keep")
            if not (uid is None or (isinstance(uid, int) and not isinstance(uid, bool) and uid > 0)) \
                    or not isinstance(settings, dict) or not (keep is None or isinstance(keep, str) and KEY.fullmatch(keep)):
                raise SandboxError("a sandbox is asked for with a uid, settings, and a key to keep its home or none")
            self.keep_key = keep
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
        buffer here), the run's final counts before the output that holds
        its end (the web tier reads them at once), then the kernel's exit.
        (Not before every chunk: two reads of the cgroup and a message
        cost a run's first output a third of a millisecond.)"""
        frames = FrameKinds()
        while chunk := await sandbox.stdout.read(CHUNK):
            if b"X" in frames.begun(chunk):
                self._run_over()
                await self._send_counts(sandbox)
            await self._send(chunk)
        self._run_over()
        exit_: Exit = await sandbox.wait()
        await self._send_counts(sandbox)
        await self._send({"type": "exit", "code": exit_.code, "signal": exit_.signal, "oom_killed": exit_.oom_killed})

    async def _count(self, sandbox: StartedSandbox) -> None:
        while True:
            await asyncio.sleep(COUNTS_SECONDS)
            await self._send_counts(sandbox)

    def _run_over(self) -> None:
        """Its run has ended: nothing watches the sandbox until the next
        (its counts, its writes: as the web tier's own guard, which ends with
        its run; one left on read an idle sandbox's cgroup every 25 ms)."""
        for task in (self.counting, self.guarding):
            if task is not None:
                task.cancel()
        self.counting = self.guarding = None

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
            elif asked["op"] == "collect":
                await self._collect(asked)
            elif asked["op"] == "adopt":
                await self._adopt()
            else:
                await self._keep(asked)
                return

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

    async def _adopt(self) -> None:
        """The home kept under this sandbox's key becomes its own (see the
        module's docstring): what the web tier knew of it, less what changed."""
        if self.keep_key in self.runner.ending:  # (the sandbox before it ends now: its copy is kept in a moment)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.runner.ending[self.keep_key].wait(), KEEP_WAIT)
        kept = self.runner.adopt(self.keep_key, self.home.uid) \
            if self.keep_key and self.home is not None and not self.home.known and not self.adopted else None
        self.adopted = True  # (once, before any file)
        held: dict[str, Any] = {}
        if kept is not None and self.home is not None:
            old, known = kept
            try:
                await asyncio.get_running_loop().run_in_executor(None, self.home.take, old)
                held = {path: was for path, was in known.items() if isinstance(was, list) and len(was) == 3
                        and path in self.home.known and self.home.known[path][0] == was[2]}
            except (OSError, Declined) as e:
                log.warning("sandbox %s: the home kept for it could not be taken: %s", self.sandbox_id, e)
                await asyncio.get_running_loop().run_in_executor(None, self.home.clear)
            await _removed([old])
        await self._send({"type": "adopted", "held": held})

    async def _keep(self, asked: dict[str, Any]) -> None:
        """The sandbox ends; its home is kept under its key, with `held`."""
        held = asked.get("held")
        await self._end_sandbox(keep=held if isinstance(held, dict) else None)
        await self._send({"type": "kept"})

    async def _end_sandbox(self, keep: dict[str, Any] | None = None) -> None:
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is not None:
            await sandbox.kill()
            await sandbox.release()
        home, self.home = self.home, None
        if home is not None and keep is not None and self.keep_key is not None:
            await self.runner.keep(self.keep_key, home, keep)
        elif home is not None:
            await _removed([home])
        if self.keep_key is not None and self.keep_key in self.runner.ending:
            self.runner.ending.pop(self.keep_key).set()

    def _ending(self) -> None:
        """Its end has begun: a sandbox of the same home that asks for the
        copy meanwhile waits for it to be kept (or not)."""
        if self.keep_key is not None and self.keep_key not in self.runner.ending:
            self.runner.ending[self.keep_key] = asyncio.Event()

    def on_close(self) -> None:
        self._ending()
        self.runner.sandboxes.discard(self)
        for task in (self.worker, self.guarding, self.counting):
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
