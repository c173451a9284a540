"""The live class view on this worker: the teachers' sockets, each watching
one class, and what they are sent.

Every change to what the view shows is announced on the PostgreSQL channel
'class_live' with the student's id, by whichever worker or instance made
it (the tables' triggers, migration 007). Each worker listens; it gathers
the ids announced over a moment, reads those students' rows in one
statement (only when it has sockets of their classes) and queues them on
each socket of their classes. A socket's queue holds the newest row per
student, so a slow teacher's browser costs at most one class of rows.

Each socket gets the whole class again (a snapshot) when notifications
may have been missed (the listener's on_gap: its connection was lost, and
again once it is back), and every RESYNC_SECONDS for what no announcement
says (a worker that died and left its students online). The same pass ends
the sockets of sessions that ended and of teachers who no longer teach the
class.

A socket may watch the class in an exam's mode (the proctor view): its rows
carry each student's exam fields (`exam`: their end, their signals summed
up as flags; exams/proctor.py), read with the rows. A new signal and a
change of extra time are announced on 'class_live' too (migration 024).

The class's raised hands (talk.py) come the same way on their own channel,
'class_hands', with the class's id: each socket of the class is sent the
whole queue again (`hands`, in the next snapshot or update), the newest
replacing one not yet sent.

A socket's first message is its snapshot, and nothing older than what it
was sent goes after it: every read of students is numbered as it starts
(`LiveView.reads`), a snapshot drops the rows queued from earlier reads,
and rows from earlier reads than the last snapshot are dropped as they
come (a socket opened, or a resync, while an announced row was read).
"""
import asyncio
import itertools
import logging
import time
from collections import defaultdict
from datetime import datetime, timezone
from typing import Any, Protocol

from .. import db
from ..registry import Registry
from ..accounts import sessions
from ..config import Config
from . import roster, talk

log = logging.getLogger(__name__)

CHANNEL = "class_live"
HANDS_CHANNEL = "class_hands"
GATHER_SECONDS = 0.1
RESYNC_SECONDS = 10.0
CLOSE_SESSION_ENDED = 4401  # as /ws/run's
CLOSE_NOT_YOUR_CLASS = 4403
CLOSE_OTHER_TAB = 4002  # as /ws/run's: a newer tab took this one's place
SOCKETS_PER_USER = 8  # live sockets of one user on a worker; a new one closes the oldest


class ExamFields(Protocol):
    """What the proctor view needs of exams (exams/service.py has it)."""

    async def proctor_fields(self, exam_id: int, usernames: list[str]) -> dict[str, dict[str, Any]]: ...


def _now():
    return datetime.now(timezone.utc).isoformat()


class Watcher:
    """One teacher's socket on one class: `send(message)` (awaitable,
    waits for the client) and `close(code, reason)`; in the exam `exam_id`'s
    mode, or None."""

    def __init__(self, user, token_hash, class_id, send, close, exam_id=None):
        self.user, self.token_hash, self.class_id, self.exam_id = user, token_hash, class_id, exam_id
        self.send, self.close = send, close
        self.pending = {}  # username -> (the newest row not yet sent, the number of its read)
        self.snapshot = None  # a whole class waiting to be sent
        self.snapshot_read = 0  # the number of the read of the last snapshot queued (0: none yet)
        self.hands = None  # the class's queue of hands, waiting to be sent
        self.sending = None
        self.opened = time.monotonic()

    def queue(self, students, read, whole=False):
        """Rows of `students` from read number `read` (LiveView.reads): the
        whole class, or some of its students."""
        if read < self.snapshot_read:
            return  # older than what the socket has been sent (or will be)
        if whole:
            self.snapshot, self.snapshot_read = students, read
            self.pending = {name: queued for name, queued in self.pending.items() if queued[1] > read}
        else:
            for s in students:
                if self.pending.get(s["username"], (None, 0))[1] <= read:
                    self.pending[s["username"]] = (s, read)
        self._wake()

    def queue_hands(self, hands):
        self.hands = hands
        self._wake()

    def _wake(self):
        if not self.snapshot_read:
            return  # its snapshot goes first
        if self.sending is None or self.sending.done():
            self.sending = asyncio.ensure_future(self._send_queued())

    async def _send_queued(self):
        while self.snapshot is not None or self.pending or self.hands is not None:
            if self.snapshot is not None:
                message = {"type": "snapshot", "students": self.snapshot}
                self.snapshot = None
            else:
                message = {"type": "update", "students": [row for row, _ in self.pending.values()]}
                self.pending = {}
            if self.hands is not None:
                message["hands"], self.hands = self.hands, None
            message["now"] = _now()
            await self.send(message)


