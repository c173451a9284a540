"""What a student may see of an exercise's checks and of their results.

A check is shown (visible) or not (hidden, or after_due before the due
date). A shown check is sent with what it does (the input and expected
output of an output check, the test's name, the code rule) and its hint.
Of one not shown, a student gets its points and a neutral face: an id and
label by its place among the hidden ones ("hidden-2", "Hidden check 2"),
since even a teacher's id ("negative-numbers") says what it tests; its
result says only passed or not. Everything sent to a student about checks
goes through `faces`, so the rule is in one place.
"""
from datetime import datetime
from typing import Any

from .model import Check, Exercise

PASSED, NOT_PASSED = "Passed.", "Not passed yet."


def shown(check: Check, exercise: Exercise, now: datetime) -> bool:
    return check.visibility == "visible" or \
        (check.visibility == "after_due" and exercise.due is not None and now >= exercise.due)


def label(check: Check) -> str:
    if check.kind == "output":
        return f"Output: {check.id}"
    if check.kind == "function":
        return f"Test: {check.test}"
    rule, _, name = check.rule.partition(":")
    return {"uses_loop": "Uses a loop", "defines": f"Defines {name}", "no_import": f"Does not import {name}",
            "uses_call": f"Calls {name}()"}[rule]


def faces(exercise: Exercise, now: datetime) -> list[tuple[Check, dict[str, Any]]]:
    """(check, what the student may see of it) for every check, in order."""
    out, hidden = [], 0
    for check in exercise.checks:
        if shown(check, exercise, now):
            face = {"id": check.id, "label": label(check), "kind": check.kind, "points": check.points,
                    "hint": check.hint}
            face.update({"output": {"input": check.input, "expected": check.expected, "compare": check.compare},
                         "function": {"test": check.test}, "code": {"rule": check.rule}}[check.kind])
        else:
            hidden += 1
            face = {"id": f"hidden-{hidden}", "label": f"Hidden check {hidden}", "points": check.points,
                    "hidden": True}
        out.append((check, face))
    return out


def student_checks(exercise: Exercise, now: datetime) -> list[dict[str, Any]]:
    return [face for _, face in faces(exercise, now)]


def student_results(exercise: Exercise, outcomes: dict[str, Any], now: datetime) -> list[dict[str, Any]]:
    """The results of an attempt as the student may see them: per check,
    passed, points earned and a message (the grader's, with the hint when
    failed, for a shown check; only passed or not for a hidden one).
    `outcomes`: {check id: (passed, message, what a shown check shows or None)}."""
    out = []
    for check, face in faces(exercise, now):
        passed, message, details = outcomes[check.id]
        result = {"id": face["id"], "label": face["label"], "passed": passed, "points": check.points,
                  "earned": check.points if passed else 0}
        if face.get("hidden"):
            result.update(hidden=True, message=PASSED if passed else NOT_PASSED)
        else:
            result["message"] = message or (PASSED if passed else NOT_PASSED)
            if not passed and check.hint:
                result["hint"] = check.hint
            if details:
                result["shown"] = details
        out.append(result)
    return out
