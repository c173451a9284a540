"""Grading an exam's submissions: after a student's end (GRACE included),
their exam folder is what they handed in; a teacher of the class asks for
it to be graded, one student's or every one whose end has passed.

Each exercise of each submission is one attempt of the checks' machinery
(checks/grader.py): the same line students' Check presses wait in, the
same sandboxes, every check run (hidden ones too) against a snapshot of
the locked folder. Only where the results go differs (Submission): a row
of exam_grades per (exam, student, exercise), scored from the exercise's
points (exercises/attempts.py), for the class's teachers alone. A grading
puts GRADING_AT_ONCE attempts in that line at a time, so a class's
submissions never crowd out the students checking meanwhile.
"""
import asyncio
import json
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..checks.grader import Attempt, Grader
from ..db import Pool
from ..errors import Refused
from ..exercises import visibility
from ..exercises.attempts import scored
from ..files.area import Area
from ..runs.job import outcome, refused
from .service import GRACE, STUDENTS_END, Exams, _iso

log = logging.getLogger(__name__)

GRADING_AT_ONCE = 2  # a grading's attempts in the checks' line at a time
# A student's run holds their run lock, which an attempt needs: their submission is tried again this
# many times, this long apart, before it is said not graded.
BUSY_TRIES, BUSY_WAIT_SECONDS = 2, 3.0
# Every student of an exam's class, with their end and whether it has passed (GRACE included: $2).
STUDENTS = f"""SELECT u.id, u.username, u.display_name, {STUDENTS_END} AS ends, {STUDENTS_END} + $2 <= now() AS over
    FROM exams e JOIN class_membership m ON m.class_id = e.class_id
    JOIN users u ON u.id = m.user_id AND u.role = 'student' AND u.active
    LEFT JOIN exam_extra_time x ON x.exam_id = e.id AND x.user_id = u.id
    WHERE e.id = $1 ORDER BY u.username"""
# Why an exercise was not graded, as the teacher is told (by the refusal's code); otherwise its own sentence.
NOT_GRADED = {
    "already_running": "{name} had a program running at that moment, so this exercise was not graded: "
                       "grade it again in a minute.",
    "not_found": "The exercise's file is not in {name}'s submission, so there was nothing to grade.",
    "session_ended": "Your session ended while grading, so this exercise was not graded: sign in and grade again.",
}


@dataclass
class Unheard:
    """The sink of a submission's attempt: nobody waits at a page for its
    messages (its result is the row it writes)."""
    gone: asyncio.Event = field(default_factory=asyncio.Event)

    async def send(self, message: dict[str, Any]) -> None:
        pass


class Submission(Attempt):
    """One exercise of a student's locked exam folder, checked for the
    teacher: an Attempt whose results are kept in exam_grades."""

    def __init__(self, grading: "Grading", student: dict[str, Any], session: bytes, exam: Any, slug: str,
                 asked_at: datetime) -> None:
        super().__init__(grading.grader, student, session, exam["class_id"], slug, None, Unheard(),
                         Area.exam(exam["id"], student["username"]))
        self.grading, self.exam_id, self.asked_at = grading, exam["id"], asked_at
        self.found: Any = None

    async def _in_place(self, found: Any) -> dict[str, Any]:
        self.found = found  # its checks and points, for _record
        return await super()._in_place(found)

    async def _record(self, started_at: datetime, results: list[dict[str, Any]], not_gradable: bool,
                      why: str) -> dict[str, Any]:
        exercise = self.found.exercise
        checks = [{**{k: v for k, v in c.items() if k != "details"}, "label": visibility.label(check),
                   "hidden": not visibility.shown(check, exercise, started_at)}
                  for c, check in zip(scored(exercise, results, not_gradable), exercise.checks)]
        message = f"The code could not be graded: {why}" if not_gradable else ""
        graded = self.graded or {}
        await self.grading.keep(self, "graded", message, score=sum(c["earned"] for c in checks),
                                max_score=exercise.max_score, checks=checks, file=graded.get("file"),
                                version=graded.get("version"))
        return {"type": "check", "state": "done"}

    async def _not_checked(self, started_at: datetime, error: Exception) -> dict[str, Any]:
        said = refused(error, "grading an exam")
        await self.grading.not_graded(self, said)
        return said


