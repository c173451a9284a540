"""Exercises as teachers write them and students meet them. Knows nothing
of HTTP.

An exercise is a folder of a class's checks area (files' `checks/<id>`,
the teachers' alone; the format is model.py's), read and written only
through the files service's named methods, so the teacher's IDE, git
and this service see the same files. Teachers list, read, write (from
the browser's form) and delete them; students read what visibility.py
lets them see, and `start` one: its starter files are copied into their
home. What students did with them (attempts) and the teacher's grid are
attempts.py's and gradebook.py's; `Exercises` is the one door to all.
"""
from __future__ import annotations  # a method is named `list`

import builtins
import dataclasses
from datetime import datetime, timezone
from typing import Any, Protocol

from ..db import Pool, Row

from ..errors import Refused
from ..files import paths
from ..files.area import Area
from ..files.paths import Parts
from ..files.service import Files
from . import model, visibility
from .attempts import Attempts
from .gradebook import Gradebook
from .model import EXERCISE_TOML, INSTRUCTIONS, NO_EXERCISE, STARTER, TESTS, Exercise, valid_slug

FORM_TEXTS = {"instructions": INSTRUCTIONS, "tests": TESTS}
MAX_STARTER_FILES = 50


@dataclasses.dataclass(frozen=True)
class Found:
    """An exercise as its folder holds it: `exercise` None when its
    exercise.toml cannot be read at all; `problems` the sentences to fix."""
    slug: str
    exercise: Exercise | None
    problems: builtins.list[str]
    toml: str = ""
    etag: str | None = None
    tests: str | None = None

    @property
    def usable(self) -> bool:
        return self.exercise is not None and not self.problems


def now() -> datetime:
    return datetime.now(timezone.utc)


class ClassDirectory(Protocol):
    """What exercises needs to know of classes (teaching/classes.py has it)."""

    async def visible(self, user: dict[str, Any]) -> builtins.list[dict[str, Any]]:
        """The classes `user` is in or teaches."""

    async def find(self, class_id: int | None) -> Row:
        """A class (the default one for None), or Refused 404."""

    async def teaching(self, user: dict[str, Any], class_id: int | None) -> Row:
        """The class, if `user` teaches it (or is an admin); else Refused."""

    async def member_of(self, user: dict[str, Any], class_id: int) -> Row:
        """The class, if `user` is in it (or teaches it); else Refused."""

    async def students(self, class_id: int) -> builtins.list[Row]:
        """The class's active students."""


