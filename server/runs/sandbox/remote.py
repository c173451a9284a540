"""The `remote` kind: sandboxes on runners (server/runner), other processes
or hosts that hold none of the web tier's secrets.

A sandbox here is one WebSocket to a runner (the wire: runner/service.py),
opened with a ticket for that runner (runs/sandbox/tickets.py); the runner proves
itself in its first answer. The launcher's frames cross it unchanged, so
run.py, the job and the warm sandboxes drive a remote sandbox as a local
one. Its end comes from the runner, which has it from the kernel; a runner
that stops answering (no pong within PING_TIMEOUT) or whose socket breaks
ends the sandbox as `lost`, which the student is told in those words.

The runners are chosen least busy first (by this worker's own count of its
sandboxes on each); one that refuses or cannot be reached is skipped for
DOWN_SECONDS.
"""
import asyncio
import json
import logging
import os
import socket
import time
from typing import Any

from tornado import httpclient, websocket

from ...config import Config
from ..disk_guard import GroupWrites
from .tickets import issue, proof_holds, runner_key
from .launch import STREAM_LIMIT, Exit, SandboxError

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 3.0
PREPARE_TIMEOUT = 60.0
PING_INTERVAL = 1.5  # a runner cut off is noticed within PING_INTERVAL + PING_TIMEOUT: 3 s
PING_TIMEOUT = 1.5  # (Tornado wants it no longer than the interval)
KILL_WAIT = 10.0
DOWN_SECONDS = 5.0
MAX_MESSAGE = 4 << 20
MAX_PENDING = 4 << 20  # bytes sent to a runner and not yet written to its socket


class RemoteKind:
    name = "remote"
    reusable = True  # runners run local or docker sandboxes
    hides_host_paths = True

    def __init__(self, cfg: Config) -> None:
        if not cfg.RUNNERS or not cfg.RUNNER_SECRET:
            raise SandboxError("SANDBOX=remote needs RUNNERS (id=ws://host:port ...) and RUNNER_SECRET")
        self.cfg = cfg
        self.runners = dict(cfg.RUNNERS)
        self.keys = {runner: runner_key(cfg.RUNNER_SECRET, runner) for runner in self.runners}
        self.busy = {runner: 0 for runner in self.runners}  # this worker's sandboxes on each
        self.down_until = {runner: 0.0 for runner in self.runners}
        self.seen_defences: dict[str, dict[str, Any]] = {}

    def defences(self) -> dict[str, Any]:
        """What the runners said holds student code there (once one has
        answered), with the runners' names."""
        seen = next(iter(self.seen_defences.values()), {})
        return {"seccomp": seen.get("seccomp"), "cgroup": seen.get("cgroup"), "own_uid": seen.get("own_uid"),
                "namespaces": seen.get("namespaces"), "user_namespaces": seen.get("user_namespaces"),
                "host_paths_hidden": seen.get("host_paths_hidden", True), "runners": sorted(self.runners)}

    async def cleanup_leftovers(self) -> int:
        return 0  # a runner kills the sandbox of every socket that closes

    def close(self) -> None:
        pass

    def order(self) -> list[str]:
        """The runners to try, least busy first, those refused lately last."""
        now = time.monotonic()
        return sorted(self.runners, key=lambda r: (self.down_until[r] > now, self.busy[r], r))

    async def prepare(self, home: str, uid: int | None, settings: dict[str, Any]) -> "RemoteSandbox":
        relative = os.path.relpath(home, self.cfg.STORAGE_ROOT)
        if relative.startswith(".."):
            raise SandboxError("a home outside the storage")
        reasons = []
        for runner in self.order():
            try:
                sandbox = await RemoteSandbox.open(self, runner, relative, uid, settings)
            except SandboxError as e:
                self.down_until[runner] = time.monotonic() + DOWN_SECONDS
                log.warning("runner %s: %s", runner, e)
                reasons.append(f"{runner}: {e}")
                continue
            return sandbox
        raise SandboxError("no runner could start a sandbox (" + "; ".join(reasons) + ")")


