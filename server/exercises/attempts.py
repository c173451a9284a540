"""What students did with exercises: each attempt the grader records, and
per student and exercise the numbers the grid shows (exercise_progress,
written in the same transaction: migration 010 says why a summary).

The score is computed here, from the exercise's points, never taken from
the grader's or the student program's word; what the student may see of
each check is filtered (visibility.py) before it is stored.
"""
import json
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..db import Pool, Row
from ..errors import Refused
from ..valid_text import valid_text, valid_value
from . import visibility
from .model import NO_EXERCISE, Exercise

if TYPE_CHECKING:  # the service makes this module's Attempts
    from .service import Exercises

MAX_MESSAGE = 4000  # characters of one check's message
MAX_DETAILS = 64 << 10  # bytes of one check's details, as JSON
NOT_RUN = "This check did not run."

# The newest attempt's columns of exercise_progress: replaced only by a newer attempt (a
# higher id), whichever of two concurrent attempts takes the row's lock first.
_LATEST = ("latest_id", "latest_score", "latest_max", "latest_counted", "latest_not_gradable", "failing", "last_at")
_BETTER = "EXCLUDED.best_score > coalesce(p.best_score, -1)"
RECORD_PROGRESS = f"""
INSERT INTO exercise_progress AS p (class_id, user_id, exercise, attempts, best_score, best_max, {", ".join(_LATEST)})
VALUES ($1, $2, $3, CASE WHEN $6 THEN 1 ELSE 0 END, CASE WHEN $6 THEN $4::int END, CASE WHEN $6 THEN $5::int END,
        $8, $4, $5, $6, $7, $9, $10)
ON CONFLICT (class_id, user_id, exercise) DO UPDATE SET
    attempts = p.attempts + EXCLUDED.attempts,
    best_score = CASE WHEN {_BETTER} THEN EXCLUDED.best_score ELSE p.best_score END,
    best_max = CASE WHEN {_BETTER} THEN EXCLUDED.best_max ELSE p.best_max END,
    {", ".join(f"{c} = CASE WHEN EXCLUDED.latest_id > p.latest_id THEN EXCLUDED.{c} ELSE p.{c} END" for c in _LATEST)}
RETURNING attempts
"""


def now() -> datetime:
    return datetime.now(timezone.utc)


def progress_of(row: Row) -> dict[str, Any]:
    """A student's numbers for one exercise, as they and the grid see them."""
    return {"attempts": row["attempts"], "best": row["best_score"], "best_max": row["best_max"],
            "latest": row["latest_score"], "latest_max": row["latest_max"], "latest_counted": row["latest_counted"],
            "not_gradable": row["latest_not_gradable"], "last_at": row["last_at"].isoformat()}


def note(counted: bool, not_gradable: bool, due: datetime | None, message: str = "") -> str:
    """The sentence that tells a student what became of an attempt."""
    if not_gradable:
        return "Your program could not be checked, so this did not count as an attempt" + \
            (f": {message}" if message else ".")
    if not counted and due is not None:  # gradable yet not counted: started after its due date
        return f"The due date ({due.isoformat(timespec='minutes')}) has passed: this check is kept, " \
               "but it no longer counts towards your grade."
    return ""


def scored(exercise: Exercise, results: list[dict[str, Any]], not_gradable: bool) -> list[dict[str, Any]]:
    """Each check of `exercise` as the grader's `results` say, scored from
    the exercise's points: {"id", "kind", "passed", "points", "earned",
    "message", "shown", "details"}. A check missing from them did not pass,
    nor does any in code that could not be graded. Their texts came from
    sandboxes: made valid (valid_text.py) first, so what is stored is what is shown."""
    by_id = {r["id"]: r for r in valid_value(results) if isinstance(r, dict) and isinstance(r.get("id"), str)}
    checks = []
    for check in exercise.checks:
        got = by_id.get(check.id, {})
        passed = got.get("passed") is True and not not_gradable
        checks.append({"id": check.id, "kind": check.kind, "passed": passed, "points": check.points,
                       "earned": check.points if passed else 0,
                       "message": str(got.get("message") or ("" if got else NOT_RUN))[:MAX_MESSAGE],
                       "shown": _details(got.get("shown")) if got.get("shown") else None,
                       "details": _details(got.get("details"))})
    return checks


def _details(value: object) -> object:
    text = json.dumps(value, default=str)
    return value if len(text) <= MAX_DETAILS else {"truncated": True, "text": text[:MAX_DETAILS]}


