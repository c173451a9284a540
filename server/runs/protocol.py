"""The launcher's frames, and the images inside a program's output, as the
server reads them.

Frames (see child/launcher.py): 1 byte kind, 4 bytes big-endian length, payload.
The launcher wraps everything the program writes in `o` and `e` frames, so
a program's bytes are only ever payload: no sequence it prints can end its
run or pose as the launcher. Images are the program's own business: the
matplotlib backend writes `ESC ] 7011 ; image ; <base64 PNG> BEL` on
stdout, and ImageParser cuts them out of the text, as it cuts out the
marks the launcher's input() writes around its prompt, `ESC ] 7011 ; prompt BEL`
before and `ESC ] 7011 ; input BEL` after: the program waits for a line,
and the text between was its prompt. A program may print them too; all it
can do is make the page say it waits, or have an output check leave out of the
compared output text it could have left unprinted.
"""
import asyncio
import struct

HEADER = 5
MAX_FRAME = 1 << 20  # the launcher sends at most 256 KiB at a time; more means it is broken
LAUNCHER_KINDS = {b"R", b"o", b"e", b"c", b"X"}
OSC = b"\x1b]7011;"
BEL = b"\x07"
IMAGE = b"image;"
INPUT = b"input"
PROMPT = b"prompt"
MAX_IMAGE_BYTES = 8 << 20


# What ImageParser makes of stdout: ("text" | "image" | "prompt" | "input",
# bytes), or ("dropped", the size of an image too large to show).
Item = tuple[str, bytes] | tuple[str, int]


class BadFrame(Exception):
    """The launcher broke the protocol: the sandbox cannot be trusted."""


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    return kind + struct.pack(">I", len(payload)) + payload


class FrameKinds:
    """The kinds of the frames that begin in a stream of them, read a chunk
    at a time (frames may be cut anywhere): for a relay that passes the
    chunks on whole (runner/service.py) and only needs to see a run's end
    (`X`) coming."""

    def __init__(self) -> None:
        self.header = b""  # the part of a header read so far
        self.left = 0  # bytes of the current frame's payload still to come

    def begun(self, chunk: bytes) -> set[bytes]:
        kinds, at = set(), 0
        while at < len(chunk):
            if self.left:
                step = min(self.left, len(chunk) - at)
                self.left, at = self.left - step, at + step
                continue
            take = HEADER - len(self.header)
            self.header, at = self.header + chunk[at:at + take], at + take
            if len(self.header) == HEADER:
                kinds.add(self.header[:1])
                self.left, self.header = struct.unpack(">I", self.header[1:])[0], b""
        return kinds


async def read_frame(stream: asyncio.StreamReader) -> tuple[bytes, bytes] | None:
    """The next (kind, payload) from the launcher, None at the end of its output."""
    try:
        header = await stream.readexactly(HEADER)
    except asyncio.IncompleteReadError as e:
        if e.partial:
            raise BadFrame("output ended inside a frame") from None
        return None
    kind, size = header[:1], struct.unpack(">I", header[1:])[0]
    if kind not in LAUNCHER_KINDS or size > MAX_FRAME:
        raise BadFrame(f"frame {kind!r} of {size} bytes")
    try:
        return kind, await stream.readexactly(size)
    except asyncio.IncompleteReadError:
        raise BadFrame("output ended inside a frame") from None


class ImageParser:
    """Splits a program's stdout into ("text", bytes), ("image", base64
    bytes), ("prompt", b""), ("input", b"") and ("dropped", size) items, even when a sequence is cut across
    frames. An image longer than `limit` is dropped; a sequence that never
    ends is abandoned where the next one begins, or at the end of the run.
    One parser reads one run.
    """

    def __init__(self, limit: int = MAX_IMAGE_BYTES) -> None:
        self.limit = limit
        self.pending = b""
        self.inside = False
        self.skipped = 0
        self.scanned = 0  # of pending, inside a sequence: searched already

    def feed(self, data: bytes) -> list[Item]:
        self.pending += data
        out: list[Item] = []
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
                elif payload.startswith(IMAGE):
                    out.append(("image", payload[len(IMAGE):]))
                elif payload in (INPUT, PROMPT):
                    out.append((payload.decode(), b""))
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

    def finish(self) -> list[Item]:
        """What is left at the end of a run: an unfinished sequence is
        dropped, a held-back tail that only looked like one is text."""
        pending, self.pending = self.pending, b""
        if self.inside:  # an image that never ended: nothing to show
            self.inside, self.skipped, self.scanned = False, 0, 0
            return []
        return [("text", pending)] if pending else []


def _prefix_overlap(data: bytes, marker: bytes) -> int:
    """Length of the longest tail of `data` that starts `marker`."""
    for n in range(min(len(marker) - 1, len(data)), 0, -1):
        if data.endswith(marker[:n]):
            return n
    return 0
