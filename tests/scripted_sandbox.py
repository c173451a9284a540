"""A sandbox kind for the fast tier: its "programs" are scripts of what a
program does, played by a coroutine that speaks the launcher's frames
(server/runs/child/launcher.py) on a socket pair, so the run, the job, the
warm sandboxes and the /ws/run socket work as with a real launcher, with
no process, bubblewrap, Docker or root.

A scripted program is the run's file (or a course copy's), one command a line:

    print TEXT      TEXT and a newline on the terminal ("$" in TEXT: the last answer)
    err TEXT        TEXT and a newline on stderr
    ask PROMPT      input(PROMPT): the prompt between input()'s marks, then wait for
                    a line (echoed, as a terminal does); at the end of input,
                    EOFError and exit 1
    sleep SECONDS   wait
    hang            wait until killed or interrupted
    flood BYTES     that many bytes of output ("x"s), at the reader's pace
    exit CODE       end with that exit code
    signal NUMBER   end as killed by that signal
    runs            print "run N": the how-manyeth run of this sandbox this is
    crash           the launcher dies without a word (no `X` frame), as if the
                    kernel killed it: the run must not hear its end from bytes

Blank lines and lines starting with # do nothing; any other line ends the
program with an error on stderr (exit 1). After its last line it exits 0.
An interrupt ends a waiting program as Ctrl-C does (KeyboardInterrupt, 130).
As the launcher does, the sandbox reports each run's end in an `X` frame and
then says ready again, up to settings["runs"]; `kill` ends it whatever it
does, and `wait` then says it died of SIGKILL (as the kernel would).
"""
import asyncio
import base64
import hashlib
import json
import os
import signal
import socket
import struct
from typing import TYPE_CHECKING, Any

from server.runs.disk_guard import GroupWrites
from server.runs.protocol import frame
from server.runs.sandbox import Exit, HomeCopy, SandboxKind, StartedSandbox

PROMPT_MARK = b"\x1b]7011;prompt\x07"
INPUT_MARK = b"\x1b]7011;input\x07"
CHUNK = 64 << 10  # the launcher's largest output frame
INPUT_BUFFER = 64 << 10  # typed input not read yet, as the launcher bounds it
EOF = b"\x04"  # what the launcher types for the server's end of input


class ScriptedKind:
    """The kind: `started` counts its sandboxes, `live` holds those not killed yet."""

    name = "scripted"
    reusable = True
    copies_home = False

    def __init__(self) -> None:
        self.started = 0
        self.live: set["ScriptedSandbox"] = set()

    async def prepare(self, home: str, uid: int | None, settings: dict[str, Any]) -> StartedSandbox:
        self.started += 1
        sandbox = ScriptedSandbox(home, int(settings.get("runs", 1)), self.live)
        await sandbox.start()
        return sandbox

    def defences(self) -> dict[str, Any]:
        return {"seccomp": False, "cgroup": None, "own_uid": False, "namespaces": False,
                "user_namespaces": "allowed", "host_paths_hidden": False}

    async def cleanup_leftovers(self) -> int:
        return 0

    def close(self) -> None:
        pass


class Interrupted(Exception):
    """Ctrl-C reached a waiting scripted program."""


class Crashed(Exception):
    """The scripted launcher dies (`crash`)."""


