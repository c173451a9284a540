"""Teachers' sockets that follow a student's console (a student's detail),
on this worker; consoles.py is the side of the runs.

A socket's follow is a row of console_follow (migration 014), renewed
while the socket follows, so that whichever worker or instance runs the
student writes their console to run_console (at most every half second
while it changes). Each write is announced on 'run_console' with the
student's id; this worker gathers the ids announced over a moment, reads
the consoles it has followers for in one statement and queues each on its
followers. A follower's queue holds the newest console only, so a slow
teacher's browser costs one console. Figures are read and sent only when
they changed since the socket was last sent them (a message without
`figures` keeps the ones shown).
"""
import asyncio
import itertools
import json
import logging

from .. import db
from ..registry import Registry

log = logging.getLogger(__name__)

CHANNEL = "run_console"
GATHER_SECONDS = 0.05
RENEW_SECONDS = 10.0
FOLLOW_SECONDS = 30.0  # a follow not renewed for this long is over (its worker died)

READ = """
SELECT k.user_id, c.started_at, c.changed_at, c.output, c.cut, c.running, c.waiting, c.exit, c.figures_id,
       CASE WHEN k.known IS NOT NULL AND c.figures_id = k.known THEN NULL ELSE coalesce(c.figures, '[]') END AS figures
FROM unnest($1::bigint[], $2::text[]) AS k(user_id, known) JOIN run_console c ON c.user_id = k.user_id
"""
RENEW = """
INSERT INTO console_follow (follower, user_id, until)
SELECT t.follower, t.user_id, now() + $3 * interval '1 second'
FROM unnest($1::text[], $2::bigint[]) AS t(follower, user_id)
ON CONFLICT (follower) DO UPDATE SET until = EXCLUDED.until
"""
START = """
INSERT INTO console_follow (follower, user_id, until) VALUES ($1, $2, now() + $3 * interval '1 second')
ON CONFLICT (follower) DO UPDATE SET user_id = EXCLUDED.user_id, until = EXCLUDED.until
"""


def _empty(username):
    """The console of a student with no run to show."""
    return {"username": username, "started_at": None, "output": [], "cut": False, "running": False,
            "waiting": False, "exit": None, "figures_id": None, "figures": [], "order": ()}


def _console(username, row):
    return {"username": username, "started_at": row["started_at"].isoformat(), "output": json.loads(row["output"]),
            "cut": row["cut"], "running": row["running"], "waiting": row["waiting"],
            "exit": json.loads(row["exit"]) if row["exit"] is not None else None, "figures_id": row["figures_id"],
            "figures": json.loads(row["figures"]) if row["figures"] is not None else None,
            "order": (row["started_at"], row["changed_at"])}


class Follower:
    """One teacher's socket: `send(message)` (awaitable, waits for the
    client), the student it follows, the newest console not yet sent."""

    def __init__(self, key, send, reread):
        self.key, self.send, self._reread = key, send, reread
        self.student = None  # (user id, username) followed, or None
        self.pending = None
        self.order = ()  # (started_at, changed_at) of the newest console queued: an older one is stale
        self.figures_sent = None  # figures_id of the figures the socket shows
        self.sending = None
        self.closed = False  # its socket closed: it follows nobody any more

    def reset(self, student):
        self.student, self.pending, self.order, self.figures_sent = student, None, (), None

    def queue(self, console):
        if self.student is None or console["username"] != self.student[1] or console["order"] < self.order:
            return
        self.order, self.pending = console["order"], console
        if self.sending is None or self.sending.done():
            self.sending = asyncio.ensure_future(self._send_queued())

    async def _send_queued(self):
        while self.pending is not None:
            console, self.pending = self.pending, None
            if self.student is None or console["username"] != self.student[1]:
                continue  # it follows someone else now
            message = {"type": "console", **{k: v for k, v in console.items() if k not in ("figures_id", "order")}}
            if console["figures"] is None:
                del message["figures"]  # unchanged
                if console["figures_id"] != self.figures_sent:  # read against figures since replaced
                    self.figures_sent = None
                    self._reread(self.student[0])
            else:
                self.figures_sent = console["figures_id"]
            await self.send(message)


