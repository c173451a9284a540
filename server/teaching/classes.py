"""Classes: groups of students that teachers own, who is in each, and who
may reach what because of them. Knows nothing of HTTP.

An account in no class is in the default class (the view
class_membership says so, once, for every statement), so a school that
never makes classes carries on as one class. Admins are in none and
reach all. The default class's course folder is STORAGE_ROOT/course/
(area spec `course`, as before classes); any other class's is
STORAGE_ROOT/classes/<id>/ (area spec `class/<id>`).
"""
import re

import asyncpg

from ..accounts import rules
from ..accounts.audit import audit
from ..accounts.memberships import valid_name
from ..db import Pool
from ..errors import Refused
from ..files.area import Area

CLASS_SPEC = re.compile(r"^class/([0-9]{1,18})\Z")
CHECKS_SPEC = re.compile(r"^checks/([0-9]{1,18})\Z")
MAX_MEMBERS_CHANGE = 1000  # usernames in one change of a class's members
NOT_A_CLASS = (404, "no_such_class", "There is no such class.")


def area_of(class_id: int, is_default: bool) -> Area:
    return Area.course() if is_default else Area.of_class(class_id)


def class_id_of(spec: str) -> int | None:
    """The class a course folder's area spec names (None: the default
    class, `course`), or Refused 404."""
    if spec == "course":
        return None
    m = CLASS_SPEC.match(spec)
    if not m:
        raise Refused(*NOT_A_CLASS)
    return int(m.group(1))


def spec_of(class_id: int, is_default: bool) -> str:
    """The area spec the files API takes for a class's course folder."""
    return "course" if is_default else f"class/{class_id}"


def _public(row, staff):
    found = {"id": row["id"], "name": row["name"], "default": row["is_default"],
             "area": spec_of(row["id"], row["is_default"])}
    if staff:
        found["teachers"] = list(row["teachers"])
        found["students"] = row["students"]
        found["checks"] = f"checks/{row['id']}"  # the class's exercises (exercises/), its teachers' only
    return found


