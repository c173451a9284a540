"""The consoles of the runs on this worker, as their students saw them, for
a teacher who follows a student (a student's detail; following.py is the
teacher's side).

Runs tell every message their IDE shows (`run_console`: the runs'
RunEvents, runs/events.py). This keeps, in memory and per user, the
console of their current or last run here: the tail of the terminal's text
(stdout and stderr in order, each marked), the last few figures, whether
it runs, waits for input, and how it ended. All of it is bounded: bytes per
console, consoles per worker, and a console not touched for a while is
forgotten.

Nothing is written for students nobody follows. Which students are
followed is in PostgreSQL (console_follow, migration 014): announced on
'console_follow' when a follow starts, read again every few seconds as a
safety net. A followed student's console is written to run_console (whose
trigger announces it on 'run_console') once when the follow starts and
then at most every WRITE_SECONDS while it changes, by a writer that a run
never waits for (as activity.py's): a slow database delays the teacher's
view, never a run.
"""
import asyncio
import json
import logging
import time
import uuid
from collections import OrderedDict, deque
from datetime import datetime, timezone

from .. import db

log = logging.getLogger(__name__)

FOLLOW_CHANNEL = "console_follow"
MAX_TEXT = 32 << 10  # characters of terminal text kept per console: the tail
MAX_FIGURES = 3  # the last figures kept per console
MAX_FIGURE_BYTES = 3 << 19  # base64 of those figures together; a larger figure is not kept
MAX_CONSOLES = 500  # consoles kept on a worker; the least recently touched go first
MAX_WORKER_FIGURE_BYTES = 64 << 20  # figures of all consoles here; the least recently touched lose theirs first
FORGET_SECONDS = 2 * 3600  # a console not touched for this long is forgotten
GATHER_SECONDS = 0.05  # changes arriving together are written together
WRITE_SECONDS = 0.5  # at most one write of the changed consoles this often
RETRY_SECONDS = 2.0
REFRESH_SECONDS = 5.0  # the followed students read again (a missed announcement)
PRUNE_SECONDS = 3600
KEEP_ROWS = 86400  # seconds: a written console unchanged for this long is deleted
EXIT_FIELDS = ("reason", "message", "explanation")

UPSERT = """
INSERT INTO run_console AS c (user_id, worker, started_at, output, cut, figures, figures_id, running, waiting, exit)
SELECT t.user_id, $2, t.started_at, t.output::jsonb, t.cut, t.figures::jsonb, t.figures_id, t.running, t.waiting,
       t.exit::jsonb
FROM unnest($1::bigint[], $3::timestamptz[], $4::text[], $5::boolean[], $6::text[], $7::text[], $8::boolean[],
            $9::boolean[], $10::text[])
     AS t(user_id, started_at, output, cut, figures, figures_id, running, waiting, exit)
ON CONFLICT (user_id) DO UPDATE SET
    worker = EXCLUDED.worker, started_at = EXCLUDED.started_at, output = EXCLUDED.output, cut = EXCLUDED.cut,
    figures = coalesce(EXCLUDED.figures, c.figures), figures_id = EXCLUDED.figures_id,
    running = EXCLUDED.running, waiting = EXCLUDED.waiting, exit = EXCLUDED.exit, changed_at = now()
WHERE c.started_at <= EXCLUDED.started_at
"""


class Console:
    """One run's console as its student saw it, bounded."""

    def __init__(self):
        self.started_at = datetime.now(timezone.utc)
        self.segments = deque()  # [stream, text], oldest first
        self.size = 0  # characters in segments
        self.cut = False  # older text was dropped
        self.figures = deque()  # base64 PNGs, oldest first
        self.figures_id = uuid.uuid4().hex
        self.running, self.waiting, self.exit = True, False, None
        self.touched = time.monotonic()

    def text(self, stream: str, text: str) -> None:
        self.waiting = False  # what is typed is echoed: the wait is over
        if not text:
            return
        if self.segments and self.segments[-1][0] == stream:
            self.segments[-1][1] += text
        else:
            self.segments.append([stream, text])
        self.size += len(text)
        if self.size > MAX_TEXT:
            self._cut()

    def _cut(self):
        """Keep the last MAX_TEXT characters, from the start of a line (so no
        escape sequence is kept cut in half)."""
        self.cut = True
        while self.size - len(self.segments[0][1]) >= MAX_TEXT:
            self.size -= len(self.segments.popleft()[1])
        first = self.segments[0][1]
        keep = first[self.size - MAX_TEXT:]
        newline = keep.find("\n")
        if newline >= 0:
            keep = keep[newline + 1:]
        self.size -= len(first) - len(keep)
        if keep:
            self.segments[0][1] = keep
        else:
            self.segments.popleft()

    @property
    def figure_bytes(self) -> int:
        return sum(map(len, self.figures))

    def figure(self, data: str) -> None:
        self.waiting = False
        if len(data) > MAX_FIGURE_BYTES:
            return
        self.figures.append(data)
        while len(self.figures) > MAX_FIGURES or self.figure_bytes > MAX_FIGURE_BYTES:
            self.figures.popleft()
        self.figures_id = uuid.uuid4().hex

    def drop_figures(self) -> None:
        self.figures.clear()
        self.figures_id = uuid.uuid4().hex

    def ended(self, message: dict) -> None:
        self.running = self.waiting = False
        self.exit = {k: message[k] for k in EXIT_FIELDS if isinstance(message.get(k), str)}


