"""Exams: a timed test made of a class's exercises, taken by each student
in a folder of the exam's that stops taking changes at their end.

A teacher of the class makes the exam: its exercises, a start (now or a
time), a duration or an end, and what students may use (`allows`). Extra
time is given per student. The clock is PostgreSQL's, the same for every
worker and host; a student's page is told the time left, never asked.

From the start, each student of the class has a folder of their own in
the exam (Area.exam), given the exercises' starter files the first time
they open it. Every change the files service makes there asks `writable`
first (saves, uploads, folders, moves, deletes, restores from the history
and the trash), so at the student's end (the exam's, plus their extra
time) the folder is read-only through every path at once. A save that
left the browser just before the end is kept: the end is enforced GRACE
seconds after it. What the folder holds then is the student's submission.
"""
import builtins
import hashlib
import json
import re
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol

from ..db import Pool
from ..errors import Refused
from ..files.area import Area
from .. import seb
from . import proctor

GRACE = timedelta(seconds=5)  # after a student's end: saves on their way still land (README, "Exams")
ALLOWS = {"run": True, "check": True, "assist": False, "own_files": False, "ask": True}  # and their defaults
MAX_EXERCISES = 20
MAX_MINUTES = 24 * 60  # an exam, and extra time, at most a day
# What a student's page reports: kind -> {field: what it is (VALUES)}.
BROWSER_SIGNALS: dict[str, dict[str, str]] = {
    "paste": {"chars": "count", "outside": "flag"},
    "focus_lost": {}, "focus_back": {"away_seconds": "seconds"},
    "offline": {}, "online": {"away_seconds": "seconds"},
}
VALUES = {"count": "a whole number from 0", "seconds": "a number of seconds from 0 to 86400", "flag": "true or false"}
SIGNALS_PER_MINUTE = 120  # per student and exam: a page that floods is told to wait
SIGNALS_LISTED = 1000
KEPT_SECONDS = 2.0
KEPT_USERS = 10_000
SPEC = re.compile(r"exam/([0-9]{1,18})|exams/([0-9]{1,18})/([^/]+)")  # one's own folder | a student's (staff)

OFF = {"assist": "Editing help is turned off during this exam: your teacher chose so.",
       "ask": "Asking for help is turned off during this exam: your teacher chose so."}
# The exams of the student $1 (of their classes) with their extra time (x), and their end there.
STUDENTS_EXAMS = """FROM exams e JOIN class_membership m ON m.class_id = e.class_id AND m.user_id = $1
    LEFT JOIN exam_extra_time x ON x.exam_id = e.id AND x.user_id = $1"""
STUDENTS_END = "e.ends_at + make_interval(secs => coalesce(x.seconds, 0))"
NO_EXAM = (404, "no_such_exam", "There is no such exam.")
NOT_YET = (403, "exam_not_started", "The exam has not started yet: its folder opens at the start.")
OVER = (403, "exam_over", "The exam is over for you: your files were handed in as they were at the end, "
                          "and can no longer change.")


class ClassDirectory(Protocol):
    """What exams need to know of classes (teaching/classes.py has it)."""

    async def teaching(self, user: dict[str, Any], class_id: int | None) -> Any: ...

    async def member_of(self, user: dict[str, Any], class_id: int) -> Any: ...

    async def students(self, class_id: int) -> builtins.list[Any]: ...


class ExerciseShelf(Protocol):
    """What exams need of exercises (exercises/service.py has it)."""

    async def exercise(self, username: str, class_id: int, slug: str) -> Any: ...

    async def give_starters(self, username: str, class_id: int, slug: str, area: Area) -> Any: ...