class Following:
    def __init__(self, pool: db.Pool, worker: str, listener=None):
        self.pool = pool
        self.worker = worker
        self.numbers = itertools.count(1)
        self.followers = Registry()  # student id -> {Follower}
        self.announced: set[int] = set()  # student ids whose console was written, not yet read
        self.reading = None
        self.task: asyncio.Task[None] | None = None
        if listener is not None:
            listener.listen(CHANNEL, self._announced)
            listener.on_gap(lambda: self._reread(*self.followers))

    def start(self) -> None:
        self.task = asyncio.ensure_future(self._renew_forever())

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        keys = [f.key for f in self.followers.everything()]
        self.followers.clear()
        try:
            await self.pool.execute("DELETE FROM console_follow WHERE follower = ANY($1::text[])", keys)
        except Exception as e:  # they expire
            log.warning("could not end this worker's follows of consoles (%s)", type(e).__name__)

    def follower(self, send) -> Follower:
        """A socket's Follower, following nobody yet."""
        return Follower(f"{self.worker}:{next(self.numbers)}", send, self._reread)

    async def follow(self, follower: Follower, user_id: int, username: str) -> None:
        """`follower` follows the student `user_id` from now on (and nobody
        else): sent their console at once, then whenever it changes."""
        await self.pool.execute(START, follower.key, user_id, FOLLOW_SECONDS)
        if follower.closed:  # while it was recorded
            return await self._end_quietly(follower.key)
        self._leave(follower)
        follower.reset((user_id, username))
        self.followers[user_id].add(follower)
        found = await self._read([user_id])
        if not found:
            follower.queue(_empty(username))

    async def unfollow(self, follower: Follower) -> None:
        if self._leave(follower):
            await self.pool.execute("DELETE FROM console_follow WHERE follower = $1", follower.key)

    def closed(self, follower: Follower) -> None:
        """The socket closed: its follow ends (or expires, should this fail)."""
        follower.closed = True
        if self._leave(follower):
            asyncio.ensure_future(self._end_quietly(follower.key))

    async def _end_quietly(self, key):
        try:
            await self.pool.execute("DELETE FROM console_follow WHERE follower = $1", key)
        except Exception as e:
            if not db.unavailable(e):
                log.exception("could not end a follow of a console")

    def _leave(self, follower):
        """Take `follower` off its student: True if it followed one."""
        if follower.student is None:
            return False
        self.followers.discard(follower.student[0], follower)
        follower.reset(None)
        return True

    # -- consoles written -------------------------------------------------------------------

    def _announced(self, payload: str) -> None:
        if payload.isdigit() and int(payload) in self.followers:
            self._reread(int(payload))

    def _reread(self, *user_ids):
        self.announced.update(user_ids)
        if self.announced and self.reading is None:
            self.reading = asyncio.ensure_future(self._read_announced())

    async def _read_announced(self):
        await asyncio.sleep(GATHER_SECONDS)
        ids, self.announced = [u for u in self.announced if u in self.followers], set()
        self.reading = None  # what is announced from now on is read by the next reader
        try:
            await self._read(ids)
        except Exception as e:
            if not db.unavailable(e):  # the next change is read again
                log.exception("could not read the followed consoles")

    async def _read(self, user_ids):
        """Read the consoles of `user_ids` and queue them on their followers:
        the ids that have one."""
        if not user_ids:
            return set()
        known = []
        for user_id in user_ids:
            shown = {f.figures_sent for f in self.followers.get(user_id, ())}
            known.append(shown.pop() if len(shown) == 1 else None)
        found = set()
        for row in await self.pool.fetch(READ, user_ids, known):
            found.add(row["user_id"])
            for follower in list(self.followers.get(row["user_id"], ())):
                follower.queue(_console(follower.student[1], row))
        return found

    async def _renew_forever(self):
        while True:
            await asyncio.sleep(RENEW_SECONDS)
            pairs = [(f.key, user_id) for user_id, fs in self.followers.items() for f in fs]
            if not pairs:
                continue
            try:
                await self.pool.execute(RENEW, [k for k, _ in pairs], [u for _, u in pairs], FOLLOW_SECONDS)
            except Exception as e:
                if not db.unavailable(e):
                    log.exception("could not renew the follows of consoles")
