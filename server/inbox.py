"""Messages for the open IDEs of chosen users, on every worker and instance:
what a teacher tells a class, a hand that was answered.

Whoever sends (teaching) does not know where a user's IDE sockets are:
`send(user ids, message)` announces the message on the PostgreSQL channel
'inbox' (notify.py), with the ids, in as many notifications as the ids
need (a payload is at most 8000 bytes). Every worker listens and queues
the message on the sockets of its own that belong to those users (the
IDE's /ws/run attaches itself with `open` after its `watch`). A socket
holds at most PENDING_MAX messages a slow browser has not taken yet; the
oldest give way, and the page is told it missed some.

When notifications may have been missed (the listener's gap), every
socket is sent `{"type": "missed"}`: the page asks again for what it
shows (GET /api/talk).

The module is below both runs (which owns the sockets) and teaching
(which owns what is said), so neither imports the other.
"""
import asyncio
import json
import logging
from collections import deque

from . import notify
from .registry import Registry

log = logging.getLogger(__name__)

CHANNEL = "inbox"
PENDING_MAX = 16
MAX_MESSAGE_BYTES = 4000  # a message with room left for ids in its notification
MISSED = {"type": "missed"}


class Box:
    """One IDE socket: `send(message)`, awaitable (waits for the browser)."""

    def __init__(self, user_id, send):
        self.user_id = user_id
        self.send = send
        self.pending = deque()
        self.overflowed = False
        self.task = None

    def queue(self, message):
        if len(self.pending) >= PENDING_MAX:
            self.pending.popleft()
            self.overflowed = True
        self.pending.append(message)
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self._flush())

    async def _flush(self):
        while self.pending:
            if self.overflowed:
                self.overflowed = False
                await self.send(MISSED)
                continue
            await self.send(self.pending.popleft())


class Inbox:
    def __init__(self, pool, listener):
        self.pool = pool
        self.boxes = Registry()  # user id -> {Box}
        listener.listen(CHANNEL, self._heard)
        listener.on_gap(self._gap)

    def open(self, user_id: int, send) -> Box:
        """`send` gets the messages for `user_id` from now on."""
        box = Box(user_id, send)
        self.boxes[user_id].add(box)
        return box

    def close(self, box: Box) -> None:
        self.boxes.discard(box.user_id, box)
        if box.task is not None:
            box.task.cancel()

    async def send(self, conn, user_ids: list[int], message: dict) -> None:
        """Tell `message` (a JSON object with a "type") to every open IDE of
        these users, once `conn`'s transaction commits (`conn` may be the pool)."""
        text = json.dumps(message, ensure_ascii=False)
        size = len(text.encode())
        if size > MAX_MESSAGE_BYTES:
            raise ValueError(f"an inbox message is at most {MAX_MESSAGE_BYTES} bytes")
        per_notification = max(1, (notify.MAX_PAYLOAD - size - 32) // 21)  # 20 digits and a comma each
        ids = sorted(set(user_ids))
        for start in range(0, len(ids), per_notification):
            chunk = ids[start:start + per_notification]
            await notify.send(conn, CHANNEL, '{"u": %s, "m": %s}' % (json.dumps(chunk), text))

    def _heard(self, payload):
        if not self.boxes:
            return
        try:
            found = json.loads(payload)
            ids, message = found["u"], found["m"]
            if not isinstance(message, dict) or not isinstance(ids, list):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            log.warning("a malformed inbox message was ignored")
            return
        for user_id in ids:
            for box in self.boxes.get(user_id, ()):
                box.queue(message)

    def _gap(self):
        for boxes in self.boxes.values():
            for box in boxes:
                box.queue(MISSED)