class Exams:
    def __init__(self, pool: Pool, classes: ClassDirectory, exercises: ExerciseShelf) -> None:
        self.pool = pool
        self.classes = classes
        self.exercises = exercises
        self._given: set[str] = set()  # exam folders given their starter files by this worker
        # user id -> (until when, _running_allows, _running_seb)
        self._kept: dict[int, tuple[float, dict[str, bool] | None, dict[int, str]]] = {}

    # -- teachers --------------------------------------------------------------------

    async def create(self, teacher: dict[str, Any], class_id: int, form: Any) -> dict[str, Any]:
        """A new exam of the class, from the teacher's form: {title,
        exercises: [slug], starts: "now" | ISO time, minutes | ends: ISO
        time, allows: {run, check, assist, own_files, ask}, seb_config_key:
        the Config Key of Safe Exam Browser's settings to require it, or none}."""
        found = await self.classes.teaching(teacher, class_id)
        if not isinstance(form, dict):
            raise Refused(400, "bad_exam", "Send the exam as an object with a title, exercises and times.")
        title = form.get("title")
        if not isinstance(title, str) or not title.strip() or len(title.strip()) > 100:
            raise Refused(400, "bad_title", "Give the exam a title of 1 to 100 characters.")
        slugs = form.get("exercises")
        if not isinstance(slugs, list) or not 1 <= len(slugs) <= MAX_EXERCISES \
                or not all(isinstance(s, str) for s in slugs) or len(set(slugs)) != len(slugs):
            raise Refused(400, "bad_exercises", f"Choose 1 to {MAX_EXERCISES} different exercises of the class.")
        for slug in slugs:
            exercise = await self.exercises.exercise(teacher["username"], found["id"], slug)
            if not exercise.usable:
                raise Refused(400, "exercise_has_problems",
                              f"The exercise '{slug}' has problems to fix before it can be in an exam.")
        now = await self._now()
        starts = now if form.get("starts", "now") == "now" else _when(form.get("starts"), "starts")
        if starts < now - timedelta(minutes=1):
            raise Refused(400, "starts_in_the_past", "The start is in the past: choose now or a later time.")
        minutes, ends_text = form.get("minutes"), form.get("ends")
        if (minutes is None) == (ends_text is None):
            raise Refused(400, "bad_end", "Give either how many minutes the exam lasts or when it ends.")
        if minutes is not None:
            ends = starts + timedelta(minutes=_minutes(minutes, "minutes", 1))
        else:
            ends = _when(ends_text, "ends")
        if not starts < ends <= starts + timedelta(minutes=MAX_MINUTES):
            raise Refused(400, "bad_end", "The exam must end after it starts, and within a day.")
        allows = form.get("allows", {})
        if not isinstance(allows, dict) or set(allows) - set(ALLOWS) \
                or not all(isinstance(v, bool) for v in allows.values()):
            raise Refused(400, "bad_allows", "Say what students may use with true or false for: "
                                             + ", ".join(ALLOWS) + ".")
        try:
            config_key = seb.config_key(form.get("seb_config_key"))
        except ValueError:
            raise Refused(400, "bad_seb_config_key", "Give Safe Exam Browser's Config Key as the 64 letters and "
                                                     "digits its configuration tool shows, or leave it empty.") from None
        row = await self.pool.fetchrow(
            """INSERT INTO exams (class_id, title, exercises, starts_at, ends_at, allows, created_by, seb_config_key)
               VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8) RETURNING *""",
            found["id"], title.strip(), slugs, starts, ends, json.dumps({**ALLOWS, **allows}), teacher["id"],
            config_key)
        return _public(row, now)

    async def list(self, teacher: dict[str, Any], class_id: int) -> builtins.list[dict[str, Any]]:
        """The class's exams, the latest first."""
        found = await self.classes.teaching(teacher, class_id)
        rows = await self.pool.fetch("SELECT *, now() AS now FROM exams WHERE class_id = $1 ORDER BY starts_at DESC",
                                     found["id"])
        return [_public(row, row["now"]) for row in rows]

    async def for_staff(self, teacher: dict[str, Any], exam_id: int) -> dict[str, Any]:
        """The exam with each student of the class, their extra time and end."""
        row = await self.taught(teacher, exam_id)
        students = await self.classes.students(row["class_id"])
        extra = {r["user_id"]: r["seconds"] for r in await self.pool.fetch(
            "SELECT user_id, seconds FROM exam_extra_time WHERE exam_id = $1", exam_id)}
        return {**_public(row, row["now"]), "students": [
            {"username": s["username"], "display_name": s["display_name"],
             "extra_minutes": extra.get(s["id"], 0) // 60,
             "ends": _iso(row["ends_at"] + timedelta(seconds=extra.get(s["id"], 0)))} for s in students]}

    async def give_extra_time(self, teacher: dict[str, Any], exam_id: int, username: str,
                              minutes: Any) -> dict[str, Any]:
        """Set a student's extra time (0: none); their end moves with it,
        also after the exam's end (a folder locked opens again)."""
        row = await self.taught(teacher, exam_id)
        given = _minutes(minutes, "extra minutes", 0)
        student = next((s for s in await self.classes.students(row["class_id"]) if s["username"] == username), None)
        if student is None:
            raise Refused(404, "no_such_student", "There is no such student in this exam's class.")
        await self.pool.execute(
            """INSERT INTO exam_extra_time (exam_id, user_id, seconds) VALUES ($1, $2, $3)
               ON CONFLICT (exam_id, user_id) DO UPDATE SET seconds = excluded.seconds""",
            exam_id, student["id"], given * 60)
        return {"username": username, "extra_minutes": given,
                "ends": _iso(row["ends_at"] + timedelta(minutes=given))}

    # -- students --------------------------------------------------------------------

    async def current(self, student: dict[str, Any]) -> dict[str, Any] | None:
        """The exam of the student's classes that is running for them, else
        the next to start; None when there is neither."""
        row = await self.pool.fetchrow(
            f"""SELECT e.*, now() AS now, coalesce(x.seconds, 0) AS extra {STUDENTS_EXAMS}
                WHERE {STUDENTS_END} > now() ORDER BY (e.starts_at > now()), e.starts_at LIMIT 1""", student["id"])
        return None if row is None else _for_student(row)

    async def for_student(self, student: dict[str, Any], exam_id: int) -> dict[str, Any]:
        row = await self._student_row(student, exam_id)
        return _for_student(row)

    # -- integrity signals: evidence for the teacher, never a verdict -----------------

    async def signal(self, student: dict[str, Any], exam_id: int, form: Any) -> dict[str, Any]:
        """Record what the student's page saw ({"kind", and for a paste
        "chars" and "outside", for focus back "away_seconds"}), at the
        server's time, while the exam runs for them. Always the sender's
        own: nothing in the form names a student."""
        row = await self._student_row(student, exam_id)
        if not row["starts_at"] <= row["now"] <= _end(row) + GRACE:
            raise Refused(409, "exam_not_running", "The exam is not running for you, so nothing is recorded.")
        kind = form.get("kind") if isinstance(form, dict) else None
        if not isinstance(kind, str) or kind not in BROWSER_SIGNALS:
            raise Refused(400, "not_a_signal", "A signal's kind is one of: " + ", ".join(BROWSER_SIGNALS) + ".")
        detail = {}
        for name, what in BROWSER_SIGNALS[kind].items():
            value = form.get(name)
            if not _valid(value, what):
                raise Refused(400, "bad_signal", f"A {kind} signal gives '{name}': {VALUES[what]}.")
            detail[name] = value
        lately = await self.pool.fetchval(
            """SELECT count(*) FROM exam_signals WHERE exam_id = $1 AND user_id = $2
               AND at > now() - interval '1 minute'""", exam_id, student["id"])
        if lately >= SIGNALS_PER_MINUTE:
            raise Refused(429, "too_many_signals", "Your page sent too many signals: it waits a moment.",
                          retry_after=10)
        return await self._record(exam_id, student["id"], kind, detail)

    async def signals(self, teacher: dict[str, Any], exam_id: int, username: str | None = None,
                      after: int = 0) -> builtins.list[dict[str, Any]]:
        """The exam's signals after the id `after` (of one student's, with
        `username`), oldest first, SIGNALS_LISTED at most."""
        await self.taught(teacher, exam_id)
        rows = await self.pool.fetch(
            """SELECT s.id, s.at, s.kind, s.detail, u.username FROM exam_signals s JOIN users u ON u.id = s.user_id
               WHERE s.exam_id = $1 AND s.id > $2 AND ($3::text IS NULL OR u.username = $3)
               ORDER BY s.id LIMIT $4""", exam_id, after, username, SIGNALS_LISTED)
        return [{"id": r["id"], "at": _iso(r["at"]), "username": r["username"], "kind": r["kind"],
                 **json.loads(r["detail"])} for r in rows]

    async def ide_opened(self, student: dict[str, Any], session_hash: bytes) -> str | None:
        """A student's IDE opened: during their exam, recorded (a session not
        seen before in it, when one was, as `second_session`: another tab
        signs in again, another device); the exam folder's page name, to
        follow its changes, or None."""
        exam = await self.current(student) if student["role"] == "student" else None
        if exam is None or exam["state"] != "running":
            return None
        session = hashlib.sha256(b"exam session\0" + session_hash).hexdigest()[:12]  # (names no session)
        seen = {json.loads(r["detail"]).get("session") for r in await self.pool.fetch(
            """SELECT detail FROM exam_signals WHERE exam_id = $1 AND user_id = $2
               AND kind IN ('ide_opened', 'second_session')""", exam["id"], student["id"])}
        await self._record(exam["id"], student["id"], "second_session" if seen - {session} else "ide_opened",
                           {"session": session})
        folder: str = exam["folder"]
        return folder

    async def _record(self, exam_id: int, user_id: int, kind: str, detail: dict[str, Any]) -> dict[str, Any]:
        row = await self.pool.fetchrow(
            "INSERT INTO exam_signals (exam_id, user_id, kind, detail) VALUES ($1, $2, $3, $4::jsonb) RETURNING id, at",
            exam_id, user_id, kind, json.dumps(detail))
        assert row is not None  # (an INSERT ... RETURNING returns its row)
        return {"id": row["id"], "at": _iso(row["at"]), "kind": kind, **detail}

    # -- the proctor view: the class's live view in the exam's mode (proctor.py) -------

    async def proctoring(self, teacher: dict[str, Any], exam_id: int, class_id: int) -> None:
        """Refused unless `teacher` teaches the exam's class, and the exam is
        of the class `class_id` (the live view it is watched in)."""
        row = await self._exam(exam_id)
        await self.classes.teaching(teacher, row["class_id"])
        if row["class_id"] != class_id:
            raise Refused(404, "not_this_class", "This exam is of another class: open the proctor view "
                                                 "from that class's Exams.")

    async def proctor_fields(self, exam_id: int, usernames: builtins.list[str]) -> dict[str, dict[str, Any]]:
        """What the proctor view shows of these students in the exam, beside
        their row of the class view (proctor.fields)."""
        return await proctor.fields(self.pool, exam_id, usernames)

    # -- keeping students to the exam's folder ------------------------------------------

    async def keeps_to_its_folder(self, user: dict[str, Any]) -> None:
        """Refused (exam_running) while an exam that does not allow their own
        files runs for the student: their home, the course folders, their
        runs and checks of those wait for its end."""
        allows = await self._running_allows(user)
        if allows is not None and not allows["own_files"]:
            raise Refused(403, "exam_running", "During the exam only its folder is open: your own files and the "
                                               "course folder come back when it ends.")

    async def forbids(self, user: dict[str, Any], what: str) -> None:
        """Refused (`<what>_off`) while an exam runs for the student that does
        not let them use `what` (assist: editing help; ask: raising their hand)."""
        allows = await self._running_allows(user)
        if allows is not None and not allows[what]:
            raise Refused(403, f"{what}_off", OFF[what])

    async def require_seb(self, user: dict[str, Any], exam_id: int | None, proof: seb.Proof) -> None:
        """Refused (seb_required) when the exam `exam_id` (None: any) runs
        for the student, requires Safe Exam Browser, and `proof` (what
        their request carried: seb.py) does not hold for its key."""
        keys = await self._running_seb(user)
        needed = keys.values() if exam_id is None else [keys[exam_id]] if exam_id in keys else []
        if any(not proof.holds(key) for key in needed):
            raise Refused(403, "seb_required", seb.REQUIRED)

    async def require_seb_for(self, user: dict[str, Any], spec: str, proof: seb.Proof) -> None:
        """require_seb for the folder `spec` when it is one's own exam folder (`exam/<id>`)."""
        m = SPEC.fullmatch(spec)
        if m is not None and m.group(1) is not None:
            await self.require_seb(user, int(m.group(1)), proof)

    async def _running_allows(self, user: dict[str, Any]) -> dict[str, bool] | None:
        """What the exams running for the student allow (all of them: the
        least), None when none runs for them."""
        return (await self._running(user))[0]

    async def _running_seb(self, user: dict[str, Any]) -> dict[int, str]:
        """{exam id: its Safe Exam Browser config key} of the exams that
        require it and run for the student (GRACE included: saves on their way)."""
        return (await self._running(user))[1]

    async def _running(self, user: dict[str, Any]) -> tuple[dict[str, bool] | None, dict[int, str]]:
        """(_running_allows, _running_seb), known for KEPT_SECONDS at a time
        per worker (a second or two late at an exam's start and end)."""
        if user["role"] != "student":
            return None, {}
        now = time.monotonic()
        known = self._kept.get(user["id"])
        if known is None or known[0] < now:
            rows = await self.pool.fetch(
                f"""SELECT e.id, e.allows, e.seb_config_key, now() < {STUDENTS_END} AS running {STUDENTS_EXAMS}
                    WHERE e.starts_at <= now() AND now() < {STUDENTS_END} + $2""", user["id"], GRACE)
            running = [r for r in rows if r["running"]]
            allows = {name: all(_allows(r)[name] for r in running) for name in ALLOWS} if running else None
            keys = {r["id"]: r["seb_config_key"] for r in rows if r["seb_config_key"] is not None}
            known = self._kept[user["id"]] = (now + KEPT_SECONDS, allows, keys)
            while len(self._kept) > KEPT_USERS:
                self._kept.pop(next(iter(self._kept)))
        return known[1], known[2]

    # -- the folders (the files service asks) ------------------------------------------

    async def area(self, user: dict[str, Any], spec: str, write: bool) -> Area:
        """The exam folder `spec` names: `exam/<id>` a student's own (from
        the start; to write, until their end), `exams/<id>/<username>` a
        student's, for the class's teachers to read."""
        m = SPEC.fullmatch(spec)
        if m is None:
            raise Refused(*NO_EXAM)
        exam_id, owner = int(m.group(1) or m.group(2)), m.group(3)
        if owner is not None:
            if user["role"] == "student":
                raise Refused(403, "not_your_folder", "You can only open your own exam folder.")
            row = await self.taught(user, exam_id)
            if write:
                raise Refused(403, "read_only", "Students' exam folders are read-only for teachers.")
            if owner not in {s["username"] for s in await self.classes.students(row["class_id"])}:
                raise Refused(404, "no_such_student", "There is no such student in this exam's class.")
            return Area.exam(exam_id, owner)
        return (await self._own_folder(user, exam_id, write))[0]

    async def _own_folder(self, user: dict[str, Any], exam_id: int, write: bool) -> tuple[Area, Any]:
        """The student's own folder in the exam (from the start; to write,
        until their end), given the starters at the first look, with the
        exam as _student_row has it."""
        if user["role"] != "student":
            raise Refused(403, "not_a_student", "Only students take exams: open a student's folder by name.")
        row = await self._student_row(user, exam_id)
        if row["now"] < row["starts_at"]:
            raise Refused(*NOT_YET)
        if write and row["now"] > _end(row) + GRACE:
            raise Refused(*OVER)
        area = Area.exam(exam_id, user["username"])
        if area.key not in self._given and row["now"] <= _end(row):  # (after the end, nothing more is given)
            for slug in row["exercises"]:
                await self.exercises.give_starters(user["username"], row["class_id"], slug, area)
            self._given.add(area.key)
        return area, row

    async def runnable(self, user: dict[str, Any], spec: str) -> Area:
        """The student's exam folder `spec` (`exam/<id>`), whose files they
        may run (as a read-only copy, as a course file runs), if the exam
        lets them."""
        m = SPEC.fullmatch(spec)
        if m is None or m.group(1) is None:
            raise Refused(*NO_EXAM)
        area, row = await self._own_folder(user, int(m.group(1)), write=False)
        if not _allows(row)["run"]:
            raise Refused(403, "run_off", "Run is turned off in this exam: your teacher chose so.")
        if row["now"] <= _end(row):
            await self._record(row["id"], user["id"], "run", {})
        return area

    async def checkable(self, user: dict[str, Any], spec: str, class_id: int, slug: str) -> Area:
        """The student's exam folder `spec` (`exam/<id>`), whose file of the
        exercise `slug` they may check now: the exam is theirs and runs for
        them, lets them check, and has that exercise."""
        m = SPEC.fullmatch(spec)
        if m is None or m.group(1) is None:
            raise Refused(400, "not_checkable_here", "Only your own files and your exam's can be checked.")
        area, row = await self._own_folder(user, int(m.group(1)), write=False)
        if row["now"] > _end(row):
            raise Refused(*OVER)
        if not _allows(row)["check"]:
            raise Refused(403, "check_off", "Check is turned off in this exam: your teacher chose so.")
        if row["class_id"] != class_id or slug not in row["exercises"]:
            raise Refused(404, "no_such_exercise", "This exercise is not in your exam.")
        await self._record(row["id"], user["id"], "check", {"exercise": slug})
        return area

    async def writable(self, area: Area) -> None:
        """Refused (exam_over) once the student whose exam folder `area` is
        has reached their end, GRACE included."""
        exam_id = area.exam_id
        if exam_id is None:
            return
        row = await self.pool.fetchrow(
            f"""SELECT {STUDENTS_END} + $3 > now() AS open
               FROM exams e JOIN users u ON u.username = $2
               LEFT JOIN exam_extra_time x ON x.exam_id = e.id AND x.user_id = u.id
               WHERE e.id = $1""", exam_id, area.parts[2], GRACE)
        if row is None or not row["open"]:
            raise Refused(*OVER)

    # -- helpers -----------------------------------------------------------------------

    async def _now(self) -> datetime:
        now: datetime = await self.pool.fetchval("SELECT now()")
        return now

    async def _exam(self, exam_id: int) -> Any:
        row = await self.pool.fetchrow("SELECT *, now() AS now FROM exams WHERE id = $1", exam_id)
        if row is None:
            raise Refused(*NO_EXAM)
        return row

    async def taught(self, teacher: dict[str, Any], exam_id: int) -> Any:
        """The exam (its row, with the database's `now`), if `teacher` teaches its class."""
        row = await self._exam(exam_id)
        await self.classes.teaching(teacher, row["class_id"])
        return row

    async def _student_row(self, student: dict[str, Any], exam_id: int) -> Any:
        """The exam with the student's extra time, if they are in its class
        (no such exam otherwise: an exam id says nothing to others)."""
        row = await self.pool.fetchrow(
            f"SELECT e.*, now() AS now, coalesce(x.seconds, 0) AS extra {STUDENTS_EXAMS} WHERE e.id = $2",
            student["id"], exam_id)
        if row is None:
            raise Refused(*NO_EXAM)
        return row


