"""The exercise format: a folder a teacher can keep in git.

    <slug>/exercise.toml     title, due, the student's file, the checks
    <slug>/instructions.md   what the student reads beside the editor
    <slug>/tests.py          function checks, pytest style (`def test_...`)
    <slug>/starter/          files given to the student

exercise.toml:

    title = "Average"
    file = "average.py"              # the student's file, in their <slug>/ folder
    due = 2025-03-01T09:00:00+01:00  # optional; a date-time with its time zone

    [[check]]
    id = "two-numbers"
    kind = "output"                  # output | function | code
    input = "4\\n6\\n"                # output: fed to the program
    expected = "5.0\\n"
    compare = "normalized"           # output (default) | exact | normalized | regex
    points = 2                       # default 1
    visibility = "hidden"            # visible (default) | hidden | after_due
    hint = "Divide the sum by how many numbers there are."

An output check compares what the program prints. By default ("output")
the prompts its input() calls print are left out, so `input("A number: ")`
costs nothing; "exact" compares every character, prompts included;
"normalized" leaves out prompts and differences of spaces and capitals;
"regex" matches the output, prompts left out, against a pattern.

A `function` check names a `test = "test_..."` of tests.py; a `code` check
has a `rule`: uses_loop, defines:NAME, no_import:MODULE or uses_call:NAME.
Every `def test_...` of tests.py that no check names is a visible function
check worth 1 point. tests.py is read with `ast`, never imported: it is
the teacher's, but the server does not run what it only lists.

Parsing never raises on what a teacher wrote: every problem is a sentence
naming the file and what to change. Knows nothing of storage or HTTP.
"""
import ast
import difflib
import re
import tomllib
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Sequence

from ..errors import Refused
from ..files import paths

EXERCISE_TOML = "exercise.toml"
NO_EXERCISE = (404, "no_such_exercise", "There is no such exercise in this class.")
INSTRUCTIONS = "instructions.md"
TESTS = "tests.py"
STARTER = "starter"

# \Z, not $: $ also matches before a final newline, and "average\n" is no folder name.
SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}\Z")
CHECK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")

KINDS = ("output", "function", "code")
COMPARES = ("output", "exact", "normalized", "regex")
VISIBILITIES = ("visible", "hidden", "after_due")
RULES = ("uses_loop", "defines:", "no_import:", "uses_call:")
MAX_CHECKS = 200
MAX_POINTS = 1000
MAX_TITLE = 200
MAX_HINT = 1000
MAX_TEXT = 256 << 10  # characters of an input or expected output, and bytes of each file of the format

COMMON_KEYS = ("id", "kind", "points", "visibility", "hint")
KIND_KEYS = {"output": ("input", "expected", "compare"), "function": ("test",), "code": ("rule",)}
TOP_KEYS = ("title", "due", "file", "check")


@dataclass(frozen=True)
class Check:
    id: str
    kind: str
    points: int = 1
    visibility: str = "visible"
    hint: str = ""
    input: str = ""        # output
    expected: str = ""     # output
    compare: str = "output"  # output: how it compares (COMPARES)
    test: str = ""         # function: the name of a def in tests.py
    rule: str = ""         # code
    declared: bool = True  # False: a test_ function of tests.py that no check names


@dataclass(frozen=True)
class Exercise:
    title: str
    file: str                       # the student's file, relative to their <slug>/ folder
    due: datetime | None = None
    checks: tuple[Check, ...] = ()  # declared in exercise.toml, then those found in tests.py

    @property
    def declared(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.declared)

    @property
    def max_score(self) -> int:
        return sum(c.points for c in self.checks)

    def check(self, check_id: str) -> Check | None:
        return next((c for c in self.checks if c.id == check_id), None)


# -- reading ---------------------------------------------------------------------

def parse(toml_text: str, tests_text: str | None = None) -> tuple[Exercise | None, list[str]]:
    """(the exercise, []) or (None or what could be read, [problems]);
    tests.py's text, when given, adds its unnamed test functions as checks."""
    try:
        data = tomllib.loads(toml_text)
    except tomllib.TOMLDecodeError as e:
        return None, [f"{EXERCISE_TOML}: {e}. Check the quotes and the = signs on that line."]
    return from_data(data, tests_text)


