"""Talking to the class: a teacher's message to the class or to some of its
students, which appears in their open IDEs at once (server/inbox.py), and
the students' raised hands, which the class's teachers see as a queue on
their live socket (live.py, on the channel 'class_hands' that the hands
table's trigger announces, migration 012). Knows nothing of HTTP.

Everything is bounded: a message's and a note's length, messages per
class and minute, raises per student and window (per student, never per
address: a class shares one), one open hand per student and class.
"""
from datetime import datetime

from ..db import Pool
from ..errors import Refused
from ..inbox import Inbox
from .classes import Classes

MAX_TEXT = 500  # characters of a message
MAX_NOTE = 200  # characters of a hand's note
MAX_FILE = 300  # characters of the file a hand names
MAX_LINE = 1_000_000
MESSAGES_PER_MINUTE = 6  # per class, whoever of its teachers sends them
RECENT_SECONDS = 600  # an IDE opened this long after a message still shows it
KEEP_SECONDS = 86400  # older messages are removed as new ones are sent
HAND_RAISES = 10  # raises (or changes of a raised hand) per student and class ...
HAND_WINDOW_SECONDS = 600  # ... in this window
MAX_QUEUE = 200  # hands a teacher's socket is sent at once (one per student)


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when else None


def _message(row, class_name):
    return {"type": "class_message", "id": row["id"], "class": row["class_id"], "class_name": class_name,
            "from": row["sender_name"], "text": row["body"], "at": _iso(row["sent_at"])}


def _hand(row):
    return {"username": row["username"], "display_name": row["display_name"], "raised_at": _iso(row["raised_at"]),
            "note": row["note"], "file": row["file"], "line": row["line"]}


def _clean(text, what, limit):
    """`text` without surrounding blanks and control characters, or Refused 400."""
    text = "".join(c for c in text if c in "\n\t" or c.isprintable()).strip()
    if len(text) > limit:
        raise Refused(400, "too_long", f"{what} is {len(text)} characters long; at most {limit} fit.")
    return text


QUEUE = """
SELECT h.class_id, u.username, u.display_name, h.raised_at, h.note, h.file, h.line
FROM hands h JOIN users u ON u.id = h.user_id
WHERE h.up AND h.class_id = ANY($1::bigint[]) AND u.active
  AND EXISTS (SELECT 1 FROM class_membership m WHERE m.class_id = h.class_id AND m.user_id = h.user_id)
ORDER BY h.class_id, h.raised_at, u.username
"""


async def queues(pool: Pool, class_ids: list[int]) -> dict[int, list[dict]]:
    """{class id: its raised hands, oldest first (at most MAX_QUEUE)} of these classes."""
    found: dict[int, list[dict]] = {c: [] for c in class_ids}
    for row in await pool.fetch(QUEUE, class_ids):
        if len(found[row["class_id"]]) < MAX_QUEUE:
            found[row["class_id"]].append(_hand(row))
    return found


