"""Replay: how each file was written, change by change, for the teacher.

The IDE sends what its editor changed (`edits` on /ws/run, about twice a
second while one types): CodeMirror's changes in their JSON form, each with
the page's time of it and whether it was typed, pasted, dropped, undone or
came from elsewhere. A page's socket is a *stream*: its first edits of a
file start from the text before them (`base`), and each later message
says the length it starts from, so a stream replays on its own and is
checked as it comes (a message out of step is refused: the page starts
again from its text). Several streams of one file (a page reloaded, a
second device) interleave by time.

Each worker holds its streams' edits and writes them with the other
batched writes (twice a second, and as it drains): a row per stream and
file for up to HOLD_SECONDS of typing, compressed. What is held is bounded
(per stream per minute, per worker); what is kept too: each student's
rows outside exams up to REPLAY_KEEP_BYTES, the oldest removed first,
while an exam's go with the exam. Replays are evidence like the exam's
signals; a page can only ever record its own user's files (the stream is
the socket's, the area resolved for its user), and whoever may read a
file may replay it (files.area: the student, and their teachers).
"""
import json
import secrets
import time
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Protocol

from .. import metrics
from ..db import Pool
from ..errors import Refused
from ..files import paths
from ..files.area import Area

HOLD_SECONDS = 5.0        # a stream's edits of a file share a row for this long
ROW_BYTES = 64 << 10      # ... or until they come to this much
MAX_BASE = 100_000        # characters a stream may start from (a larger file is not recorded)
MAX_EDITS = 500           # edits in one message
BYTES_PER_MINUTE = 1 << 20  # what one stream may send; typing sends a few kilobytes a minute
HELD_BYTES = 16 << 20     # what a worker holds for its next write, every stream together
FILES_PER_STREAM = 64     # files one page may be recording at once
PAGE_BYTES = 256 << 10    # stored bytes one answer gives at most (the page asks for more)
PAGE_ROWS = 2000
LISTED_FILES = 1000
LONGEST_AWAY = 86_400.0   # an edit's time is at most a day before it arrives (a page offline that long)
FLAGS = {"": "typed", "p": "pasted", "d": "dropped", "u": "undone or redone", "x": "changed elsewhere"}
OUT_OF_STEP = (409, "edits_out_of_step", "The replay of this file lost its place: the page starts it again.")


class Folders(Protocol):
    """What replays need of the files service: who may read or write an area."""

    async def area(self, user: dict[str, Any], spec: str, write: bool) -> Area: ...


@dataclass
class Chain:
    """A stream's edits of one file: the length they have come to, and
    what waits for the next row."""
    area: Area
    path: str
    length: int          # of the text after the last edit taken (UTF-16 units, as the editor counts)
    at: float = 0.0      # the held row's first edit (time.time())
    last: float = 0.0    # the last edit's: the next one is never earlier
    base: str | None = None  # the text the held row starts from, when it starts the stream
    start: int = 0       # the held row's length before its first edit
    edits: list[list[Any]] = field(default_factory=list)  # [ms after `at`, changes, flag]
    held: int = 0        # bytes they cost
    typed: int = 0
    pasted: int = 0


class Stream:
    """One page's socket: its files' chains, and what it may still send."""

    def __init__(self, user: dict[str, Any]) -> None:
        self.id = secrets.token_hex(6)
        self.user = user
        self.chains: dict[tuple[str, str], Chain] = {}  # (area spec, path) -> chain
        self.allowance = float(BYTES_PER_MINUTE)
        self.refilled = time.monotonic()
        self.ended = False

    def spend(self, cost: int) -> None:
        now = time.monotonic()
        self.allowance = min(BYTES_PER_MINUTE, self.allowance + (now - self.refilled) * BYTES_PER_MINUTE / 60)
        self.refilled = now
        if cost > self.allowance:
            raise Refused(429, "edits_too_fast", "This page sent more edits than can be recorded: "
                                                 "the replay skips them and goes on.")
        self.allowance -= cost


@dataclass
class Row:
    user_id: int
    exam_id: int | None
    area_key: str
    path: str
    stream: str
    at: datetime
    last_at: datetime
    typed: int
    pasted: int
    data: bytes
    held: int


