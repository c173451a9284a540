"""The class as teachers see it: classes (classes.py), the live roster
(roster.py, live.py), handing out starter files from a class's course
folder (the files service's push, files/push.py; starters.py tells those
whose own version was kept), new passwords for a
class's students (the accounts service's), talking to the class (talk.py:
messages and raised hands); it implements the runs'
RunEvents (runs/events.py), so the live view knows who is online and
running (activity.py) and a teacher may follow a student's console
(consoles.py, following.py) and open file (viewing.py). Knows nothing of HTTP."""
from ..accounts.service import Accounts
from ..config import Config
from ..db import Pool
from ..errors import Refused
from ..files.push import CHANGED
from ..files.service import Files
from . import classes as classes_, roster
from .activity import Activity
from .classes import Classes
from .consoles import Consoles
from .following import Follower, Following
from .live import LiveView
from .starters import Starters
from .talk import Talk
from .viewing import Viewing


MAX_NEW_PASSWORDS = 500  # in one request: about half a minute of hashing on a busy server


class Teaching:
    def __init__(self, pool: Pool, files: Files, cfg: Config, classes: Classes, accounts: Accounts, listener=None,
                 inbox=None):
        self.pool = pool
        self.files = files  # the files service
        self.accounts = accounts  # for the passwords of a class's students
        self.cfg = cfg
        self.classes = classes
        self.activity = Activity(pool)
        self.live = LiveView(pool, cfg, classes, listener)
        self.consoles = Consoles(pool, self.activity.worker, listener)
        self.following = Following(pool, self.activity.worker, listener)
        self.viewing = Viewing(pool)  # a batch: flushed with the worker's others
        self.talk = Talk(pool, classes, inbox)  # inbox: server.inbox.Inbox, the students' open IDEs
        self.starters = Starters(pool, classes, inbox, files)  # pushed starters students kept their own of

    def start(self) -> None:
        """The worker's background work: writing activity and followed
        consoles, the live view's resyncs, renewing follows."""
        self.activity.start()
        self.live.start()
        self.consoles.start()
        self.following.start()

    async def close(self) -> None:
        await self.following.close()
        await self.consoles.close()
        await self.live.close()
        await self.activity.close()

    # -- what runs tell (runs/events.py: RunEvents): cheap, never wait for the database --

    def student_online(self, user: dict, online: bool) -> None:
        self.activity.student_online(user, online)

    def run_started(self, user: dict) -> None:
        self.activity.run_started(user)

    def run_ended(self, user: dict, exit_message: dict, error: dict | None) -> None:
        self.activity.run_ended(user, exit_message, error)

    def run_console(self, user: dict, message: dict) -> None:
        self.consoles.run_console(user, message)

    # -- a student's detail -----------------------------------------------------------

    def student_viewing(self, user: dict, path: str | None) -> None:
        """The IDE of `user` shows the file `path` of their home now (None: none)."""
        self.viewing.add(user["id"], path)

    async def follow(self, follower: Follower, class_id: int, username: str | None) -> None:
        """The teacher's socket `follower` on the class `class_id` follows the
        console of its student `username` from now on (None: nobody)."""
        if username is None:
            return await self.following.unfollow(follower)
        user_id = await self.pool.fetchval(
            """SELECT u.id FROM class_membership m JOIN users u ON u.id = m.user_id
               WHERE m.class_id = $1 AND u.username = $2 AND u.role = 'student'""", class_id, username)
        if user_id is None:
            raise Refused(404, "not_in_class", "There is no such student in this class.")
        await self.following.follow(follower, user_id, username)

    # -- the roster and pushes ------------------------------------------------------

    async def roster(self, teacher: dict, class_id: int | None = None) -> dict:
        """A class's students (None: the default class), live: online,
        running, their last run, last save, over quota."""
        found = await self.classes.teaching(teacher, class_id)
        students = await roster.students(self.pool, self.cfg, [found["id"]])
        return {"class": {"id": found["id"], "name": found["name"], "default": found["is_default"]},
                "students": [s for _, s in students]}

    async def create_class(self, actor: str, name: str) -> dict:
        made = await self.classes.create(actor, name)
        area = classes_.area_of(made["id"], False)
        await self.files.ensure_area(actor, area)
        return made

    async def push(self, teacher: dict, spec: str, source: tuple[str, ...], chosen: list[str] | None = None,
                   changed: str = "keep") -> dict:
        """Push the file or folder `source` (path parts) of the course
        folder `spec` (`course`, `class/<id>`) to the active students of
        its class, or to those `chosen` of them; copies students changed
        are kept, overwritten (theirs kept in history) or get the starter
        beside them, as `changed` says (files/push.py). The report of what
        was copied, updated, up to date, replaced, sent as a new file,
        skipped and failed, per student, and their display names."""
        if changed not in CHANGED:
            raise Refused(400, "bad_field", "'changed' must be one of: " + ", ".join(CHANGED) + ".")
        found = await self.classes.teaching(teacher, classes_.class_id_of(spec))
        area = classes_.area_of(found["id"], found["is_default"])
        students = await self.classes.students(found["id"])
        ids = {s["username"]: s["id"] for s in students}
        if chosen is None:
            targets = list(ids)
        else:
            unknown = [u for u in chosen if u not in ids]
            if unknown:
                raise Refused(400, "unknown_students", "Not active students of this class: " + ", ".join(unknown[:20]))
            targets = list(dict.fromkeys(chosen))
        path = "/".join(source)
        rows = await self.pool.fetch(
            """SELECT u.username, p.path, p.etag FROM pushed_files p JOIN users u ON u.id = p.user_id
               WHERE p.user_id = ANY($1::bigint[]) AND (p.path = $2 OR left(p.path, length($2) + 1) = $2 || '/')""",
            [ids[u] for u in targets], path)
        as_pushed = {(r["username"], r["path"]): r["etag"] for r in rows}
        done = await self.files.push(teacher["username"], area, tuple(source), targets, as_pushed, changed)
        if done.records:
            # Should this fail, the copies are there all the same; pushed
            # again, they are found up to date and recorded then.
            await self.pool.execute(
                """INSERT INTO pushed_files (user_id, path, etag)
                   SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[])
                   ON CONFLICT (user_id, path) DO UPDATE SET etag = EXCLUDED.etag, pushed_at = now()""",
                [ids[u] for u, _, _ in done.records], [p for _, p, _ in done.records],
                [e for _, _, e in done.records])
        if changed == "keep":  # those whose own version was kept hear of the new one
            await self.starters.kept_theirs(found, area, done.skipped, ids)
        names = {s["username"]: s["display_name"] for s in students}
        return {**done.report(), "students": len(targets), "class": found["id"], "changed": changed,
                "names": {u: names[u] for u in targets}}

    # -- passwords -------------------------------------------------------------------

    async def new_passwords(self, teacher: dict, class_id: int, chosen: list[str] | None = None) -> dict:
        """New passwords (shown once) for the active students of a class the
        teacher teaches, or for those `chosen` of its students: their old
        passwords stop working and their sessions end. Never for staff nor
        for other classes' students (Classes.own_students refuses them)."""
        if chosen is not None and not chosen:
            raise Refused(400, "no_students", "Choose at least one student.")
        found, students = await self.classes.own_students(teacher, class_id, chosen)
        if not students:
            raise Refused(400, "no_students", f"{found['name']} has no active students yet.")
        if len(students) > MAX_NEW_PASSWORDS:  # each is a password hash: bound the request's work
            raise Refused(400, "too_many", f"That is {len(students)} students of {found['name']}: make new passwords "
                          f"for at most {MAX_NEW_PASSWORDS} at a time (choose some of them).")
        names = {s["username"]: s["display_name"] for s in students}
        made, ended = await self.accounts.reset_passwords(
            teacher["username"], list(names), role="student", class_id=found["id"], by=teacher["role"])
        return {"class": {"id": found["id"], "name": found["name"], "default": found["is_default"]},
                "rows": [{"username": u, "display_name": names[u], "class": found["name"], "password": p}
                         for u, p in made],
                "sessions_ended": ended}