class Talk:
    def __init__(self, pool: Pool, classes: Classes, inbox: Inbox):
        self.pool = pool
        self.classes = classes
        self.inbox = inbox

    # -- messages ----------------------------------------------------------------

    async def broadcast(self, teacher: dict, class_id: int, text: str, usernames: list[str] | None = None) -> dict:
        """Send `text` to the active students of the class (or to those
        `usernames` of them): the message as their IDEs show it, and how
        many it was sent to."""
        found = await self.classes.teaching(teacher, class_id)
        text = _clean(text, "The message", MAX_TEXT)
        if not text:
            raise Refused(400, "empty_message", "Write a message first.")
        students = {s["username"]: s["id"] for s in await self.classes.students(found["id"])}
        if usernames is not None:
            chosen = list(dict.fromkeys(usernames))
            if not chosen:
                raise Refused(400, "no_students", "Choose at least one student, or send to the whole class.")
            unknown = [u for u in chosen if u not in students]
            if unknown:
                raise Refused(400, "not_in_class", f"Not active students of {found['name']}: "
                              + ", ".join(unknown[:20]) + (" …" if len(unknown) > 20 else ""), users=unknown[:100])
            students = {u: students[u] for u in chosen}
        async with self.pool.transaction() as conn:
            # One sender at a time per class, so the count below is right.
            await conn.execute("SELECT 1 FROM classes WHERE id = $1 FOR NO KEY UPDATE", found["id"])
            recent = await conn.fetchval(
                "SELECT count(*) FROM class_messages WHERE class_id = $1 AND sent_at > now() - interval '1 minute'",
                found["id"])
            if recent >= MESSAGES_PER_MINUTE:
                raise Refused(429, "too_many_messages", f"{MESSAGES_PER_MINUTE} messages were sent to this class in the "
                              "last minute. Wait a moment, then send again.", retry_after=20)
            await conn.execute("DELETE FROM class_messages WHERE class_id = $1 AND sent_at < now() - $2 * interval '1 second'",
                               found["id"], float(KEEP_SECONDS))
            row = await conn.fetchrow(
                """INSERT INTO class_messages (class_id, sender_id, sender_name, body, recipients, whole_class)
                   VALUES ($1, $2, $3, $4, $5, $6) RETURNING id, class_id, sender_name, body, sent_at""",
                found["id"], teacher["id"], teacher["display_name"], text, list(students.values()), usernames is None)
            message = _message(row, found["name"])
            await self.inbox.send(conn, list(students.values()), message)
        return {"message": message, "sent_to": len(students)}

    async def recent_for(self, user: dict) -> dict:
        """What an IDE opened now shows: the latest message of each of the
        user's classes sent to them in the last RECENT_SECONDS, and their hands up."""
        rows = await self.pool.fetch(
            """SELECT DISTINCT ON (m.class_id) m.id, m.class_id, m.sender_name, m.body, m.sent_at, c.name
               FROM class_messages m JOIN classes c ON c.id = m.class_id
               WHERE m.sent_at > now() - $2 * interval '1 second' AND $1 = ANY(m.recipients)
                 AND EXISTS (SELECT 1 FROM class_membership s WHERE s.class_id = m.class_id AND s.user_id = $1)
               ORDER BY m.class_id, m.id DESC""", user["id"], float(RECENT_SECONDS))
        hands = await self.pool.fetch(
            "SELECT class_id, raised_at, note, file, line FROM hands WHERE user_id = $1 AND up ORDER BY class_id",
            user["id"])
        return {"messages": sorted((_message(r, r["name"]) for r in rows), key=lambda m: m["id"]),
                "hands": [{"class": h["class_id"], "raised_at": _iso(h["raised_at"]), "note": h["note"],
                           "file": h["file"], "line": h["line"]} for h in hands]}

    # -- hands ---------------------------------------------------------------------

    async def queue(self, teacher: dict, class_id: int) -> list[dict]:
        """The class's raised hands, oldest first, for a teacher of it."""
        found = await self.classes.teaching(teacher, class_id)
        return (await queues(self.pool, [found["id"]]))[found["id"]]

    async def _student_in(self, user, class_id):
        if user["role"] != "student":
            raise Refused(403, "students_only", "Only students raise a hand; teachers see the hands in the Class panel.")
        return await self.classes.member_of(user, class_id)

    async def raise_hand(self, student: dict, class_id: int, note: str = "", file: str | None = None,
                         line: int | None = None) -> dict:
        """Raise the student's hand in the class (raised already: its note
        and place are updated; it keeps its turn in the queue)."""
        found = await self._student_in(student, class_id)
        note = _clean(note, "The note", MAX_NOTE)
        if file is not None:
            file = _clean(file, "The file name", MAX_FILE) or None
        if line is not None and not 1 <= line <= MAX_LINE:
            raise Refused(400, "bad_line", f"The line must be a number from 1 to {MAX_LINE}.")
        async with self.pool.transaction() as conn:
            row = await conn.fetchrow(
                """INSERT INTO hands AS h (class_id, user_id, up, raised_at, note, file, line, window_at, raises)
                   VALUES ($1, $2, true, now(), $3, $4, $5, now(), 1)
                   ON CONFLICT (class_id, user_id) DO UPDATE SET
                       up = true,
                       raised_at = CASE WHEN h.up THEN h.raised_at ELSE now() END,
                       note = $3, file = $4, line = $5,
                       window_at = CASE WHEN h.window_at < now() - $7 * interval '1 second' THEN now() ELSE h.window_at END,
                       raises = CASE WHEN h.window_at < now() - $7 * interval '1 second' THEN 1 ELSE h.raises + 1 END
                   WHERE h.window_at < now() - $7 * interval '1 second' OR h.raises < $6
                   RETURNING raised_at""",
                found["id"], student["id"], note, file, line, HAND_RAISES, float(HAND_WINDOW_SECONDS))
            if row is None:
                raise Refused(429, "too_many_hands", "You have raised your hand many times in the last few minutes. "
                              "Wait a little: your teacher will see you.", retry_after=60)
            hand = {"class": found["id"], "raised_at": _iso(row["raised_at"]), "note": note, "file": file, "line": line}
            await self.inbox.send(conn, [student["id"]], {"type": "hand", "up": True, **hand})  # their other tabs
        return hand

    async def lower_hand(self, student: dict, class_id: int) -> None:
        """The student lowers their own hand (nothing happens when it is down)."""
        found = await self._student_in(student, class_id)
        await self._lower(found["id"], student["id"], None)

    async def answer(self, teacher: dict, class_id: int, username: str) -> None:
        """A teacher of the class marks a student's hand answered: it goes
        down, and the student's IDE is told who answered."""
        found = await self.classes.teaching(teacher, class_id)
        user_id = await self.pool.fetchval("SELECT id FROM users WHERE username = $1", username)
        if user_id is None or not await self._lower(found["id"], user_id, teacher["display_name"]):
            raise Refused(404, "no_such_hand", f"{username} has no hand up in {found['name']}: someone may have "
                                               "answered it already.")

    async def _lower(self, class_id, user_id, answered_by):
        async with self.pool.transaction() as conn:
            lowered = await conn.fetchval(
                "UPDATE hands SET up = false WHERE class_id = $1 AND user_id = $2 AND up RETURNING true",
                class_id, user_id)
            if lowered:
                await self.inbox.send(conn, [user_id], {"type": "hand", "class": class_id, "up": False,
                                                        "answered_by": answered_by})
        return bool(lowered)