def from_data(data: dict[str, Any], tests_text: str | None = None) -> tuple[Exercise, list[str]]:
    """parse() of exercise.toml's content as a dict (TOML's, or the
    browser's form in the same shape: text where TOML has a date-time)."""
    problems: list[str] = []
    _unknown(data, TOP_KEYS, EXERCISE_TOML, problems)
    title = _text(data, "title", EXERCISE_TOML, problems, required=True, limit=MAX_TITLE)
    if isinstance(data.get("title"), str) and not title.strip():
        problems.append(f"{EXERCISE_TOML}: 'title' must not be empty.")
    file = _student_file(data.get("file"), problems)
    due = due_of(data.get("due"), problems)
    tables = data.get("check", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        problems.append(f"{EXERCISE_TOML}: write each check as a [[check]] table.")
        tables = []
    if len(tables) > MAX_CHECKS:
        problems.append(f"{EXERCISE_TOML}: an exercise may have at most {MAX_CHECKS} checks.")
        tables = tables[:MAX_CHECKS]
    checks = [c for n, table in enumerate(tables, 1) if (c := _check(n, table, problems)) is not None]
    if tests_text is not None:
        tests = test_functions(tests_text, problems)
        if tests is not None:
            for c in checks:
                if c.kind == "function" and c.test not in tests:
                    problems.append(f"{EXERCISE_TOML}, check '{c.id}': {TESTS} has no function {c.test}(). "
                                    f"Add it to {TESTS} or correct the name.")
            named = {c.test for c in checks if c.kind == "function"}
            checks += [Check(id=name, kind="function", test=name, declared=False)
                       for name in tests if name not in named]
    seen: set[str] = set()
    for c in checks:
        if c.id in seen:
            why = "" if c.declared else f" (the function {c.test}() of {TESTS}, which no check names, is a check of its own)"
            problems.append(f"{EXERCISE_TOML}: two checks have the id '{c.id}'{why}. Give each check its own id.")
        seen.add(c.id)
    return Exercise(title=title, file=file, due=due, checks=tuple(checks)), problems


def _unknown(table: dict[str, Any], allowed: Sequence[str], where: str, problems: list[str]) -> None:
    for key in table:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            also = f" Did you mean '{close[0]}'?" if close else f" Use {', '.join(allowed)}."
            problems.append(f"{where}: '{key}' is not a setting here.{also}")


def _text(table: dict[str, Any], key: str, where: str, problems: list[str], required: bool = False,
          limit: int = MAX_TEXT, default: str = "") -> str:
    value = table.get(key)
    if value is None:
        if required:
            problems.append(f"{where}: '{key}' is missing.")
        return default
    if not isinstance(value, str):
        problems.append(f"{where}: '{key}' must be text in quotes.")
        return default
    if len(value) > limit:
        problems.append(f"{where}: '{key}' is longer than {limit} characters.")
        return default
    return value


def _student_file(value: object, problems: list[str]) -> str:
    where = f"{EXERCISE_TOML}: 'file'"
    if value is None:
        problems.append(f"{where} is missing: name the student's Python file, e.g. file = \"average.py\".")
        return ""
    if not isinstance(value, str):
        problems.append(f"{where} must be text in quotes, e.g. file = \"average.py\".")
        return ""
    try:
        parts = paths.parse(value, allow_root=False)
    except paths.BadPath as e:
        problems.append(f"{where}: {e.message}.")
        return ""
    if not parts[-1].endswith(".py") or not NAME.match(parts[-1][:-3]):
        problems.append(f"{where} must be a Python file whose name can be imported, e.g. \"average.py\".")
        return ""
    return "/".join(parts)


def due_of(value: object, problems: list[str], where: str = f"{EXERCISE_TOML}: 'due'") -> datetime | None:
    """A due date (TOML's date-time, or ISO 8601 text) with its time zone, or None."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            problems.append(f"{where} must be a date and time, e.g. due = 2025-03-01T09:00:00+01:00.")
            return None
    if not isinstance(value, datetime):
        what = "a time of day" if isinstance(value, date) else "a date and time"
        problems.append(f"{where} needs {what} and a time zone, e.g. due = 2025-03-01T09:00:00+01:00.")
        return None
    offset = value.utcoffset()
    if offset is None:
        problems.append(f"{where} needs a time zone, e.g. due = 2025-03-01T09:00:00+01:00 (or Z for UTC).")
        return None
    if offset.seconds % 60 or offset.microseconds:
        problems.append(f"{where}: the time zone must be whole minutes, e.g. +01:00.")
        return None
    return value


def _check(n: int, table: dict[str, Any], problems: list[str]) -> Check | None:
    """The n-th [[check]] table as a Check, or None (its problems added)."""
    where = f"{EXERCISE_TOML}, check {n}"
    before = len(problems)
    check_id = table.get("id")
    if not isinstance(check_id, str) or not CHECK_ID.match(check_id):
        problems.append(f"{where}: 'id' must be a short name of letters, digits, '-', '_' or '.', "
                        "e.g. id = \"two-numbers\".")
    kind = table.get("kind")
    if kind not in KINDS:
        problems.append(f"{where}: 'kind' must be one of {', '.join(KINDS)}.")
        return None
    _unknown(table, COMMON_KEYS + KIND_KEYS[kind], where, problems)
    points = table.get("points", 1)
    if not isinstance(points, int) or isinstance(points, bool) or not 0 <= points <= MAX_POINTS:
        problems.append(f"{where}: 'points' must be a whole number from 0 to {MAX_POINTS}.")
    visibility = table.get("visibility", "visible")
    if visibility not in VISIBILITIES:
        problems.append(f"{where}: 'visibility' must be one of {', '.join(VISIBILITIES)}.")
    fields = {"hint": _text(table, "hint", where, problems, limit=MAX_HINT)}
    if kind == "output":
        fields["input"] = _text(table, "input", where, problems)
        fields["expected"] = _text(table, "expected", where, problems, required=True)
        fields["compare"] = table.get("compare", "output")
        if fields["compare"] not in COMPARES:
            problems.append(f"{where}: 'compare' must be one of {', '.join(COMPARES)}.")
        elif fields["compare"] == "regex":
            try:
                re.compile(fields["expected"])
            except re.error as e:
                problems.append(f"{where}: 'expected' is not a valid pattern ({e}).")
    elif kind == "function":
        fields["test"] = _text(table, "test", where, problems, required=True, limit=200)
        if fields["test"] and not (NAME.match(fields["test"]) and fields["test"].startswith("test_")):
            problems.append(f"{where}: 'test' must be the name of a function of {TESTS} that starts with test_.")
    else:
        fields["rule"] = _text(table, "rule", where, problems, required=True, limit=200)
        if fields["rule"] and rule_problem(fields["rule"]):
            problems.append(f"{where}: {rule_problem(fields['rule'])}")
    if len(problems) > before or not isinstance(check_id, str):  # a bad id added a problem too
        return None
    return Check(id=check_id, kind=kind, points=points, visibility=visibility, hint=fields["hint"],
                 input=fields.get("input", ""), expected=fields.get("expected", ""),
                 compare=fields.get("compare", "output"), test=fields.get("test", ""), rule=fields.get("rule", ""))


def rule_problem(rule: str) -> str | None:
    """Why `rule` is not a code check's rule, or None."""
    name, _, arg = rule.partition(":")
    if rule == "uses_loop" or (name in ("defines", "uses_call") and NAME.match(arg)) or \
            (name == "no_import" and MODULE.match(arg)):
        return None
    return ("'rule' must be uses_loop, defines:NAME, no_import:MODULE or uses_call:NAME "
            "(e.g. defines:average).")


def test_functions(tests_text: str, problems: list[str]) -> list[str] | None:
    """The names of the top-level `def test_...` of tests.py, in order
    (read with ast: nothing of it runs here); None when it is not Python."""
    try:
        tree = ast.parse(tests_text, TESTS)
    except SyntaxError as e:
        problems.append(f"{TESTS}, line {e.lineno}: {e.msg}. Correct it so that the function checks can run.")
        return None
    except (ValueError, RecursionError, MemoryError):
        problems.append(f"{TESTS}: it cannot be read as Python.")
        return None
    return [node.name for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")]


def slug_problem(slug: str) -> str | None:
    if isinstance(slug, str) and SLUG.match(slug):
        return None
    return ("An exercise's folder name must be 1 to 64 lowercase letters, digits, '-' or '_', "
            "starting with a letter or digit (e.g. average or week-2).")


def valid_slug(slug: str) -> str:
    """`slug`, or Refused 400 (from a URL: before any file or row is looked up)."""
    problem = slug_problem(slug)
    if problem:
        raise Refused(400, "bad_slug", problem)
    return slug


# -- writing ---------------------------------------------------------------------

_DEFAULTS = Check(id="", kind="")


def as_table(check: Check, defaults: bool = False) -> dict[str, Any]:
    """A check as its [[check]] table holds it: the keys of its kind (those
    left at their default only with `defaults`)."""
    keys = ("id", "kind") + KIND_KEYS[check.kind] + COMMON_KEYS[2:]
    return {key: getattr(check, key) for key in keys
            if defaults or key in ("id", "kind", "expected") or getattr(check, key) != getattr(_DEFAULTS, key)}


def render(exercise: Exercise) -> str:
    """exercise.toml for `exercise` (its declared checks; defaults left out):
    parse(render(e)) gives e back."""
    lines = [f"title = {_toml(exercise.title)}", f"file = {_toml(exercise.file)}"]
    if exercise.due is not None:
        lines.append(f"due = {exercise.due.isoformat()}")
    for check in exercise.declared:
        lines += ["", "[[check]]"]
        lines += [f"{key} = {value if isinstance(value, int) else _toml(value)}"
                  for key, value in as_table(check).items()]
    return "\n".join(lines) + "\n"


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}


def _toml(text: str) -> str:
    """A TOML basic string: exact for any text (control characters escaped)."""
    return '"' + "".join(_ESCAPES.get(ch) or (f"\\u{ord(ch):04X}" if ord(ch) < 0x20 or ord(ch) == 0x7F else ch)
                         for ch in text) + '"'