class Classes:
    def __init__(self, pool: Pool):
        self.pool = pool

    # -- reading ------------------------------------------------------------

    async def visible(self, user: dict) -> list[dict]:
        """The classes `user` teaches or is in (an admin: every class), the
        default class first; staff also see their teachers and how many
        active students each has."""
        rows = await self.pool.fetch(
            """SELECT c.id, c.name, c.is_default,
                      (SELECT count(*) FROM class_membership m JOIN users u ON u.id = m.user_id
                       WHERE m.class_id = c.id AND u.role = 'student' AND u.active) AS students,
                      ARRAY(SELECT u.username FROM class_membership m JOIN users u ON u.id = m.user_id
                            WHERE m.class_id = c.id AND u.role = 'teacher' ORDER BY u.username) AS teachers
               FROM classes c
               WHERE $2 OR c.id IN (SELECT class_id FROM class_membership WHERE user_id = $1)
               ORDER BY c.is_default DESC, lower(c.name)""",
            user["id"], user["role"] == "admin")
        return [_public(r, user["role"] != "student") for r in rows]

    async def find(self, class_id: int | None) -> asyncpg.Record:
        """(id, name, is_default) of a class (None: the default one), or Refused 404."""
        row = await self.pool.fetchrow(
            "SELECT id, name, is_default FROM classes WHERE CASE WHEN $1::bigint IS NULL THEN is_default "
            "ELSE id = $1 END", class_id)
        if row is None:
            raise Refused(*NOT_A_CLASS)
        return row

    async def _membership(self, user, class_id):
        """(id, name, is_default, member) of a class (None: the default
        one); member: `user` is in it (admins are in every class)."""
        row = await self.pool.fetchrow(
            """SELECT c.id, c.name, c.is_default,
                      $2 OR EXISTS (SELECT 1 FROM class_membership m WHERE m.class_id = c.id AND m.user_id = $3)
                      AS member
               FROM classes c WHERE CASE WHEN $1::bigint IS NULL THEN c.is_default ELSE c.id = $1 END""",
            class_id, user["role"] == "admin", user["id"])
        if row is None:
            raise Refused(*NOT_A_CLASS)
        return row

    async def teaching(self, user: dict, class_id: int | None) -> asyncpg.Record:
        """The class (None: the default one), if `user` teaches it or is an admin."""
        row = await self._membership(user, class_id)
        if not row["member"] or user["role"] == "student":
            raise Refused(403, "not_your_class", "You do not teach this class.")
        return row

    async def member_of(self, user: dict, class_id: int) -> asyncpg.Record:
        """The class, if `user` is in it (teachers and admins included)."""
        row = await self._membership(user, class_id)
        if not row["member"]:
            raise Refused(403, "not_your_class", "You are not in this class.")
        return row

    async def taught_by(self, user: dict) -> list[int]:
        """Ids of the classes `user` teaches (an admin: every class)."""
        rows = await self.pool.fetch(
            "SELECT id FROM classes WHERE $2 OR id IN (SELECT class_id FROM class_membership WHERE user_id = $1)",
            user["id"], user["role"] == "admin")
        return [r["id"] for r in rows]

    async def teaching_pairs(self, user_ids: list[int]) -> set[tuple[int, int]]:
        """{(class id, user id)} of the classes these users are in."""
        rows = await self.pool.fetch(
            "SELECT class_id, user_id FROM class_membership WHERE user_id = ANY($1::bigint[])", user_ids)
        return {(r["class_id"], r["user_id"]) for r in rows}

    async def area(self, user: dict, spec: str, write: bool) -> Area:
        """The course folder `spec` names (`course`, `class/<id>`), if `user`
        may read it (or write it, with `write`): its class's students
        read it, its teachers and admins also write it. A class's checks
        (`checks/<id>`, the exercises) are its teachers' and admins' alone."""
        checks = CHECKS_SPEC.match(spec)
        if checks:
            return Area.checks((await self.teaching(user, int(checks.group(1))))["id"])
        if spec.startswith("checks/"):
            raise Refused(*NOT_A_CLASS)
        row = await self._membership(user, class_id_of(spec))
        if not row["member"]:
            raise Refused(403, "not_your_class", "This course folder belongs to a class you are not in.")
        if write and user["role"] == "student":
            raise Refused(403, "read_only", "The course folder is read-only for students.")
        return area_of(row["id"], row["is_default"])

    async def may_read_home(self, user: dict, owner: str) -> bool | None:
        """Whether `user` (staff) may read the home of `owner`: an admin
        anyone's, a teacher the students of the classes they teach; None
        when, for `user`, there is no such student."""
        row = await self.pool.fetchrow(
            """SELECT u.role, EXISTS (SELECT 1 FROM class_membership s JOIN class_membership t USING (class_id)
                                      WHERE s.user_id = u.id AND t.user_id = $2) AS shared
               FROM users u WHERE u.username = $1""", owner, user["id"])
        if row is None or (row["role"] != "student" and user["role"] != "admin"):
            return None
        return user["role"] == "admin" or row["shared"]

    async def students(self, class_id: int) -> list[asyncpg.Record]:
        """(id, username, display_name) of the active students of a class."""
        return await self.pool.fetch(
            """SELECT u.id, u.username, u.display_name FROM class_membership m JOIN users u ON u.id = m.user_id
               WHERE m.class_id = $1 AND u.role = 'student' AND u.active ORDER BY u.username""", class_id)

    async def own_students(self, user: dict, class_id: int, usernames: list[str] | None = None
                           ) -> tuple[asyncpg.Record, list[asyncpg.Record]]:
        """The class and (id, username, display_name) of the students of it
        named (None: its active students) if `user` teaches it or is an
        admin: whose passwords they may reset. Refused 403, naming them,
        for staff (an admin resets those, in Accounts) and for anyone who
        is not a student of this class."""
        found = await self.teaching(user, class_id)
        if usernames is None:
            return found, await self.students(found["id"])
        names = list(dict.fromkeys(rules.normalize_username(u) for u in usernames))
        rows = await self.pool.fetch(
            """SELECT u.id, u.username, u.display_name, u.role,
                      EXISTS (SELECT 1 FROM class_membership m WHERE m.class_id = $2 AND m.user_id = u.id) AS member
               FROM users u WHERE u.username = ANY($1::text[])""", names, found["id"])
        by_name = {r["username"]: r for r in rows}
        staff = [u for u in names if u in by_name and by_name[u]["role"] != "student"]
        if staff:
            raise Refused(403, "staff_password", "Passwords of teachers and admins are not reset here; an admin "
                          f"resets them in Administration, Accounts ({', '.join(staff[:20])}).", users=staff)
        outsiders = [u for u in names if u not in by_name or not by_name[u]["member"]]
        if outsiders:
            raise Refused(403, "not_your_student", f"Only the passwords of students of {found['name']} can be "
                          f"reset here; these are not: {', '.join(outsiders[:20])}.", users=outsiders)
        return found, [by_name[u] for u in names]

    async def members(self, class_id: int) -> list[dict]:
        """Everyone in a class: its teachers and students, and whether they
        were put there (False: in no class, so in the default one)."""
        await self.find(class_id)
        rows = await self.pool.fetch(
            """SELECT u.username, u.display_name, u.role, u.active,
                      EXISTS (SELECT 1 FROM class_members e WHERE e.class_id = $1 AND e.user_id = u.id) AS assigned
               FROM class_membership m JOIN users u ON u.id = m.user_id WHERE m.class_id = $1
               ORDER BY u.role DESC, u.username""", class_id)
        return [dict(r) for r in rows]

    # -- administration ----------------------------------------------------------

    async def create(self, actor: str, name: str) -> dict:
        name = valid_name(name)
        async with self.pool.transaction() as conn:
            row = await conn.fetchrow(
                "INSERT INTO classes (name) VALUES ($1) ON CONFLICT (lower(name)) DO NOTHING RETURNING id, name, is_default",
                name)
            if row is None:
                raise Refused(409, "exists", f"There is already a class named {name}.")
            await audit(conn, actor, "create_class", name, class_id=row["id"])
        return {"id": row["id"], "name": row["name"], "default": False, "area": spec_of(row["id"], False)}

    async def rename(self, actor: str, class_id: int, name: str) -> None:
        name = valid_name(name)
        async with self.pool.transaction() as conn:
            try:
                old = await conn.fetchval("SELECT name FROM classes WHERE id = $1 FOR UPDATE", class_id)
                if old is None:
                    raise Refused(*NOT_A_CLASS)
                await conn.execute("UPDATE classes SET name = $2 WHERE id = $1", class_id, name)
            except asyncpg.UniqueViolationError:
                raise Refused(409, "exists", f"There is already a class named {name}.") from None
            await audit(conn, actor, "rename_class", name, class_id=class_id, old=old)

    async def change_members(self, actor: str, class_id: int, add: list[str], remove: list[str]) -> dict:
        """Put teachers and students into a class and take others out (all
        or nothing): {"added": n, "removed": n}. Someone taken out of their
        last class is in the default class again; a teacher in no class who has
        signed in stays in the default class on joining another
        (_keep_default_for_teachers)."""
        if len(add) + len(remove) > MAX_MEMBERS_CHANGE:
            raise Refused(400, "too_many", f"Change at most {MAX_MEMBERS_CHANGE} members at a time.")
        names = [rules.normalize_username(u) for u in add + remove]
        async with self.pool.transaction() as conn:
            if not await conn.fetchval("SELECT true FROM classes WHERE id = $1 FOR UPDATE", class_id):
                raise Refused(*NOT_A_CLASS)
            found = {r["username"]: r for r in await conn.fetch(
                "SELECT id, username, role FROM users WHERE username = ANY($1::text[])", names)}
            unknown = sorted({u for u in names if u not in found})
            if unknown:
                raise Refused(400, "unknown_users", "No such accounts: " + ", ".join(unknown[:20]), users=unknown)
            admins = sorted({u for u in names if found[u]["role"] == "admin"})
            if admins:
                raise Refused(400, "admins_have_no_class",
                              "Admins reach every class and are in none: " + ", ".join(admins[:20]))
            adding = [found[rules.normalize_username(u)]["id"] for u in add]
            kept = await _keep_default_for_teachers(conn, class_id, adding)
            added = await conn.fetch(
                """INSERT INTO class_members (class_id, user_id) SELECT $1, unnest($2::bigint[])
                   ON CONFLICT DO NOTHING RETURNING user_id""",
                class_id, adding)
            removed = await conn.fetch(
                "DELETE FROM class_members WHERE class_id = $1 AND user_id = ANY($2::bigint[]) RETURNING user_id",
                class_id, [found[rules.normalize_username(u)]["id"] for u in remove])
            await audit(conn, actor, "class_members", str(class_id), added=len(added), removed=len(removed),
                        kept_in_default=kept)
        return {"added": len(added), "removed": len(removed)}


async def _keep_default_for_teachers(conn, class_id, user_ids):
    """Before teachers in no class join another: make their place in the
    default class explicit, so that they keep teaching it. Being in no
    class is what put them there, and joining silently ended it: the
    students they taught vanished from /teacher. Only teachers who have
    signed in (and so have seen the default class) keep it: a new teacher
    put into their class sees just that one. Students move: the default
    class holds the students no class has. How many teachers kept it."""
    status = await conn.execute(
        """INSERT INTO class_members (class_id, user_id)
           SELECT d.id, u.id FROM classes d JOIN users u ON u.id = ANY($2::bigint[])
           WHERE d.is_default AND d.id <> $1 AND u.role = 'teacher'
             AND NOT EXISTS (SELECT 1 FROM class_members m WHERE m.user_id = u.id)
             AND EXISTS (SELECT 1 FROM audit_log a WHERE a.action = 'login' AND a.actor = u.username)
           ON CONFLICT DO NOTHING""", class_id, user_ids)
    return int(status.split()[-1])
