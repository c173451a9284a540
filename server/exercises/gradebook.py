"""The teacher's gradebook: the class x exercises grid, a student's latest
attempt with everything the grader saw, and the grades as CSV."""
import csv
import io
import json
from typing import TYPE_CHECKING, Any

from ..csv_cells import safe_cell
from ..db import Pool, Row
from ..errors import Refused
from .attempts import progress_of
from .model import valid_slug

if TYPE_CHECKING:  # the service makes this module's Gradebook
    from .service import Exercises

PRESSES_SHOWN = 100  # of a student's attempts at an exercise, the latest shown with the latest's details


class Gradebook:
    def __init__(self, pool: Pool, exercises: "Exercises") -> None:
        self.pool = pool
        self.exercises = exercises  # the service: the class's exercises and who teaches it

    async def _class(self, teacher: dict[str, Any], class_id: int) -> tuple[Row, list[dict[str, Any]], list[Row]]:
        """(the class, its exercises that students can do, its active students)."""
        listed = await self.exercises.list(teacher, class_id)  # refused unless `teacher` teaches the class
        found = await self.exercises.classes.find(class_id)
        students = await self.exercises.classes.students(found["id"])
        return found, [e for e in listed if not e["problems"]], students

    async def grid(self, teacher: dict[str, Any], class_id: int) -> dict[str, Any]:
        """One row per active student, one cell per exercise: None (not
        started) or their attempts, best and latest score, last attempt time
        and the ids of the checks their latest attempt failed (stuck on)."""
        found, exercises, students = await self._class(teacher, class_id)
        rows = await self.pool.fetch("SELECT * FROM exercise_progress WHERE class_id = $1", found["id"])
        cells = {(r["user_id"], r["exercise"]): {**progress_of(r), "stuck_on": list(r["failing"])} for r in rows}
        return {"class": {"id": found["id"], "name": found["name"]},
                "exercises": [{k: e[k] for k in ("slug", "title", "due", "max_score")} for e in exercises],
                "students": [{"username": s["username"], "name": s["display_name"],
                              "cells": {e["slug"]: cells.get((s["id"], e["slug"])) for e in exercises}}
                             for s in students]}

    async def latest_attempt(self, teacher: dict[str, Any], class_id: int, slug: str, username: str) -> dict[str, Any]:
        """A student's latest attempt at an exercise, with the teacher's
        details of every check, and their latest attempts (newest
        first: each with its outcome, the ones not checked with why)."""
        found = await self.exercises.classes.teaching(teacher, class_id)
        row = await self.pool.fetchrow(
            """SELECT a.*, u.username, u.display_name, g.source FROM users u
               JOIN class_membership m ON m.user_id = u.id AND m.class_id = $1
               LEFT JOIN exercise_attempts a ON a.user_id = u.id AND a.class_id = $1 AND a.exercise = $2
               LEFT JOIN graded_sources g ON g.user_id = u.id AND g.version = a.version
               WHERE u.username = $3 AND u.role = 'student'
               ORDER BY a.id DESC NULLS LAST LIMIT 1""", found["id"], valid_slug(slug), username)
        if row is None:
            raise Refused(404, "no_such_student", "There is no such student in this class.")
        if row["id"] is None:
            raise Refused(404, "no_attempt", f"{row['display_name']} has not checked this exercise yet.")
        details = json.loads(row["details"])
        presses = await self.pool.fetch(
            """SELECT id, started_at, outcome, reason, counted, score, max_score, details->>'message' AS message
               FROM exercise_attempts WHERE user_id = $1 AND class_id = $2 AND exercise = $3
               ORDER BY id DESC LIMIT $4""", row["user_id"], found["id"], slug, PRESSES_SHOWN)
        return {"id": row["id"], "username": row["username"], "name": row["display_name"], "exercise": slug,
                "started_at": row["started_at"].isoformat(), "finished_at": row["finished_at"].isoformat(),
                "counted": row["counted"], "not_gradable": row["not_gradable"], "outcome": row["outcome"],
                "reason": row["reason"], "score": row["score"],
                "max_score": row["max_score"], "message": details["message"], "note": details["note"],
                "checks": details["checks"], "student_saw": json.loads(row["results"])["checks"],
                "presses": [{**dict(p), "started_at": p["started_at"].isoformat()} for p in presses],
                # What was graded: the very bytes every check of the attempt ran.
                "file": row["file"], "version": row["version"],
                "source": None if row["source"] is None else bytes(row["source"]).decode("utf-8", "replace")}

    async def csv(self, teacher: dict[str, Any], class_id: int) -> str:
        """grades.csv: username, name and the best counted score of each
        exercise (empty: none yet), one row per active student."""
        grid = await self.grid(teacher, class_id)
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\r\n")
        writer.writerow(["username", "name"] + [safe_cell(f"{e['title']} ({e['max_score']})")
                                                for e in grid["exercises"]])
        for s in grid["students"]:
            best = [(s["cells"][e["slug"]] or {}).get("best") for e in grid["exercises"]]
            writer.writerow([safe_cell(s["username"]), safe_cell(s["name"])] + ["" if b is None else b for b in best])
        return out.getvalue()