class Consoles:
    def __init__(self, pool: db.Pool, worker: str, listener=None):
        self.pool = pool
        self.worker = worker
        self.kept: OrderedDict[int, Console] = OrderedDict()  # user id -> Console, the least recently touched first
        self.figure_bytes = 0  # of every console kept
        self.followed: set[int] = set()  # user ids some teacher follows (console_follow)
        self.dirty: set[int] = set()  # followed user ids whose console changed since it was written
        self.heard: set[int] = set()  # follows announced since the last refresh began
        self.figures_written: dict[int, str] = {}  # user id -> the figures_id last written
        self.wake = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []
        if listener is not None:
            listener.listen(FOLLOW_CHANNEL, self._follow_announced)

    # -- the hook (runs call it: RunEvents.run_console) -------------------------------

    def run_console(self, user: dict, message: dict) -> None:
        user_id, kind = user["id"], message.get("type")
        if kind == "started":
            self._forget(user_id)
            console = self.kept[user_id] = Console()
            while len(self.kept) > MAX_CONSOLES:
                self._forget(next(iter(self.kept)))
        else:
            kept = self.kept.get(user_id)
            if kept is None:
                return
            console = kept
            if kind == "output" and isinstance(message.get("data"), str):
                console.text("stderr" if message.get("stream") == "stderr" else "stdout", message["data"])
            elif kind == "image" and isinstance(message.get("data"), str):
                before = console.figure_bytes
                console.figure(message["data"])
                self.figure_bytes += console.figure_bytes - before
                self._bound_figures(user_id)
            elif kind == "input":
                console.waiting = True
            elif kind == "exit":
                console.ended(message)
            else:
                return
        console.touched = time.monotonic()
        self.kept.move_to_end(user_id)
        if user_id in self.followed:
            self.dirty.add(user_id)
            self.wake.set()

    def _bound_figures(self, keep):
        """Within the worker's bound: the figures of the consoles touched
        least recently go (not those of `keep`)."""
        for user_id, console in self.kept.items():
            if self.figure_bytes <= MAX_WORKER_FIGURE_BYTES:
                return
            if user_id != keep and console.figures:
                self.figure_bytes -= console.figure_bytes
                console.drop_figures()

    def _forget(self, user_id):
        console = self.kept.pop(user_id, None)
        if console is not None:
            self.figure_bytes -= console.figure_bytes
        self.figures_written.pop(user_id, None)
        self.dirty.discard(user_id)

    # -- who is followed ------------------------------------------------------------------

    def _follow_announced(self, payload: str) -> None:
        if payload.isdigit():
            self.heard.add(int(payload))
            self._followed_now(int(payload))

    def _followed_now(self, user_id):
        """A follow of `user_id` started: their console here is written whole."""
        self.followed.add(user_id)
        if user_id in self.kept:
            self.figures_written.pop(user_id, None)
            self.dirty.add(user_id)
            self.wake.set()

    async def _refresh_forever(self):
        next_prune = time.monotonic()
        while True:
            self.heard = set()
            try:
                rows = await self.pool.fetch("SELECT DISTINCT user_id FROM console_follow WHERE until > now()")
                now = {r["user_id"] for r in rows}
                for user_id in now - self.followed:
                    self._followed_now(user_id)
                self.followed = now | self.heard  # a follow announced meanwhile stays
                if time.monotonic() > next_prune:
                    next_prune = time.monotonic() + PRUNE_SECONDS
                    await self.pool.execute("DELETE FROM console_follow WHERE until < now() - interval '1 minute'")
                    await self.pool.execute("DELETE FROM run_console WHERE changed_at < now() - $1 * interval '1 second'",
                                            float(KEEP_ROWS))
            except Exception as e:
                if not db.unavailable(e):
                    log.exception("could not read which consoles are followed")
            old = time.monotonic() - FORGET_SECONDS
            for user_id in [u for u, c in self.kept.items() if c.touched < old]:
                self._forget(user_id)
            await asyncio.sleep(REFRESH_SECONDS)

    # -- writing --------------------------------------------------------------------------

    def start(self) -> None:
        self.tasks = [asyncio.ensure_future(self._write_forever()), asyncio.ensure_future(self._refresh_forever())]

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _write_forever(self):
        while True:
            await self.wake.wait()
            await asyncio.sleep(GATHER_SECONDS)
            self.wake.clear()
            written = await self._write_dirty()
            await asyncio.sleep(WRITE_SECONDS if written else RETRY_SECONDS)

    async def _write_dirty(self):
        """Write the changed consoles of followed students in one statement;
        False if the database could not take them now (they stay changed)."""
        ids = [u for u in self.dirty if u in self.followed and u in self.kept]
        self.dirty.clear()
        if not ids:
            return True
        consoles = [self.kept[u] for u in ids]
        figures = [None if self.figures_written.get(u) == c.figures_id else json.dumps(list(c.figures))
                   for u, c in zip(ids, consoles)]
        try:
            await self.pool.execute(
                UPSERT, ids, self.worker, [c.started_at for c in consoles],
                [json.dumps(list(c.segments)) for c in consoles], [c.cut for c in consoles], figures,
                [c.figures_id for c in consoles], [c.running for c in consoles], [c.waiting for c in consoles],
                [json.dumps(c.exit) if c.exit is not None else None for c in consoles])
        except Exception as e:
            if not db.unavailable(e):
                log.exception("could not write the followed consoles; dropped them")
                return True
            self.dirty.update(ids)
            self.wake.set()
            return False
        for u, c in zip(ids, consoles):
            self.figures_written[u] = c.figures_id
        return True
