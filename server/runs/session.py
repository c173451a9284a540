"""One run of a student's program: from `go` to `exit`, whatever the sandbox.

It turns the launcher's streams into protocol messages (see PROTOCOL.md):
text is decoded and coalesced into `output` frames every few tens of
milliseconds, images are cut out of stdout, and every limit the server
enforces itself (wall time, idle time, output size) ends the run with its
reason. Sends are awaited, so a slow client slows the reading of the
program's output, and the program blocks at its next print: nothing
buffers without bound.
"""
import asyncio
import base64
import codecs
import collections
import json
import logging
import signal
import struct
import time
import uuid

from .sandbox import Exit

log = logging.getLogger(__name__)

# ESC ] 7011 ; the program's images, ESC ] 7012 ; the launcher's own (see launcher.py)
OSC = b"\x1b]701"
BEL = b"\x07"
IMAGE = b"1;image;"
READY = b"2;ready"
EXIT = b"2;exit;"
END = b"2;end"
FLUSH_SECONDS = 0.025
FLUSH_BYTES = 16 << 10
MAX_IMAGE_BYTES = 8 << 20
READY_TIMEOUT = 20.0


def frame(kind, payload=b""):
    return kind + struct.pack(">I", len(payload)) + payload


class OscParser:
    """Splits the launcher's output into text and `ESC ] 701x ; ... BEL`
    sequences, even when a sequence is cut across reads. A sequence longer
    than `limit` is dropped (reported as ("dropped", size)); one that never
    ends (a program's stray `ESC ] 7011 ;`) is abandoned where the next
    begins, so it cannot swallow the launcher's end of the run."""

    def __init__(self, limit=MAX_IMAGE_BYTES):
        self.limit = limit
        self.pending = b""
        self.inside = False
        self.skipped = 0
        self.scanned = 0  # of pending, inside a sequence: searched already

    def feed(self, data):
        self.pending += data
        out = []
        while self.pending:
            if self.inside:
                end = self.pending.find(BEL, self.scanned)
                restart = self.pending.find(OSC, self.scanned, end if end >= 0 else len(self.pending))
                if restart >= 0:
                    self.pending = self.pending[restart + len(OSC):]
                    self.skipped = self.scanned = 0
                    continue
                if end < 0:
                    keep = _prefix_overlap(self.pending, OSC)  # perhaps the start of the next
                    if len(self.pending) > self.limit:
                        self.skipped += len(self.pending) - keep
                        self.pending = self.pending[len(self.pending) - keep:]
                    self.scanned = len(self.pending) - keep
                    break
                payload, self.pending = self.pending[:end], self.pending[end + 1:]
                self.inside = False
                self.scanned = 0
                if self.skipped:
                    out.append(("dropped", self.skipped + len(payload)))
                    self.skipped = 0
                else:
                    out.append(("osc", payload))
                continue
            start = self.pending.find(OSC)
            if start < 0:
                keep = _prefix_overlap(self.pending, OSC)
                cut = len(self.pending) - keep
                if cut:
                    out.append(("text", self.pending[:cut]))
                self.pending = self.pending[cut:]
                break
            if start:
                out.append(("text", self.pending[:start]))
            self.pending = self.pending[start + len(OSC):]
            self.inside = True
        return out


def _prefix_overlap(data, marker):
    """Length of the longest tail of `data` that starts `marker`."""
    for n in range(min(len(marker) - 1, len(data)), 0, -1):
        if data.endswith(marker[:n]):
            return n
    return 0


class Channel:
    """One of the launcher's streams as items: ("text", bytes),
    ("osc", payload) or ("dropped", size); None at its end. Items read past
    the end of a run wait for the next one."""

    def __init__(self, stream):
        self.stream = stream
        self.parser = OscParser()
        self.items = collections.deque()

    async def next(self):
        while not self.items:
            data = await self.stream.read(65536)
            if not data:
                return None
            self.items.extend(self.parser.feed(data))
        return self.items.popleft()