class Replays:
    name = "replay log"  # as worker.py's batches: flushed twice a second, and as the worker drains

    def __init__(self, pool: Pool, folders: Folders, keep_bytes: int, draining: Callable[[], bool]) -> None:
        self.pool = pool
        self.folders = folders
        self.keep_bytes = keep_bytes
        self.draining = draining
        self.streams: set[Stream] = set()
        self.rows: list[Row] = []  # sealed, for the next write
        self.held = 0

    # -- recording (the run socket's `edits`) -------------------------------------------

    def stream(self, user: dict[str, Any]) -> Stream:
        stream = Stream(user)
        self.streams.add(stream)
        return stream

    def end(self, stream: Stream) -> None:
        """The socket closed: what it holds goes with the next write."""
        stream.ended = True

    async def add(self, stream: Stream, msg: dict[str, Any]) -> None:
        """Take an `edits` message ({area, path, base?, length, sent, edits}),
        its fields' types and bounds validated (runs/messages.py); refused
        whole, changing nothing, when anything in it is wrong."""
        path = "/".join(paths.parse(msg["path"], allow_root=False))
        key = (msg["area"], path)
        chain = stream.chains.get(key)
        base = msg.get("base")
        if base is not None:
            if _utf16(base) != msg["length"]:
                raise Refused(400, "bad_base", "The text a replay starts from must be as long as 'length' says.")
            if chain is None and len(stream.chains) >= FILES_PER_STREAM:
                raise Refused(429, "too_many_files", "This page records too many files at once: reload it.")
            area = await self._recorded_area(stream.user, msg["area"])
        elif chain is None or chain.length != msg["length"]:
            if chain is not None:  # what it took before goes on to its row; the page starts again from its text
                self._drop(stream, key)
            raise Refused(*OUT_OF_STEP)
        else:
            area = chain.area
        length = msg["length"]
        now = time.time()
        last = chain.last if chain is not None and base is None else 0.0
        taken, cost, typed, pasted = [], len(base or ""), 0, 0
        for edit in msg["edits"]:
            measured = _edit(edit)
            if measured is None or measured[0] != length:
                raise Refused(400, "bad_edits", "Each edit is [time, changes, kind] in step with the one before.")
            length, inserted = measured[1], measured[2]
            last = max(last, min(now, now - (msg["sent"] - edit[0]) / 1000), now - LONGEST_AWAY)
            taken.append((last, edit[1], edit[2]))
            cost += 16 + measured[3]
            if edit[2] in ("", "p", "d"):
                typed += inserted
            if edit[2] in ("p", "d"):
                pasted += inserted
        if self.held + cost > HELD_BYTES:
            raise Refused(503, "replay_busy", "The server is behind with recording edits: "
                                              "the replay skips these and goes on.", retry_after=5)
        stream.spend(cost)
        if chain is None or base is not None:
            if chain is not None:
                self._drop(stream, key)
            chain = stream.chains[key] = Chain(area, path, msg["length"], base=base, start=msg["length"])
        for when, changes, flag in taken:
            if not chain.edits:
                chain.at = when
            chain.edits.append([round((when - chain.at) * 1000), changes, flag])
        chain.last, chain.length = last, length
        chain.held += cost
        chain.typed += typed
        chain.pasted += pasted
        self.held += cost
        if chain.held >= ROW_BYTES:
            self._seal(stream, chain)

    async def _recorded_area(self, user: dict[str, Any], spec: str) -> Area:
        """The area of `spec` if it is one whose files the user types in and
        we record: their home, their exam folder (one they may write now)."""
        if spec != "home" and not spec.startswith("exam/"):
            raise Refused(400, "not_recorded", "Only your own files and your exam's are recorded for replay.")
        return await self.folders.area(user, spec, write=True)

    def _drop(self, stream: Stream, key: tuple[str, str]) -> None:
        chain = stream.chains.pop(key)
        if chain.edits:
            self._seal(stream, chain)

    def _seal(self, stream: Stream, chain: Chain) -> None:
        """The chain's held edits become a row for the next write."""
        data = zlib.compress(json.dumps({"base": chain.base, "length": chain.start, "edits": chain.edits},
                                        separators=(",", ":")).encode(), 6)
        self.rows.append(Row(stream.user["id"], chain.area.exam_id, chain.area.key, chain.path, stream.id,
                             _time(chain.at), _time(chain.last), chain.typed, chain.pasted, data, chain.held))
        chain.base, chain.start, chain.edits = None, chain.length, []
        chain.held = chain.typed = chain.pasted = 0

    async def flush(self) -> None:
        """Write the rows that are due: a chain held for HOLD_SECONDS, a
        stream that ended, everything when the worker drains."""
        now, everything = time.time(), self.draining()
        for stream in list(self.streams):
            for chain in stream.chains.values():
                if chain.edits and (everything or stream.ended or now - chain.at >= HOLD_SECONDS):
                    self._seal(stream, chain)
            if stream.ended:
                self.streams.discard(stream)
        if not self.rows:
            return
        rows, self.rows = self.rows, []
        try:
            over = await self._write(rows)
        except BaseException:
            self.rows = rows + self.rows  # (bounded: nothing more is taken past HELD_BYTES)
            raise
        self.held -= sum(r.held for r in rows)
        metrics.REPLAY_BYTES.inc(sum(len(r.data) for r in rows))
        for user_id in over:
            await self._prune(user_id)

    async def _write(self, rows: list[Row]) -> list[int]:
        """Insert the rows in one statement; the students now over their bound."""
        columns = list(zip(*[(r.user_id, r.exam_id, r.area_key, r.path, r.stream, r.at, r.last_at, r.typed,
                              r.pasted, len(r.data), r.data) for r in rows]))
        found = await self.pool.fetch(
            """WITH added AS (
                   INSERT INTO edit_log (user_id, exam_id, area_key, path, stream, at, last_at, typed, pasted,
                                         bytes, data)
                   SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[],
                                        $6::timestamptz[], $7::timestamptz[], $8::int[], $9::int[], $10::int[],
                                        $11::bytea[])
                   RETURNING user_id, exam_id, bytes)
               INSERT INTO edit_log_usage AS u (user_id, bytes)
               SELECT user_id, sum(bytes) FROM added WHERE exam_id IS NULL GROUP BY user_id
               ON CONFLICT (user_id) DO UPDATE SET bytes = u.bytes + excluded.bytes
               RETURNING user_id, bytes""", *columns)
        return [r["user_id"] for r in found if r["bytes"] > self.keep_bytes]

    async def _prune(self, user_id: int) -> None:
        """Remove the student's oldest rows outside exams, down to four
        fifths of the bound (so that it is not done at every write)."""
        await self.pool.execute(
            """WITH gone AS (
                   DELETE FROM edit_log WHERE id IN (
                       SELECT id FROM (SELECT id, sum(bytes) OVER (ORDER BY id DESC) AS newer FROM edit_log
                                       WHERE user_id = $1 AND exam_id IS NULL) r
                       WHERE newer > $2)
                   RETURNING bytes)
               UPDATE edit_log_usage SET bytes = bytes - (SELECT coalesce(sum(bytes), 0) FROM gone)
               WHERE user_id = $1""", user_id, self.keep_bytes * 4 // 5)

    # -- replaying ------------------------------------------------------------------------

    async def recorded(self, user: dict[str, Any], spec: str) -> list[dict[str, Any]]:
        """The files of the area `spec` with a replay: when they were
        written, how much was typed and pasted, what it costs."""
        area = await self.folders.area(user, spec, write=False)
        rows = await self.pool.fetch(
            """SELECT path, min(at) AS first, max(last_at) AS last, sum(typed) AS typed, sum(pasted) AS pasted,
                      sum(bytes) AS bytes FROM edit_log WHERE area_key = $1 GROUP BY path ORDER BY path LIMIT $2""",
            area.key, LISTED_FILES)
        return [{"path": r["path"], "first": _iso(r["first"]), "last": _iso(r["last"]), "typed": r["typed"],
                 "pasted": r["pasted"], "bytes": r["bytes"]} for r in rows]

    async def log(self, user: dict[str, Any], spec: str, path: str, after: int) -> dict[str, Any]:
        """The rows of a file's replay after the row `after`, oldest first,
        each {id, stream, at, base, length, edits} (an edit: [ms after `at`,
        changes, flag]); `more` when the page should ask again from the last."""
        parts = paths.parse(path, allow_root=False)
        area = await self.folders.area(user, spec, write=False)
        rows = await self.pool.fetch(
            """SELECT id, stream, at, bytes, data FROM edit_log WHERE area_key = $1 AND path = $2 AND id > $3
               ORDER BY id LIMIT $4""", area.key, "/".join(parts), after, PAGE_ROWS)
        chunks: list[dict[str, Any]] = []
        size = 0
        for r in rows:
            if chunks and size + r["bytes"] > PAGE_BYTES:
                break
            size += r["bytes"]
            held = json.loads(zlib.decompress(r["data"]))
            chunks.append({"id": r["id"], "stream": r["stream"], "at": _iso(r["at"]), **held})
        return {"chunks": chunks, "more": len(chunks) < len(rows) or len(rows) == PAGE_ROWS}


def _edit(edit: Any) -> tuple[int, int, int, int] | None:
    """(length before, length after, characters inserted, its cost in bytes)
    of one edit [time, changes, flag], None when it is not one. `changes` is
    CodeMirror's ChangeSet.toJSON(): a number keeps that many characters,
    [n, *lines] deletes n and inserts the lines (joined by newlines);
    lengths in UTF-16 units, as the editor counts them."""
    if not (isinstance(edit, list) and len(edit) == 3 and _count(edit[0]) and isinstance(edit[1], list)
            and edit[1] and isinstance(edit[2], str) and edit[2] in FLAGS):
        return None
    before = after = inserted = cost = 0
    for part in edit[1]:
        if _count(part):
            before += part
            after += part
        elif isinstance(part, list) and part and _count(part[0]) and all(isinstance(s, str) for s in part[1:]):
            added = sum(_utf16(s) for s in part[1:]) + max(0, len(part) - 2)
            before += part[0]
            after += added
            inserted += added
            cost += sum(len(s) for s in part[1:])
        else:
            return None
        cost += 4
    return before, after, inserted, cost


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 1 << 40


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _time(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, timezone.utc)


def _iso(when: datetime) -> str:
    return when.astimezone(timezone.utc).isoformat()