class ScriptedSandbox:
    """One sandbox: a launcher played by `_serve` (see the module docstring)."""

    stdout: asyncio.StreamReader

    def __init__(self, home: str, runs: int, live: set["ScriptedSandbox"]) -> None:
        self.home = home
        self.runs_left = runs
        self.runs_done = 0
        self.live = live
        self.counts: tuple[int, float | None] | None = None
        self.writes: GroupWrites | None = None
        self.copy: HomeCopy | None = None
        self._incoming = b""  # the server's frames, not yet whole
        self._typed = b""  # stdin for the program, bounded by INPUT_BUFFER
        self._news = asyncio.Event()  # a frame came (typed input, an interrupt, go)
        self._go: dict[str, Any] | None = None
        self._interrupted = False
        self._exit: asyncio.Future[Exit] = asyncio.get_running_loop().create_future()

    async def start(self) -> None:
        ours, theirs = socket.socketpair()
        self.stdout, self._own_writer = await asyncio.open_unix_connection(sock=ours)
        self._reader_of_theirs, self._out = await asyncio.open_unix_connection(sock=theirs)
        self._serving = asyncio.ensure_future(self._serve())
        self.live.add(self)

    # -- StartedSandbox ---------------------------------------------------------

    def send(self, data: bytes) -> None:
        self._incoming += data
        while len(self._incoming) >= 5:
            size = struct.unpack(">I", self._incoming[1:5])[0]
            if len(self._incoming) < 5 + size:
                return
            kind, payload = self._incoming[:1], self._incoming[5:5 + size]
            self._incoming = self._incoming[5 + size:]
            if kind == b"g":
                try:
                    self._go = json.loads(payload)
                except ValueError:
                    continue  # not a run: nothing starts (send never raises)
                self._typed = b""  # typed before this run: the launcher drops it too
            elif kind == b"d":
                self._typed += payload[:max(0, INPUT_BUFFER - len(self._typed))]
            elif kind == b"e":
                self._typed += EOF
            elif kind == b"i":
                self._interrupted = True
            self._news.set()  # resize and channel frames change nothing here

    async def wait(self) -> Exit:
        return await asyncio.shield(self._exit)

    async def kill(self) -> None:
        if not self._serving.done():
            self._serving.cancel()
            await asyncio.gather(self._serving, return_exceptions=True)
        self._ended(Exit(signal=signal.SIGKILL))

    async def release(self) -> None:
        for writer in (self._own_writer, self._out):
            writer.close()

    async def on_ready(self) -> None:
        pass

    def diagnostics(self) -> str:
        return ""

    def oom_kills(self) -> int:
        return 0

    def cpu_seconds(self) -> float | None:
        return None

    # -- the launcher's part --------------------------------------------------------

    def _ended(self, exit_: Exit) -> None:
        if not self._exit.done():
            self._exit.set_result(exit_)
        self._out.transport.abort()  # the end of its output, as when its last process is gone
        self.live.discard(self)

    async def _serve(self) -> None:
        while self.runs_left > 0:
            self.runs_left -= 1
            await self._write(b"R")
            while self._go is None:  # an interrupt or input for no run is dropped, as by the launcher
                self._news.clear()
                await self._news.wait()
            go, self._go = self._go, None
            self._interrupted = False
            self.runs_done += 1
            try:
                status = await self._run(go)
            except Crashed:
                return self._ended(Exit(signal=signal.SIGKILL))
            await self._write(b"X", json.dumps(status).encode())
        self._ended(Exit(code=0))

    async def _run(self, go: dict[str, Any]) -> dict[str, Any]:
        status: dict[str, Any] = {"code": 0, "signal": None, "interrupted": False, "memory_error": False}
        if go.get("mode"):
            await self._write(b"e", b"The scripted sandbox runs no attempts.\n")
            return {**status, "code": 1}
        source = await self._source(go)
        if source is None:
            await self._write(b"e", f"can't open file {go['path']!r}\n".encode())
            return {**status, "code": 2}
        if go.get("etag") and not go.get("copy") and hashlib.sha256(source).hexdigest()[:20] != go["etag"]:
            return {"code": None, "signal": None, "changed": True}
        try:
            return {**status, **await self._play(source.decode("utf-8", "replace"))}
        except Interrupted:
            await self._write(b"e", b"KeyboardInterrupt\n")
            return {**status, "code": 130, "interrupted": True}

    async def _source(self, go: dict[str, Any]) -> bytes | None:
        if go.get("copy"):
            data = go["copy"].get(os.path.basename(go["path"]))
            return base64.b64decode(data) if data is not None else None

        def read() -> bytes | None:
            try:
                with open(os.path.join(self.home, go["path"]), "rb") as f:
                    return f.read()
            except OSError:
                return None
        return await asyncio.get_running_loop().run_in_executor(None, read)

    async def _play(self, script: str) -> dict[str, Any]:
        """The script's effects; the end it reports (code, signal)."""
        answer = ""
        for line in script.splitlines():
            command, _, rest = line.partition(" ")
            if not command or command.startswith("#"):
                continue
            if command == "print":
                await self._write(b"o", rest.replace("$", answer).encode() + b"\r\n")
            elif command == "err":
                await self._write(b"e", rest.encode() + b"\n")
            elif command == "ask":
                await self._write(b"o", PROMPT_MARK + rest.encode() + INPUT_MARK)
                typed = await self._line()
                if typed is None:
                    await self._write(b"e", b"EOFError: EOF when reading a line\n")
                    return {"code": 1}
                answer = typed
                await self._write(b"o", typed.encode() + b"\r\n")
            elif command == "sleep":
                await self._pause(float(rest))
            elif command == "hang":
                await self._pause(None)
            elif command == "flood":
                left = int(rest)
                while left > 0:
                    await self._write(b"o", b"x" * min(left, CHUNK))
                    left -= CHUNK
            elif command == "exit":
                return {"code": int(rest)}
            elif command == "signal":
                return {"code": None, "signal": int(rest)}
            elif command == "crash":
                raise Crashed()
            elif command == "runs":
                await self._write(b"o", f"run {self.runs_done}\r\n".encode())
            else:
                await self._write(b"e", f"scripted sandbox: no command {command!r}\n".encode())
                return {"code": 1}
        return {"code": 0}

    async def _line(self) -> str | None:
        """The next typed line (\\r or \\n ends it), None at the end of input."""
        while True:
            ends = [i for i in (self._typed.find(b"\r"), self._typed.find(b"\n"), self._typed.find(EOF)) if i >= 0]
            if ends:
                end = min(ends)
                line, mark, self._typed = self._typed[:end], self._typed[end:end + 1], self._typed[end + 1:]
                return None if mark == EOF and not line else line.decode("utf-8", "replace")
            await self._next_news()

    async def _pause(self, seconds: float | None) -> None:
        """Wait `seconds` (None: for ever), unless interrupted."""
        loop = asyncio.get_running_loop()
        deadline = None if seconds is None else loop.time() + seconds
        while deadline is None or loop.time() < deadline:
            try:
                await asyncio.wait_for(self._next_news(), None if deadline is None else deadline - loop.time())
            except asyncio.TimeoutError:
                return

    async def _next_news(self) -> None:
        if self._interrupted:
            raise Interrupted()
        self._news.clear()
        await self._news.wait()
        if self._interrupted:
            raise Interrupted()

    async def _write(self, kind: bytes, payload: bytes = b"") -> None:
        self._out.write(frame(kind, payload))
        await self._out.drain()  # a reader that does not read stops the program here, as a pipe would


if TYPE_CHECKING:  # mypy holds both classes to the protocols (prepare's answer holds the sandbox)
    _kind: SandboxKind = ScriptedKind()