class Exercises:
    def __init__(self, pool: Pool, files: Files, classes: ClassDirectory) -> None:
        self.files = files
        self.classes = classes  # teaching's Classes: who teaches and is in which class
        self.attempts = Attempts(pool, self)
        self.gradebook = Gradebook(pool, self)

    # -- reading the folders (the trusted side: no one's rights are verified here) --------

    async def _text(self, username: str, area: Area, parts: Parts) -> tuple[str | None, str | None]:
        """(text, etag) of a file of the format; (None, None) when missing."""
        try:
            data, etag, _ = await self.files.read(username, area, parts, model.MAX_TEXT)
        except Refused as e:
            if e.code in ("not_found", "not_a_file"):
                return None, None
            raise
        if data is None:
            raise Refused(413, "not_text", f"{'/'.join(parts)} is larger than {model.MAX_TEXT} bytes.")
        try:
            return data.decode("utf-8"), etag
        except UnicodeDecodeError:
            raise Refused(415, "not_text", f"{'/'.join(parts)} is not text (UTF-8).") from None

    async def _found(self, username: str, area: Area, slug: str) -> Found:
        try:
            toml, etag = await self._text(username, area, (slug, EXERCISE_TOML))
            if toml is None:
                return Found(slug, None, [f"{slug}/{EXERCISE_TOML} is missing: every exercise folder needs one."])
            tests, _ = await self._text(username, area, (slug, TESTS))
        except Refused as e:
            if e.code != "not_text":
                raise
            return Found(slug, None, [e.message])
        exercise, problems = model.parse(toml, tests)
        return Found(slug, exercise, problems, toml, etag, tests)

    async def _shown_text(self, username: str, area: Area, parts: Parts) -> str | None:
        """A file's text as a browser can show it; None for one it cannot
        (not text, or too large: a starter so shown is left by a save)."""
        try:
            return (await self._text(username, area, parts))[0]
        except Refused as e:
            if e.code != "not_text":
                raise
            return None

    async def _all(self, username: str, area: Area) -> builtins.list[Found]:
        """Every exercise folder of a checks area, by slug."""
        try:
            entries = await self.files.list(username, area, ())
        except Refused as e:
            if e.code == "not_found":  # a class whose checks were never opened
                return []
            raise
        found: builtins.list[Found] = []
        for entry in entries:
            if entry["kind"] != "folder":
                continue
            if model.slug_problem(entry["name"]):
                found.append(Found(entry["name"], None, [f"{entry['name']}/: {model.slug_problem(entry['name'])}"]))
            else:
                found.append(await self._found(username, area, entry["name"]))
        return found

    async def exercise(self, username: str, class_id: int, slug: str) -> Found:
        """An exercise as the grader needs it (tests.py included), read in
        `username`'s place; Refused 404 unless it can be given to students."""
        found = await self._found(username, Area.checks(class_id), valid_slug(slug))
        if not found.usable:
            raise Refused(*NO_EXERCISE)
        return found

    # -- teachers ------------------------------------------------------------------------

    async def _teachers_area(self, teacher: dict[str, Any], class_id: int, write: bool = False) -> Area:
        """The class's checks area, if `teacher` teaches the class (or is an
        admin): the same rule as the files API's `checks/<id>`."""
        return await self.files.area(teacher, f"checks/{class_id}", write)

    async def list(self, teacher: dict[str, Any], class_id: int) -> builtins.list[dict[str, Any]]:
        """The class's exercises, each with its problems (if any)."""
        area = await self._teachers_area(teacher, class_id)
        return [_summary(found) for found in await self._all(teacher["username"], area)]

    async def read(self, teacher: dict[str, Any], class_id: int, slug: str) -> dict[str, Any]:
        """One exercise whole, as the browser's form shows it."""
        area = await self._teachers_area(teacher, class_id)
        found = await self._found(teacher["username"], area, valid_slug(slug))
        if found.etag is None and not await self._exists(teacher["username"], area, (slug,)):
            raise Refused(*NO_EXERCISE)
        instructions = await self._shown_text(teacher["username"], area, (slug, INSTRUCTIONS))
        starter = {path: await self._shown_text(teacher["username"], area, (slug, STARTER) + tuple(path.split("/")))
                   for path in await self._starter_files(teacher["username"], area, slug)}
        return {**_summary(found), "toml": found.toml, "etag": found.etag, "tests": found.tests or "",
                "instructions": instructions or "", "starter": starter,
                "checks": [{**model.as_table(c, defaults=True), "declared": c.declared}
                           for c in found.exercise.checks] if found.exercise else []}

    async def save(self, teacher: dict[str, Any], class_id: int, slug: str, form: dict[str, Any]) -> dict[str, Any]:
        """Create or replace an exercise from the browser's form: {title, file,
        due, checks: [{id, kind, ...}], instructions, tests, starter: {path:
        text, or null to leave a file (one read() could not show) as it is}
        (absent: the starter files are left as they are), etag (of
        exercise.toml as the form read it: absent, it is replaced whatever
        it is)}. Nothing is written unless the whole form is valid."""
        area = await self._teachers_area(teacher, class_id, write=True)
        valid_slug(slug)
        exercise, texts, starter = _from_form(form)
        username, etag = teacher["username"], form.get("etag")
        await self._write(username, area, (slug, EXERCISE_TOML), model.render(exercise),
                          etag if isinstance(etag, str) else None)
        for name, text in texts.items():
            await self._write(username, area, (slug, name), text)
        if starter is not None:
            for path in await self._starter_files(username, area, slug):
                if path not in starter:
                    await self.files.delete(username, area, (slug, STARTER) + tuple(path.split("/")))
            for path, text in starter.items():
                if text is not None:  # None: a file the form cannot show, left as it is
                    await self._write(username, area, (slug, STARTER) + tuple(path.split("/")), text)
        return await self.read(teacher, class_id, slug)

    async def delete(self, teacher: dict[str, Any], class_id: int, slug: str) -> None:
        """Delete an exercise's folder (into the checks area's trash, from
        where the files API restores it); its attempts are kept."""
        area = await self._teachers_area(teacher, class_id, write=True)
        try:
            await self.files.delete(teacher["username"], area, (valid_slug(slug),))
        except Refused as e:
            raise Refused(*NO_EXERCISE) if e.code == "not_found" else e from None

    async def _write(self, username: str, area: Area, parts: Parts, text: str, expected: str | None = None) -> None:
        """Save `text` as a file unless it holds it already (no version for
        nothing); `expected`: the etag it must still have (None: any)."""
        try:
            current, etag = await self._text(username, area, parts)
        except Refused as e:
            if e.code != "not_text":
                raise
            current, etag = None, "*"  # a binary file replaced by text
        if expected is not None and etag != expected:
            raise Refused(409, "conflict", "The exercise was changed since you opened it: open it again, "
                                           "then make your changes.")
        if current != text:  # saved only if still as read (etag None: only if still missing)
            await self.files.save(username, area, parts, text.encode(), etag)

    async def _starter_files(self, username: str, area: Area, slug: str) -> builtins.list[str]:
        try:
            entries, _ = await self.files.tree(username, area, (slug, STARTER))
        except Refused as e:
            if e.code in ("not_found", "not_a_folder"):
                return []
            raise
        return [e["path"] for e in entries if e["kind"] == "file"]

    # -- students (and anyone in the class: a teacher sees what students see) ----------------

    async def assigned(self, student: dict[str, Any]) -> builtins.list[dict[str, Any]]:
        """The exercises of every class `student` is in, as they may see them,
        with their own progress."""
        out: builtins.list[dict[str, Any]] = []
        classes = await self.classes.visible(student)
        progress = await self.attempts.progress_of(student, [c["id"] for c in classes])
        for c in classes:
            for found in await self._all(student["username"], Area.checks(c["id"])):
                if found.usable:
                    out.append({"class": {"id": c["id"], "name": c["name"]}, **_for_students(found),
                                "progress": progress.get((c["id"], found.slug))})
        return out

    async def student_view(self, student: dict[str, Any], class_id: int, slug: str) -> dict[str, Any]:
        """One exercise as a student may see it: title, instructions, due
        date, starter file names, the checks filtered by visibility, and
        their own progress with the results of their latest attempt."""
        found_class = await self.classes.member_of(student, class_id)
        area = Area.checks(found_class["id"])
        found = await self.exercise(student["username"], found_class["id"], slug)
        instructions = await self._shown_text(student["username"], area, (slug, INSTRUCTIONS))
        return {"class": {"id": found_class["id"], "name": found_class["name"]}, **_for_students(found),
                "instructions": instructions or "",
                "starter": await self._starter_files(student["username"], area, slug),
                "checks": visibility.student_checks(_exercise_of(found), now()),
                "progress": await self.attempts.latest_for_student(student, found_class["id"], slug)}

    async def start(self, student: dict[str, Any], class_id: int, slug: str) -> dict[str, Any]:
        """Copy the exercise's starter files into `<slug>/` of the student's
        home, each only if the student has no file there yet (their work is
        never overwritten): {"folder", "path" (the file the checks read),
        "copied": [...], "kept": [...]}."""
        found_class = await self.classes.member_of(student, class_id)
        found = await self.exercise(student["username"], found_class["id"], slug)
        home = await self.files.area(student, "home", write=True)
        copied, kept = await self.give_starters(student["username"], found_class["id"], slug, home)
        return {"folder": slug, "path": f"{slug}/{_exercise_of(found).file}", "copied": copied, "kept": kept}

    async def give_starters(self, username: str, class_id: int, slug: str,
                            area: Area) -> tuple[builtins.list[str], builtins.list[str]]:
        """Copy the exercise's starter files into `<slug>/` of `area` (a
        student's home, or their exam folder), each only if there is no
        file there yet: (copied, kept) paths."""
        checks = Area.checks(class_id)
        starter = await self._starter_files(username, checks, slug)
        if len(starter) > MAX_STARTER_FILES:
            raise Refused(409, "too_many_starter_files", "This exercise has too many starter files: "
                                                         "ask your teacher to keep fewer.")
        copied: builtins.list[str] = []
        kept: builtins.list[str] = []
        for path in starter:
            parts = tuple(path.split("/"))
            data, _, _ = await self.files.read(username, checks, (slug, STARTER) + parts)
            if data is None:  # no limit was given: never
                continue
            try:
                await self.files.save(username, area, (slug,) + parts, data, None)
                copied.append(f"{slug}/{path}")
            except Refused as e:
                if e.code not in ("conflict", "not_a_file", "not_a_folder"):
                    raise
                kept.append(f"{slug}/{path}")
        if not starter and not await self._exists(username, area, (slug,)):
            await self.files.mkdir(username, area, (slug,))
        return copied, kept

    async def _exists(self, username: str, area: Area, parts: Parts) -> bool:
        try:
            return await self.files.is_dir(username, area, parts)
        except Refused as e:
            if e.code == "not_found":
                return False
            raise

    # -- attempts and the gradebook (attempts.py, gradebook.py) -----------------------------

    async def record_attempt(self, student: dict[str, Any], class_id: int, slug: str, started_at: datetime,
                             results: builtins.list[dict[str, Any]], not_gradable: bool = False, message: str = "",
                             reason: str | None = None, graded: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.attempts.record(student, class_id, slug, started_at, results, not_gradable, message,
                                          reason, graded)

    async def grid(self, teacher: dict[str, Any], class_id: int) -> dict[str, Any]:
        return await self.gradebook.grid(teacher, class_id)

    async def grades_csv(self, teacher: dict[str, Any], class_id: int) -> str:
        return await self.gradebook.csv(teacher, class_id)

    async def latest_attempt(self, teacher: dict[str, Any], class_id: int, slug: str, username: str) -> dict[str, Any]:
        return await self.gradebook.latest_attempt(teacher, class_id, slug, username)


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when else None


def _summary(found: Found) -> dict[str, Any]:
    """An exercise in a teacher's list."""
    e = found.exercise
    return {"slug": found.slug, "title": e.title if e else None, "file": e.file if e else None,
            "due": _iso(e.due) if e else None, "max_score": e.max_score if e else None,
            "checks": len(e.checks) if e else 0, "problems": found.problems}


def _exercise_of(found: Found) -> Exercise:
    """The exercise of a Found that `Exercises.exercise` gave (a usable one)."""
    if found.exercise is None:
        raise Refused(*NO_EXERCISE)
    return found.exercise


def _for_students(found: Found) -> dict[str, Any]:
    e = _exercise_of(found)
    return {"slug": found.slug, "title": e.title, "file": e.file, "due": _iso(e.due),
            "due_passed": e.due is not None and now() >= e.due, "max_score": e.max_score}


def _from_form(form: dict[str, Any]) -> tuple[Exercise, dict[str, Any], dict[str, Any] | None]:
    """(the exercise, {file name: text} of instructions.md and tests.py,
    {starter path: text} or None) of the browser's form, or Refused 400
    with every problem: the same sentences as for a folder from git."""
    def text(name: str, limit: int = model.MAX_TEXT) -> str:
        value = form.get(name, "")
        if not isinstance(value, str):
            raise Refused(400, "wrong_type", f"The field '{name}' must be text.")
        if len(value.encode("utf-8")) > limit:
            raise Refused(400, "too_long", f"The field '{name}' is longer than {limit} bytes.")
        return value

    texts = {file: text(name) for name, file in FORM_TEXTS.items()}
    checks = form.get("checks", [])
    if not isinstance(checks, list) or not all(isinstance(c, dict) for c in checks):
        raise Refused(400, "wrong_type", "The field 'checks' must be a list of checks.")
    data = {"title": form.get("title"), "file": form.get("file"), "due": form.get("due"),
            # A check marked "declared": false is a test function of tests.py that no
            # check names (as read() shows it): it stays so, and is not written.
            "check": [{k: v for k, v in c.items() if k != "declared" and v is not None}
                      for c in checks if c.get("declared") is not False]}
    exercise, problems = model.from_data({k: v for k, v in data.items() if v is not None}, texts[TESTS])
    if problems:
        raise Refused(400, "invalid_exercise", " ".join(problems[:3]), problems=problems)
    starter = form.get("starter")
    if starter is not None:
        if not isinstance(starter, dict) or not all(v is None or isinstance(v, str) for v in starter.values()):
            raise Refused(400, "wrong_type", "The field 'starter' must map file names to their text "
                                             "(or null: leave that file as it is).")
        if len(starter) > MAX_STARTER_FILES:
            raise Refused(400, "too_many", f"An exercise may have at most {MAX_STARTER_FILES} starter files.")
        starter = {"/".join(paths.parse(p, allow_root=False)): text_ for p, text_ in starter.items()}
        folders = {path.rsplit("/", n)[0] for path in starter for n in range(1, path.count("/") + 1)}
        if folders & set(starter):
            raise Refused(400, "not_a_folder", f"The starter file {sorted(folders & set(starter))[0]} is also "
                                               "the name of a folder of starter files.")
        if sum(len(t.encode("utf-8")) for t in starter.values() if t) > model.MAX_TEXT * 4:
            raise Refused(400, "too_long", "The starter files are too large together.")
    return exercise, texts, starter