class RemoteSandbox:
    """One sandbox on a runner, as StartedSandbox has it."""

    writes: GroupWrites | None = None  # the runner's cgroup is not reachable from here: no disk guard yet

    def __init__(self, kind: RemoteKind, runner: str, ws: websocket.WebSocketClientConnection,
                 feed: asyncio.StreamWriter, stdout: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
        self.kind = kind
        self.runner = runner
        self.ws = ws
        self.feed = feed  # our end of the pair whose other end is `stdout`: drained, so bounded
        self.stdout, self._stdout_end = stdout
        self.counts: tuple[int, float | None] | None = None
        self.last_counts: tuple[int, float | None] = (0, None)
        self.exit: asyncio.Future[Exit] = asyncio.get_running_loop().create_future()
        self.pending = 0
        self.said = ""
        self.reader: asyncio.Task[None] | None = None
        kind.busy[runner] += 1

    @classmethod
    async def open(cls, kind: RemoteKind, runner: str, home: str, uid: int | None,
                   settings: dict[str, Any]) -> "RemoteSandbox":
        ticket, sandbox_id = issue(kind.keys[runner], runner)
        request = httpclient.HTTPRequest(kind.runners[runner] + "/sandbox", connect_timeout=CONNECT_TIMEOUT,
                                         request_timeout=CONNECT_TIMEOUT,
                                         headers={"Authorization": "Ticket " + ticket})
        try:
            ws = await websocket.websocket_connect(request, ping_interval=PING_INTERVAL, ping_timeout=PING_TIMEOUT,
                                                   max_message_size=MAX_MESSAGE)
        except (OSError, httpclient.HTTPClientError, websocket.WebSocketError, asyncio.TimeoutError) as e:
            raise SandboxError(f"could not reach it ({e})") from None
        try:
            await ws.write_message(json.dumps({"home": home, "uid": uid, "settings": settings}))
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
        mine, theirs = socket.socketpair()
        stdout = await asyncio.open_connection(sock=mine, limit=STREAM_LIMIT)
        _, feed = await asyncio.open_connection(sock=theirs)
        sandbox = cls(kind, runner, ws, feed, stdout)
        sandbox.reader = asyncio.ensure_future(sandbox._read())
        return sandbox

    async def _read(self) -> None:
        """The runner's messages: output into `stdout` (a slow reader here
        slows the runner's socket, never a buffer), counts, the exit."""
        try:
            while True:
                message = await self.ws.read_message()
                if message is None:
                    break
                if isinstance(message, bytes):
                    self.feed.write(message)
                    await self.feed.drain()
                    continue
                said = json.loads(message)
                if said.get("type") == "counts":
                    self.last_counts = (int(said.get("oom_kills") or 0), said.get("cpu_seconds"))
                elif said.get("type") == "exit" and not self.exit.done():
                    self.exit.set_result(Exit(code=said.get("code"), signal=said.get("signal"),
                                              oom_killed=bool(said.get("oom_killed"))))
        except (ValueError, AttributeError, TypeError, ConnectionError) as e:
            self.said = f"a message from the runner that makes no sense ({e})"
            log.error("runner %s: %s", self.runner, self.said)
        finally:
            self.feed.close()
            if not self.exit.done():
                self.said = self.said or "the runner's socket closed before the sandbox's end"
                self.exit.set_result(Exit(lost=True))
            self.ws.close()
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

    def _op(self, op: str) -> None:
        try:
            self.ws.write_message(json.dumps({"op": op}))
        except websocket.WebSocketClosedError:
            pass

    async def on_ready(self) -> None:
        self._op("ready")

    async def wait(self) -> Exit:
        return await asyncio.shield(self.exit)

    async def kill(self) -> None:
        if not self.exit.done():
            self._op("kill")
            try:
                await asyncio.wait_for(asyncio.shield(self.exit), KILL_WAIT)
            except asyncio.TimeoutError:
                log.error("runner %s did not end a killed sandbox within %.0f s", self.runner, KILL_WAIT)
        self.ws.close()  # the runner kills whatever is left of a sandbox whose socket closes

    async def release(self) -> None:
        self.ws.close()
        if self.reader is not None:
            await asyncio.gather(self.reader, return_exceptions=True)
        self._stdout_end.close()

    def diagnostics(self) -> str:
        return f"runner {self.runner}" + (f": {self.said}" if self.said else "")

    def oom_kills(self) -> int:
        return self.last_counts[0]

    def cpu_seconds(self) -> float | None:
        return self.last_counts[1]