class Sandboxed:
    """A prepared sandbox, read as items; it may serve `runs` runs."""

    def __init__(self, prepared, runs=1):
        self.prepared = prepared
        self.out = Channel(prepared.stdout)
        self.err = Channel(prepared.stderr)
        self.runs_left = runs

    async def ready(self):
        """Wait for the launcher's `ready`; False if it died instead."""
        async def until_ready():
            while True:
                item = await self.out.next()
                if item is None:
                    return False
                if item == ("osc", READY):
                    return True
        try:
            ready = await asyncio.wait_for(until_ready(), READY_TIMEOUT)
        except asyncio.TimeoutError:
            return False
        if ready:
            self.prepared.on_ready()
        return ready


REASON_WORDS = {
    "ok": "finished",
    "error": "stopped with an error",
    "interrupted": "interrupted (Ctrl-C)",
    "timeout": "stopped: it ran longer than {wall} seconds",
    "idle": "stopped: nothing happened for {idle} seconds",
    "cpu_limit": "stopped: used more than {cpu} seconds of CPU time",
    "memory_limit": "stopped: used more than {memory} MB of memory",
    "output_limit": "stopped: printed more than {output} KB",
    "killed": "stopped",
    "server_restart": "stopped: the server is restarting; run it again in a moment",
    "sandbox_failed": "could not start: the sandbox failed",
}