class Grading:
    def __init__(self, pool: Pool, exams: Exams, grader: Grader) -> None:
        self.pool, self.exams, self.grader = pool, exams, grader
        self.under_way: dict[int, "asyncio.Future[None]"] = {}  # exam id -> its grading on this worker

    async def grade(self, teacher: dict[str, Any], session: bytes, exam_id: int,
                    username: str | None = None) -> dict[str, Any]:
        """Grade the submissions of the exam (of the student `username`, or
        of every student whose end has passed), asked by `teacher` with the
        session `session`: what was queued. Their grades come as each is done."""
        exam = await self.exams.taught(teacher, exam_id)
        under_way = self.under_way.get(exam_id)
        if under_way is not None and not under_way.done():
            raise Refused(409, "grading_under_way", "This exam's submissions are being graded now: their grades "
                                                    "appear as each is done. Grade again once they are all in.")
        students = await self.pool.fetch(STUDENTS, exam_id, GRACE)
        if username is not None:
            students = [s for s in students if s["username"] == username]
            if not students:
                raise Refused(404, "no_such_student", "There is no such student in this exam's class.")
            if not students[0]["over"]:
                raise Refused(409, "exam_not_over", f"{username}'s exam is not over yet: their submission can be "
                                                    f"graded once their end ({_iso(students[0]['ends'])}) has "
                                                    "passed.")
        over = [s for s in students if s["over"]]
        if not over:
            raise Refused(409, "exam_not_over", "No student's exam is over yet: grade the submissions once "
                                                "the exam has ended.")
        slugs = list(exam["exercises"])
        asked_at = await self.pool.fetchval(
            """INSERT INTO exam_grades AS g (exam_id, user_id, exercise, state)
               SELECT $1, u, x, 'queued' FROM unnest($2::bigint[]) u, unnest($3::text[]) x
               ON CONFLICT (exam_id, user_id, exercise) DO UPDATE SET state = 'queued', asked_at = now()
               RETURNING asked_at""", exam_id, [s["id"] for s in over], slugs)
        work = [(s, slug) for s in over for slug in slugs]
        self.under_way[exam_id] = self.grader.jobs.track(self._grade(session, exam, work, asked_at))
        return {"queued": len(work), "students": [s["username"] for s in over],
                "not_over": [s["username"] for s in students if not s["over"]]}

    async def _grade(self, session: bytes, exam: Any, work: list[tuple[Any, str]], asked_at: datetime) -> None:
        """Each (student, exercise) of `work`, GRADING_AT_ONCE at a time."""
        pending = iter(work)

        async def one_by_one() -> None:
            for student, slug in pending:
                person = {"id": student["id"], "username": student["username"],
                          "display_name": student["display_name"], "role": "student"}
                for tries in range(BUSY_TRIES + 1):
                    if tries:
                        await asyncio.sleep(BUSY_WAIT_SECONDS)
                    submission = Submission(self, person, session, exam, slug, asked_at)
                    said = await outcome(submission._attempt, "grading an exam")
                    if said.get("error") != "already_running":
                        break
                if said.get("type") == "error":  # refused before its checks ran (those after keep their own)
                    await self.not_graded(submission, said)
        try:
            await asyncio.gather(*(one_by_one() for _ in range(GRADING_AT_ONCE)))
        finally:
            self.under_way.pop(exam["id"], None)

    async def not_graded(self, submission: Submission, said: dict[str, Any]) -> None:
        """Keep why `submission` could not be graded (a refusal `said`), in a sentence for the teacher."""
        name = submission.user["username"]
        message = NOT_GRADED[said["error"]].format(name=name) if said.get("error") in NOT_GRADED else \
            f"This exercise was not graded: {said.get('message') or 'the checks did not run.'}"
        await self.keep(submission, "not_graded", message)

    async def keep(self, submission: Submission, state: str, message: str, score: int | None = None,
                   max_score: int | None = None, checks: list[dict[str, Any]] | None = None,
                   file: str | None = None, version: str | None = None) -> None:
        """Write a submission's grade, unless a later grading was asked for meanwhile."""
        try:
            await self.pool.execute(
                """UPDATE exam_grades SET state = $5, message = $6, score = $7, max_score = $8, checks = $9::jsonb,
                          file = $10, version = $11, graded_at = now()
                   WHERE exam_id = $1 AND user_id = $2 AND exercise = $3 AND asked_at = $4""",
                submission.exam_id, submission.user["id"], submission.slug, submission.asked_at, state, message,
                score, max_score, json.dumps(checks or []), file, version)
        except Exception:
            log.exception("could not keep the grade of %s's %s in exam %d", submission.user["username"],
                          submission.slug, submission.exam_id)

    async def grades(self, teacher: dict[str, Any], exam_id: int) -> dict[str, Any]:
        """The exam's grades, for its teachers: per student, each exercise's
        state (queued, graded, not_graded), score and checks (hidden ones too)."""
        exam = await self.exams.taught(teacher, exam_id)
        rows = await self.pool.fetch(
            """SELECT g.*, u.username, u.display_name FROM exam_grades g JOIN users u ON u.id = g.user_id
               WHERE g.exam_id = $1 ORDER BY u.username, g.exercise""", exam_id)
        return {"exercises": list(exam["exercises"]), "grades": [
            {"username": r["username"], "display_name": r["display_name"], "exercise": r["exercise"],
             "state": r["state"], "score": r["score"], "max_score": r["max_score"], "checks": json.loads(r["checks"]),
             "message": r["message"], "file": r["file"], "version": r["version"], "asked": _iso(r["asked_at"]),
             "graded": _iso(r["graded_at"]) if r["graded_at"] else None,
             "folder": f"exams/{exam_id}/{r['username']}"} for r in rows]}