def _valid(value: Any, what: str) -> bool:
    if what == "flag":
        return isinstance(value, bool)
    if isinstance(value, bool) or not isinstance(value, (int, float) if what == "seconds" else int):
        return False
    return 0 <= value <= (86_400 if what == "seconds" else 10_000_000)


def _when(value: Any, what: str) -> datetime:
    """An ISO 8601 time with its offset (a time without one would mean the
    server's zone, not the teacher's)."""
    try:
        when = datetime.fromisoformat(value) if isinstance(value, str) and len(value) <= 40 else None
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise Refused(400, f"bad_{what}", f"Give '{what}' as a date and time with its time zone, "
                                          "for example 2026-03-01T09:00:00+01:00.")
    return when.astimezone(timezone.utc)


def _minutes(value: Any, what: str, least: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not least <= value <= MAX_MINUTES:
        raise Refused(400, "bad_minutes", f"Give the {what} as a whole number from {least} to {MAX_MINUTES}.")
    return value


def _end(row: Any) -> datetime:
    end: datetime = row["ends_at"] + timedelta(seconds=row["extra"])
    return end


def _iso(when: datetime) -> str:
    return when.astimezone(timezone.utc).isoformat()


def _allows(row: Any) -> dict[str, bool]:
    stored = json.loads(row["allows"]) if isinstance(row["allows"], str) else dict(row["allows"])
    return {name: bool(stored.get(name, default)) for name, default in ALLOWS.items()}


def _state(now: datetime, starts: datetime, ends: datetime) -> str:
    return "upcoming" if now < starts else "running" if now < ends else "over"


def _public(row: Any, now: datetime) -> dict[str, Any]:
    """An exam as its teachers see it."""
    return {"id": row["id"], "class_id": row["class_id"], "title": row["title"], "exercises": list(row["exercises"]),
            "starts": _iso(row["starts_at"]), "ends": _iso(row["ends_at"]), "allows": _allows(row),
            "state": _state(now, row["starts_at"], row["ends_at"]), "now": _iso(now),
            "safe_exam_browser": row["seb_config_key"] is not None}  # (never the key: the form's, kept)


def _for_student(row: Any) -> dict[str, Any]:
    """An exam as one student sees it: their own end, the server's time, and their folder."""
    end = _end(row)
    return {"id": row["id"], "class_id": row["class_id"], "title": row["title"], "exercises": list(row["exercises"]),
            "starts": _iso(row["starts_at"]), "ends": _iso(end), "extra_minutes": row["extra"] // 60,
            "allows": _allows(row), "state": _state(row["now"], row["starts_at"], end), "now": _iso(row["now"]),
            "seconds_left": max(0, round((end - row["now"]).total_seconds())), "folder": f"exam/{row['id']}",
            "safe_exam_browser": row["seb_config_key"] is not None}