class Run:
    def __init__(self, cfg, sandboxed, send):
        self.cfg = cfg
        self.sandboxed = sandboxed
        self.prepared = sandboxed.prepared
        self.send = send  # async callable taking a message dict
        self.id = uuid.uuid4().hex[:12]
        self.stop_reason = None
        self.status = None  # what the launcher said at the end
        self.reusable = False  # the launcher ended the run itself and goes on
        self.output_bytes = 0
        self.last_activity = time.monotonic()
        self._pending = []  # [(stream, text)]
        self._sent_output = False
        self._pending_size = 0
        self._send_lock = asyncio.Lock()
        self._decoders = {s: codecs.getincrementaldecoder("utf-8")("replace") for s in ("stdout", "stderr")}

    # -- input from the client ---------------------------------------------

    def stdin(self, text):
        self.last_activity = time.monotonic()
        self.prepared.send(frame(b"d", text.encode("utf-8")))

    def interrupt(self):
        self.last_activity = time.monotonic()
        self.prepared.send(frame(b"i"))

    def end_of_input(self):
        self.prepared.send(frame(b"e"))

    def resize(self, cols, rows):
        self.prepared.send(frame(b"r", json.dumps({"cols": cols, "rows": rows}).encode()))

    async def stop(self, reason):
        """End the run now; the first reason given is the one reported."""
        if self.stop_reason is None:
            self.stop_reason = reason
        await self.prepared.kill()

    # -- the run ----------------------------------------------------------

    async def execute(self, path, args, cols, rows):
        """Start the program and stream it to the client; return the exit message."""
        started = time.monotonic()
        self.last_activity = started
        self.prepared.send(frame(b"g", json.dumps({"path": path, "args": args, "cols": cols,
                                                   "rows": rows}).encode()))
        watchdog = asyncio.create_task(self._watchdog(started))
        flusher = asyncio.create_task(self._flush_every())
        sandboxed = self.sandboxed
        sandboxed.runs_left -= 1
        try:
            ended = await asyncio.gather(self._read(sandboxed.out, "stdout"), self._read(sandboxed.err, "stderr"))
            # Both streams marked their end: the launcher clears up and says
            # ready again. Otherwise it is ending (or was killed): wait for it.
            self.reusable = all(ended) and self.status is not None and self.stop_reason is None
            exit_ = Exit() if self.reusable else await self.prepared.wait()
        finally:
            watchdog.cancel()
            flusher.cancel()
        await self._flush()
        return self._exit_message(exit_, time.monotonic() - started)

    async def _read(self, channel, name):
        """Relay one stream until the launcher marks the run's end on it
        (True) or the stream ends (False)."""
        while True:
            item = await channel.next()
            if item is None:
                self._queue(name, self._decoders[name].decode(b"", final=True))
                return False
            self.last_activity = time.monotonic()
            kind, payload = item
            if kind == "text":
                await self._text(name, payload)
            elif kind == "dropped":
                await self._text("stderr", f"\n[an image of {payload >> 10} KB was too large to show]\n"
                                 .encode())
            elif payload.startswith(IMAGE) and name == "stdout":
                await self._image(payload[len(IMAGE):])
            elif payload.startswith(EXIT) and name == "stdout":
                self.status = _json(payload[len(EXIT):])
                return True
            elif payload == END and name == "stderr":
                self._queue(name, self._decoders[name].decode(b"", final=True))
                return True

    async def _text(self, stream, data):
        if not self._count(len(data)):
            return
        self._queue(stream, self._decoders[stream].decode(data))
        if self._pending_size >= FLUSH_BYTES or not self._sent_output:
            # The first output goes at once: it is what "Run feels instant" means.
            await self._flush()  # waits for the client: reading pauses meanwhile

    async def _image(self, b64):
        if not self._count(len(b64)):
            return
        try:
            base64.b64decode(b64, validate=True)
        except ValueError:
            return  # not an image: nothing to show
        await self._flush()
        await self._send({"type": "image", "mime": "image/png", "data": b64.decode("ascii")})

    def _count(self, n):
        self.output_bytes += n
        if self.output_bytes > self.cfg.RUN_OUTPUT_KB << 10:
            if self.stop_reason is None:
                asyncio.ensure_future(self.stop("output_limit"))
            return False
        return True

    def _queue(self, stream, text):
        if text:
            self._pending.append((stream, text))
            self._pending_size += len(text)

    async def _flush(self):
        async with self._send_lock:
            batch, self._pending, self._pending_size = self._pending, [], 0
            merged = []
            for stream, text in batch:  # one frame per run of the same stream
                if merged and merged[-1][0] == stream:
                    merged[-1][1].append(text)
                else:
                    merged.append((stream, [text]))
            for stream, texts in merged:
                self._sent_output = True
                await self.send({"type": "output", "stream": stream, "data": "".join(texts)})

    async def _send(self, message):
        async with self._send_lock:
            await self.send(message)

    async def _flush_every(self):
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            if self._pending:
                await self._flush()

    async def _watchdog(self, started):
        cfg = self.cfg
        while True:
            await asyncio.sleep(0.25)
            now = time.monotonic()
            if now - started > cfg.RUN_WALL_SECONDS:
                return await self.stop("timeout")
            if now - self.last_activity > cfg.RUN_IDLE_SECONDS:
                return await self.stop("idle")

    def _exit_message(self, exit_, duration):
        status = self.status or {}
        code = status.get("code", exit_.code)
        sig = status.get("signal", exit_.signal)
        if self.stop_reason:
            reason = self.stop_reason
        elif status.get("reason") or exit_.reason:
            reason = status.get("reason") or exit_.reason
        elif sig == signal.SIGXCPU:
            reason = "cpu_limit"
        else:
            reason = "ok" if code == 0 and status else "error"
        cfg = self.cfg
        words = REASON_WORDS.get(reason, reason).format(
            wall=cfg.RUN_WALL_SECONDS, idle=cfg.RUN_IDLE_SECONDS, cpu=cfg.RUN_CPU_SECONDS,
            memory=cfg.RUN_MEMORY_MB, output=cfg.RUN_OUTPUT_KB)
        if reason == "idle":  # reported as a timeout, with its own words
            reason = "timeout"
        if reason == "error" and code is not None:
            words += f" (exit code {code})"
        return {"type": "exit", "run_id": self.id, "code": code, "signal": sig, "reason": reason,
                "message": words, "duration": round(duration, 3)}


def _json(data):
    try:
        value = json.loads(data)
        return value if isinstance(value, dict) else None
    except ValueError:
        return None
