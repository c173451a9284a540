"""Starters a student kept their own version of: when a teacher's push
leaves a copy the student changed as it is (files/push.py, 'keep'), the
student is told (an inbox message to their open IDEs, and a notice kept
until they act on it, for the IDEs they open later), with the starter's
place in the course folder, so their IDE can show the difference. They
take it as a new file beside theirs (`lesson2 (teacher).py`, as a push
that sends new files does) or put it aside. Knows nothing of HTTP."""
from ..db import Pool
from ..errors import Refused
from ..files.area import Area
from . import classes as classes_
from .classes import Classes

NOT_PENDING = (404, "no_such_starter", "There is no new version of that file waiting for you. "
                                       "Your teacher may have sent it again, or you took it already.")


class Starters:
    def __init__(self, pool: Pool, classes: Classes, inbox, files):
        self.pool = pool
        self.classes = classes
        self.inbox = inbox  # server.inbox.Inbox: the students' open IDEs
        self.files = files

    async def kept_theirs(self, found: dict, area: Area, skipped: dict, ids: dict) -> None:
        """After a push into the class `found` from `area`: tell each student
        whose changed copy was kept (`skipped` {username: [{path, reason}]})."""
        kept = [(ids[u], s["path"]) for u, items in skipped.items() for s in items if s["reason"] == "changed"]
        if not kept:
            return
        async with self.pool.transaction() as conn:
            rows = await conn.fetch(
                """INSERT INTO starter_notices (user_id, class_id, path)
                   SELECT u, $1, p FROM unnest($2::bigint[], $3::text[]) AS t(u, p)
                   ON CONFLICT (user_id, class_id, path) DO UPDATE SET sent_at = now()
                   RETURNING user_id, path, sent_at""", found["id"], [u for u, _ in kept], [p for _, p in kept])
            by_path: dict[str, list] = {}
            for r in rows:
                by_path.setdefault(r["path"], []).append(r)
            for path, got in by_path.items():
                await self.inbox.send(conn, [r["user_id"] for r in got],
                                      _notice(found["id"], found["name"], area, path, got[0]["sent_at"]))

    async def pending_for(self, user: dict) -> list[dict]:
        """The starters waiting for `user`, in the classes they are in now."""
        rows = await self.pool.fetch(
            """SELECT n.class_id, n.path, n.sent_at, c.name, c.is_default FROM starter_notices n
               JOIN classes c ON c.id = n.class_id
               JOIN class_membership m ON m.class_id = n.class_id AND m.user_id = n.user_id
               WHERE n.user_id = $1 ORDER BY n.sent_at""", user["id"])
        return [_notice(r["class_id"], r["name"], classes_.area_of(r["class_id"], r["is_default"]), r["path"],
                        r["sent_at"]) for r in rows]

    async def take(self, student: dict, class_id: int, path: str) -> dict:
        """Copy the starter beside the student's own file, under a free name:
        {"path": where it was saved}."""
        found, area = await self._pending(student, class_id, path)
        done = await self.files.push(student["username"], area, tuple(path.split("/")), [student["username"]],
                                     {}, "new_file")
        sent = (done.sent_as_new.get(student["username"]) or [{}])[0].get("as")
        if sent is None:
            updated = done.copied.get(student["username"]) or done.updated.get(student["username"]) or \
                done.up_to_date.get(student["username"])
            if not updated:
                why = (done.skipped.get(student["username"]) or [{}])[0].get("reason") or \
                    done.failed.get(student["username"]) or "it could not be copied"
                raise Refused(409, "not_taken", f"The new version of {path} could not be saved in your files "
                                                f"({why}). Try again, or ask your teacher.")
            sent = path  # theirs was gone or the same as the starter: it is in its place now
        await self._drop(student, found["id"], path)
        return {"path": sent}

    async def put_aside(self, student: dict, class_id: int, path: str) -> None:
        found, _ = await self._pending(student, class_id, path)
        await self._drop(student, found["id"], path)

    async def _pending(self, student, class_id, path):
        found = await self.classes.member_of(student, class_id)
        waiting = await self.pool.fetchval(
            "SELECT 1 FROM starter_notices WHERE user_id = $1 AND class_id = $2 AND path = $3",
            student["id"], found["id"], path)
        if not waiting:
            raise Refused(*NOT_PENDING)
        return found, classes_.area_of(found["id"], found["is_default"])

    async def _drop(self, student, class_id, path):
        await self.pool.execute("DELETE FROM starter_notices WHERE user_id = $1 AND class_id = $2 AND path = $3",
                                student["id"], class_id, path)


def _notice(class_id, class_name, area, path, sent_at):
    return {"type": "starter", "class": class_id, "class_name": class_name, "area": area.key, "path": path,
            "sent_at": sent_at.isoformat()}