class LiveView:
    def __init__(self, pool: db.Pool, cfg: Config, classes, listener=None):
        self.pool = pool
        self.cfg = cfg
        self.classes = classes
        self.watchers = Registry()  # class id -> {Watcher}
        self.exams: ExamFields | None = None  # set by worker.py: the exam fields of the proctor view's rows
        self.reads = itertools.count(1)  # numbers the reads of students as they start
        self.announced: set[int] = set()  # student ids announced, not yet read
        self.reading: asyncio.Task[None] | None = None
        self.hands_announced: set[int] = set()  # class ids whose hands changed, not yet read
        self.reading_hands: asyncio.Task[None] | None = None
        self.task: asyncio.Task[None] | None = None
        self.resyncing: asyncio.Task[None] | None = None  # a resync asked for by a gap in the notifications
        self.gap_again = False  # a gap since that resync began
        if listener is not None:  # a notify.Listener, not started yet
            listener.listen(CHANNEL, self._announced)
            listener.listen(HANDS_CHANNEL, self._hands_announced)
            listener.on_gap(self._gap)

    def start(self) -> None:
        self.task = asyncio.ensure_future(self._resync_forever())

    async def close(self) -> None:
        for task in (self.task, self.resyncing, self.reading_hands):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        for watcher in self.watchers.everything():
            watcher.close(1012, "server restarting")

    # -- sockets --------------------------------------------------------------

    async def watch(self, user: dict, token_hash: bytes, class_id: int, send, close,
                    exam_id: int | None = None) -> Watcher:
        """A teacher's socket on a class (its rights verified by the caller,
        to the exam `exam_id` too, if given: its proctor view): sent the
        whole class at once, then every change."""
        mine = sorted((w for w in self.watchers.everything() if w.user["id"] == user["id"]),
                      key=lambda w: w.opened)
        for old in mine[:max(0, len(mine) - SOCKETS_PER_USER + 1)]:
            self.unwatch(old)
            old.close(CLOSE_OTHER_TAB, "The class view was opened in another tab.")
        watcher = Watcher(user, token_hash, class_id, send, close, exam_id)
        self.watchers[class_id].add(watcher)
        read = next(self.reads)
        students, hands = await self._class(class_id), await talk.queues(self.pool, [class_id])
        fields = await self._exam_fields({class_id: students}, [watcher])
        watcher.queue_hands(hands[class_id])  # goes with the snapshot
        watcher.queue(_rows(watcher, students, fields), read, whole=True)
        return watcher

    def unwatch(self, watcher: Watcher) -> None:
        self.watchers.discard(watcher.class_id, watcher)

    # -- announcements ---------------------------------------------------------

    def _announced(self, payload: str) -> None:
        if not self.watchers or not payload.isdigit():
            return  # nobody here watches a class: nothing to read
        self.announced.add(int(payload))
        if self.reading is None:
            self.reading = asyncio.ensure_future(self._read_announced())

    async def _read_announced(self):
        await asyncio.sleep(GATHER_SECONDS)
        ids, self.announced = list(self.announced), set()
        self.reading = None  # what is announced from now on is read by the next reader
        if not self.watchers:
            return
        try:
            changed, read = defaultdict(list), next(self.reads)
            for class_id, student in await roster.students(self.pool, self.cfg, list(self.watchers), ids):
                changed[class_id].append(student)
            watchers = [w for class_id in changed for w in self.watchers.get(class_id, ())]
            fields = await self._exam_fields(changed, watchers)
            for watcher in watchers:
                watcher.queue(_rows(watcher, changed[watcher.class_id], fields), read)
        except Exception as e:
            if not db.unavailable(e):  # the next resync sends them
                log.exception("could not read the students announced for the live view")

    def _hands_announced(self, payload: str) -> None:
        if not payload.isdigit() or int(payload) not in self.watchers:
            return
        self.hands_announced.add(int(payload))
        if self.reading_hands is None:
            self.reading_hands = asyncio.ensure_future(self._read_hands())

    async def _read_hands(self):
        await asyncio.sleep(GATHER_SECONDS)
        ids, self.hands_announced = [c for c in self.hands_announced if c in self.watchers], set()
        self.reading_hands = None
        try:
            self._queue_hands(await talk.queues(self.pool, ids))
        except Exception as e:
            if not db.unavailable(e):  # the next resync sends them
                log.exception("could not read the hands announced for the live view")

    def _queue_hands(self, queues):
        for class_id, hands in queues.items():
            for watcher in self.watchers.get(class_id, ()):
                watcher.queue_hands(hands)

    async def _class(self, class_id):
        return [s for _, s in await roster.students(self.pool, self.cfg, [class_id])]

    async def _exam_fields(self, by_class, watchers):
        """{exam id: {username: exam fields}} of the students `by_class`
        (class id -> rows), for the exams some of `watchers` proctor: one
        read per exam."""
        exams = {w.exam_id: w.class_id for w in watchers if w.exam_id is not None}
        if not exams or self.exams is None:
            return {}
        return {exam_id: await self.exams.proctor_fields(exam_id, [s["username"] for s in by_class.get(class_id, ())])
                for exam_id, class_id in exams.items()}

    # -- now and then ------------------------------------------------------------

    def _gap(self) -> None:
        """Notifications may have been missed: send every socket its whole
        class. A gap during a resync may postdate what it read: one more
        resync follows it."""
        if not self.watchers:
            return
        self.gap_again = True
        if self.resyncing is None or self.resyncing.done():
            self.resyncing = asyncio.ensure_future(self._resync_after_gaps())

    async def _resync_after_gaps(self):
        while self.gap_again:
            self.gap_again = False
            await self._resync_logged()

    async def _resync_forever(self):
        while True:
            await asyncio.sleep(RESYNC_SECONDS)
            await self._resync_logged()

    async def _resync_logged(self):
        try:
            await self.resync()
        except Exception as e:
            if not db.unavailable(e):
                log.exception("the live view's resync failed")

    async def resync(self) -> None:
        """End the sockets whose session ended or whose teacher no longer
        teaches the class; send the others their whole class again."""
        everyone = self.watchers.everything()
        if not everyone:
            return
        valid = await sessions.still_valid(self.pool, {w.token_hash for w in everyone})
        teaching = await self.classes.teaching_pairs([w.user["id"] for w in everyone])
        for w in everyone:
            if w.token_hash not in valid:
                self.unwatch(w)
                w.close(CLOSE_SESSION_ENDED, "Your session has ended.")
            elif w.user["role"] != "admin" and (w.class_id, w.user["id"]) not in teaching:
                self.unwatch(w)
                w.close(CLOSE_NOT_YOUR_CLASS, "You no longer teach this class.")
        by_class, read = defaultdict(list), next(self.reads)
        for class_id, student in await roster.students(self.pool, self.cfg, list(self.watchers)):
            by_class[class_id].append(student)
        hands = await talk.queues(self.pool, list(self.watchers))
        self._queue_hands(hands)  # goes with the snapshots
        watchers = self.watchers.everything()
        fields = await self._exam_fields(by_class, watchers)
        for w in watchers:
            w.queue(_rows(w, by_class.get(w.class_id, []), fields), read, whole=True)


def _rows(watcher, students, fields):
    """The rows as `watcher` is sent them: in an exam's mode, each with the
    student's `exam` fields (None: not known, as of an exam deleted)."""
    if watcher.exam_id is None:
        return students
    theirs = fields.get(watcher.exam_id, {})
    return [{**s, "exam": theirs.get(s["username"])} for s in students]