class Attempts:
    def __init__(self, pool: Pool, exercises: "Exercises") -> None:
        self.pool = pool
        self.exercises = exercises  # the service: who is in which class, and the exercises as they are

    async def record(self, student: dict[str, Any], class_id: int, slug: str, started_at: datetime,
                     results: list[dict[str, Any]],
                     not_gradable: bool = False, message: str = "", reason: str | None = None,
                     graded: dict[str, Any] | None = None) -> dict[str, Any]:
        """Keep an attempt of `student` at an exercise. `results`: per check
        {"id", "passed": bool, "message": a sentence for the student,
        "shown": what a student may see of a shown check (its input,
        expected and actual output, the diff, the failing line: JSON),
        "details": any JSON, for the teacher only};
        a check of the exercise missing from them did not pass (one no
        longer in the exercise is left out). `not_gradable`: the code could
        not be graded (it does not parse; `message` says why). `graded`:
        what was graded ({"file", "version", "source": bytes}), kept for
        the teacher to open. `reason`:
        the attempt itself could not be finished (a refusal's code: the sandbox
        did not start, an internal error...; `message` says it), a press
        kept all the same so that none is hidden from the teacher. It counts
        unless not gradable, not checked or started after the due date;
        kept all the same. What the student may see of it is returned.

        Its texts came from sandboxes: made valid (valid_text.py) before
        anything is computed from them, so what is stored is what is shown."""
        message = valid_text(str(message or ""))
        not_gradable = not_gradable or reason is not None
        outcome = "not_checked" if reason is not None else "not_gradable" if not_gradable else "checked"
        found_class = await self.exercises.classes.member_of(student, class_id)
        exercise = (await self.exercises.exercise(student["username"], found_class["id"], slug)).exercise
        if exercise is None:  # exercise() gives only usable ones
            raise Refused(*NO_EXERCISE)
        finished = now()
        if started_at.tzinfo is None:
            started_at = started_at.replace(tzinfo=timezone.utc)
        checks = scored(exercise, results, not_gradable)
        outcomes = {c["id"]: (c["passed"], c["message"], c["shown"]) for c in checks}
        details = [{k: v for k, v in c.items() if k != "shown"} for c in checks]
        counted = not not_gradable and (exercise.due is None or started_at <= exercise.due)
        # What the student may see is decided as of the start: the grader ran the checks shown then
        # before any other was given to the program (grader.py, Attempt._run).
        shown = visibility.student_results(exercise, outcomes, started_at)
        score = sum(d["earned"] for d in details)
        failing = [d["id"] for d in details if not d["passed"]]
        message = message[:MAX_MESSAGE]
        said = note(counted, not_gradable, exercise.due, message)
        graded = graded or {}
        async with self.pool.transaction() as conn:
            if graded.get("source") is not None:
                await conn.execute("""INSERT INTO graded_sources (user_id, version, source) VALUES ($1, $2, $3)
                                      ON CONFLICT DO NOTHING""", student["id"], graded["version"], graded["source"])
            attempt = await conn.fetchval(
                """INSERT INTO exercise_attempts (user_id, class_id, exercise, started_at, finished_at, counted,
                                                  not_gradable, outcome, reason, score, max_score, results,
                                                  details, file, version)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb, $13::jsonb, $14, $15)
                   RETURNING id""",
                student["id"], found_class["id"], slug, started_at, finished, counted, not_gradable, outcome, reason,
                score, exercise.max_score, json.dumps({"checks": shown, "note": said}),
                json.dumps({"checks": details, "message": message, "note": said}), graded.get("file"),
                graded.get("version"))
            attempts = await conn.fetchval(RECORD_PROGRESS, found_class["id"], student["id"], slug, score,
                                           exercise.max_score, counted, not_gradable, attempt, failing, finished)
        return {"id": attempt, "counted": counted, "not_gradable": not_gradable, "outcome": outcome,
                "reason": reason, "score": score,
                "max_score": exercise.max_score, "attempts": attempts, "started_at": started_at.isoformat(),
                "finished_at": finished.isoformat(), "results": shown, "note": said}

    async def progress_of(self, student: dict[str, Any], class_ids: list[int]) -> dict[tuple[int, str], dict[str, Any]]:
        """{(class id, slug): progress} of a student in these classes."""
        rows = await self.pool.fetch(
            "SELECT * FROM exercise_progress WHERE user_id = $1 AND class_id = ANY($2::bigint[])",
            student["id"], class_ids)
        return {(r["class_id"], r["exercise"]): progress_of(r) for r in rows}

    async def latest_for_student(self, student: dict[str, Any], class_id: int, slug: str) -> dict[str, Any] | None:
        """A student's progress at an exercise with their latest attempt, as
        they may see it; None before their first."""
        row = await self.pool.fetchrow(
            """SELECT p.*, a.started_at, a.results FROM exercise_progress p JOIN exercise_attempts a
               ON a.id = p.latest_id WHERE p.class_id = $1 AND p.user_id = $2 AND p.exercise = $3""",
            class_id, student["id"], slug)
        if row is None:
            return None
        results = json.loads(row["results"])
        return {**progress_of(row), "results": results["checks"], "note": results["note"]}
