"""Exercises that check themselves (issue 23), over the real HTTP API of a
real server: a teacher writes an exercise (in the class's checks area, or
with the browser's form), students see what they may of it and start it;
the grader records attempts (in-process, as it will: `grader`), and the
teacher reads the grid, a student's latest attempt and grades.csv."""
import asyncio
import contextlib
import csv
import io
import json
import pathlib
from datetime import datetime, timedelta, timezone

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from server import config, db
from server.executor import BoundedExecutor
from server.exercises import model
from server.exercises.service import Exercises
from server.files.processes import FileProcesses
from server.files.service import Files
from server.files.store import Limits, Store
from server.teaching.classes import Classes
from tests.live_support import a_class, user_of
from tests.test_live_class import until, watching

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "exercises" / "average"
SECRETS = ("SECRET-IN-7f3", "SECRET-OUT-9a1", "SECRET-HINT-42", "secret-id-55", "SECRET-TEST-BODY",
           "SECRET-MESSAGE-13", "SECRET-DETAILS-21", "LATER-IN-8c", "LATER-HINT-3")
TESTS_PY = '"""SECRET-TEST-BODY"""\nfrom average import average\n\n\ndef test_two():\n    assert average([4, 6]) == 5\n' \
           '\n\ndef test_one():\n    assert average([7]) == 7\n'


def form(**changes):
    """The browser's form of an exercise with a hidden and an after_due check."""
    return {"title": "Average", "file": "average.py", "due": None,
            "instructions": "# Average\nWrite `average(numbers)`.\n", "tests": TESTS_PY,
            "starter": {"average.py": "def average(numbers):\n    return 0\n", "data/numbers.txt": "4\n6\n"},
            "checks": [
                {"id": "shown", "kind": "output", "input": "4\n6\n\n", "expected": "Average: 5.0\n",
                 "compare": "normalized", "points": 2, "hint": "Print 'Average: ' first."},
                {"id": "secret-id-55", "kind": "output", "input": "SECRET-IN-7f3", "expected": "SECRET-OUT-9a1",
                 "visibility": "hidden", "hint": "SECRET-HINT-42", "points": 3},
                {"id": "later", "kind": "output", "input": "LATER-IN-8c", "expected": "x", "visibility": "after_due",
                 "hint": "LATER-HINT-3"},
                {"id": "loop", "kind": "code", "rule": "uses_loop"},
                {"id": "two", "kind": "function", "test": "test_two", "points": 2}],
            **changes}


@pytest.fixture
def room(server, people):
    """A class of the test's own: (class id, its teacher, two students, an outsider student)."""
    teacher, ann, ben, out = people.teacher("mrs-t"), people.student("ann"), people.student("ben"), \
        people.student("out")
    return a_class(server, teacher, ann, ben), teacher, ann, ben, out


def put_exercise(teacher, number, slug="average", **changes):
    r = teacher.request("PUT", f"/api/classes/{number}/exercises/{slug}", json=form(**changes))
    assert r.status_code == 200, r.text
    return r.json()


class Recording:
    """Every response body a client was sent, to search for what must not leak."""

    def __init__(self, client):
        self.bodies = []
        request = client.request

        def recorded(method, path, **kw):
            r = request(method, path, **kw)
            self.bodies.append(r.text)
            return r
        client.request = recorded

    def leaked(self, secrets=SECRETS):
        return [s for s in secrets for body in self.bodies if s in body]


@contextlib.asynccontextmanager
async def grader_side(server):
    """The exercises service in the test's process, on the server's database
    and storage: record_attempt as the grader calls it in a worker."""
    cfg = config.load(server.env)
    pool = db.Pool(await asyncpg.create_pool(server.env["DATABASE_URL"], min_size=1, max_size=2, command_timeout=5),
                   acquire_timeout=3, size=2)
    store = Store(cfg.STORAGE_ROOT, Limits(cfg.QUOTA_BYTES, cfg.QUOTA_FILES, cfg.MAX_FILE_BYTES, 5))
    processes = FileProcesses(store, 1, 64)
    await processes.start()
    threads = BoundedExecutor("fs", 2, max_pending=64)
    classes = Classes(pool)
    try:
        yield Exercises(pool, Files(store, processes, threads, pool, cfg, classes), classes)
    finally:
        await processes.close()
        threads.shutdown()
        await pool.close()
        store.close()


def grader(server, *calls):
    """Run `calls` (each: async fn(exercises) -> value) against the grader's side; their values."""
    async def main():
        async with grader_side(server) as exercises:
            return [await call(exercises) for call in calls]
    return asyncio.run(main())


def attempt(server, student, number, results, started=None, **kw):
    user = user_of(server, student.username)
    started = started or datetime.now(timezone.utc)
    return lambda exercises: exercises.record_attempt(user, number, "average", started, results, **kw)


# -- the checks area is the teachers' -----------------------------------------------------

def test_the_checks_area_is_for_the_classes_teachers_only(server, people, room):
    number, teacher, ann, ben, out = room
    other = people.teacher("mr-x")
    area = f"/api/files/checks/{number}"
    for name in ("exercise.toml", "instructions.md", "tests.py", "starter/average.py"):
        r = teacher.request("PUT", f"{area}/average/{name}", data=(EXAMPLE / name).read_bytes())
        assert r.status_code == 200, r.text
    assert [e["name"] for e in teacher.get(area).json()["entries"]] == ["average"]
    [mine] = [c for c in teacher.get("/api/classes").json()["classes"] if c["id"] == number]
    assert mine["checks"] == f"checks/{number}" and "checks" not in ann.get("/api/classes").json()["classes"][0]
    admin = people.admin("root")
    assert admin.get(f"{area}/average/tests.py").json()["content"] == (EXAMPLE / "tests.py").read_text()

    calls = [("GET", ""), ("GET", "/average"), ("GET", "/average/tests.py"), ("GET", "/average/tests.py?download=1"),
             ("PUT", "/average/tests.py"), ("POST", "/average/x"), ("DELETE", "/average/tests.py")]
    others = [("GET", f"/api/zip/checks/{number}/average"), ("GET", f"/api/history/checks/{number}/average/tests.py"),
              ("GET", f"/api/trash/checks/{number}"), ("POST", f"/api/upload/checks/{number}/average")]
    hostile = [f"/api/files/checks/{number}/..%2F..%2Fhome", f"/api/files/checks/{number}%2F..%2F..",
               "/api/files/checks/..%2Fcourse",
               "/api/files/checks/abc/x", "/api/files/checks/-1", "/api/files/checks/%20" + str(number),
               f"/api/files/checks/{number}x/tests.py", f"/api/files/checks/0{number}/average/tests.py"]
    for student in (ann, out, other):
        for method, path in [(m, area + p) for m, p in calls] + others + [("GET", h) for h in hostile]:
            kw = {"json": {"action": "mkdir"}} if method == "POST" and "upload" not in path else {"data": b"x"}
            r = student.request(method, path, **kw)
            assert r.status_code in (400, 403, 404), (student.username, method, path, r.status_code, r.text)
            assert "SECRET" not in r.text and "def test_" not in r.text and r.json()["error"]
    r = ann.get(f"{area}/average/tests.py")
    assert r.json() == {"error": "not_your_class", "message": "You do not teach this class."}
    assert teacher.get(f"{area}/average/tests.py").json()["content"] == (EXAMPLE / "tests.py").read_text()
    # A program of a student cannot look into the checks either: only the server's user may enter.
    storage = pathlib.Path(server.env["DATA_DIR"]) / "storage" / "checks"
    assert storage.stat().st_mode & 0o077 == 0


# -- teachers write exercises ------------------------------------------------------------

def test_a_teacher_writes_an_exercise_with_the_form_and_reads_it_back(server, room):
    number, teacher, ann, *_ = room
    made = put_exercise(teacher, number)
    assert made["problems"] == [] and made["max_score"] == 2 + 3 + 1 + 1 + 2 + 1  # test_one: 1 point, unnamed
    assert [(c["id"], c["declared"]) for c in made["checks"]][-1] == ("test_one", False)
    assert made["starter"] == {"average.py": "def average(numbers):\n    return 0\n", "data/numbers.txt": "4\n6\n"}
    # The form's files are the exercise's files: the teacher's IDE shows them.
    toml = teacher.get(f"/api/files/checks/{number}/average/exercise.toml").json()
    assert toml["content"] == made["toml"] and 'id = "secret-id-55"' in toml["content"]
    assert teacher.get(f"/api/files/checks/{number}/average/tests.py").json()["content"] == TESTS_PY

    # What the GET gives back, PUT again, changes nothing (no new versions either).
    back = {k: made[k] for k in ("title", "file", "due", "instructions", "tests", "starter", "checks", "etag")}
    again = teacher.request("PUT", f"/api/classes/{number}/exercises/average", json=back).json()
    assert again["toml"] == made["toml"] and again["checks"] == made["checks"]
    assert teacher.get(f"/api/history/checks/{number}/average/tests.py").json()["versions"] == []

    # Edited from an older copy: a conflict, nothing written.
    renamed = put_exercise(teacher, number, title="Mean", etag=made["etag"])
    r = teacher.request("PUT", f"/api/classes/{number}/exercises/average", json=form(title="Old", etag=made["etag"]))
    assert r.status_code == 409 and r.json()["error"] == "conflict", r.text
    assert teacher.get(f"/api/classes/{number}/exercises/average").json()["toml"] == renamed["toml"]
    # A starter set replaces the old one; the file left out goes to the trash.
    changed = put_exercise(teacher, number, starter={"average.py": "# new\n"}, due="2030-01-01T10:00:00+01:00")
    assert changed["starter"] == {"average.py": "# new\n"} and changed["due"] == "2030-01-01T10:00:00+01:00"
    assert "due = 2030-01-01T10:00:00+01:00" in changed["toml"]
    listed = teacher.get(f"/api/classes/{number}/exercises").json()["exercises"]
    assert [(e["slug"], e["title"], e["problems"]) for e in listed] == [("average", "Average", [])]

    # An invalid form is refused with the format's sentences, and writes nothing.
    bad = form(checks=[{"id": "a", "kind": "output", "expected": "1", "points": "many"}])
    r = teacher.request("PUT", f"/api/classes/{number}/exercises/average", json=bad)
    assert r.status_code == 400 and r.json()["problems"] == [
        "exercise.toml, check 1: 'points' must be a whole number from 0 to 1000."], r.text
    assert teacher.get(f"/api/classes/{number}/exercises/average").json()["toml"] == changed["toml"]

    assert teacher.request("DELETE", f"/api/classes/{number}/exercises/average").json() == {"deleted": "average"}
    assert teacher.get(f"/api/classes/{number}/exercises").json()["exercises"] == []
    assert teacher.get(f"/api/classes/{number}/exercises/average").status_code == 404
    assert ann.get("/api/exercises").json()["exercises"] == []


def test_an_exercise_from_git_with_problems_is_listed_with_them_and_kept_from_students(server, room):
    number, teacher, ann, *_ = room
    area = f"/api/files/checks/{number}"
    teacher.request("PUT", f"{area}/broken/exercise.toml", data=b'title = "Broken"\nfile = "b.py"\n'
                                                               b'[[check]]\nid = "x"\nkind = "output"\npoints = 1.5\n')
    teacher.request("PUT", f"{area}/Week 1/exercise.toml", data=b'title = "W"\nfile = "w.py"\n')
    teacher.request("POST", f"{area}/empty", json={"action": "mkdir"})
    put_exercise(teacher, number)
    listed = {e["slug"]: e["problems"] for e in teacher.get(f"/api/classes/{number}/exercises").json()["exercises"]}
    assert listed["average"] == []
    assert listed["broken"] == ["exercise.toml, check 1: 'points' must be a whole number from 0 to 1000.",
                                "exercise.toml, check 1: 'expected' is missing."]
    assert listed["empty"] == ["empty/exercise.toml is missing: every exercise folder needs one."]
    assert listed["Week 1"][0].startswith("Week 1/: An exercise's folder name must be")
    assert [e["slug"] for e in ann.get("/api/exercises").json()["exercises"]] == ["average"]
    assert ann.get(f"/api/exercises/{number}/broken").json()["error"] == "no_such_exercise"
    assert [e["slug"] for e in teacher.get("/api/classes/%d/grid" % number).json()["exercises"]] == ["average"]


# -- students --------------------------------------------------------------------------

def test_a_student_never_sees_hidden_material(server, room):
    number, teacher, ann, ben, out = room
    put_exercise(teacher, number)
    seen = Recording(ann)
    mine = ann.get("/api/exercises").json()["exercises"]
    assert [(e["class"]["id"], e["slug"], e["max_score"], e["progress"]) for e in mine] == [(number, "average", 10, None)]
    view = ann.get(f"/api/exercises/{number}/average").json()
    assert view["instructions"].startswith("# Average") and view["starter"] == ["average.py", "data/numbers.txt"]
    checks = view["checks"]
    assert checks[0] == {"id": "shown", "label": "Output: shown", "kind": "output", "points": 2,
                         "hint": "Print 'Average: ' first.", "input": "4\n6\n\n", "expected": "Average: 5.0\n",
                         "compare": "normalized"}
    assert checks[1] == {"id": "hidden-1", "label": "Hidden check 1", "points": 3, "hidden": True}
    assert checks[2] == {"id": "hidden-2", "label": "Hidden check 2", "points": 1, "hidden": True}  # after_due
    assert [c["label"] for c in checks[3:]] == ["Uses a loop", "Test: test_two", "Test: test_one"]
    ann.post(f"/api/exercises/{number}/average/start")

    results = [{"id": "shown", "passed": False, "message": "Expected Average: 5.0, got 0", "details": {"out": "0"}},
               {"id": "secret-id-55", "passed": False, "message": "SECRET-MESSAGE-13: got x, wanted SECRET-OUT-9a1",
                "details": {"stdin": "SECRET-IN-7f3", "why": "SECRET-DETAILS-21"}},
               {"id": "later", "passed": True, "message": "LATER-IN-8c"},
               {"id": "loop", "passed": True}, {"id": "two", "passed": True}]
    [recorded] = grader(server, attempt(server, ann, number, results))
    # What record_attempt answers (for the grader to pass on) is already filtered.
    assert not [s for s in SECRETS if s in json.dumps(recorded)]
    assert recorded["score"] == 1 + 2 + 1 and recorded["counted"] and recorded["note"] == ""
    assert recorded["results"][1] == {"id": "hidden-1", "label": "Hidden check 1", "passed": False, "points": 3,
                                      "earned": 0, "hidden": True, "message": "Not passed yet."}
    assert recorded["results"][0]["hint"] == "Print 'Average: ' first."
    assert recorded["results"][5]["message"] == "This check did not run."  # test_one: no result

    view = ann.get(f"/api/exercises/{number}/average").json()
    assert view["progress"]["results"] == recorded["results"] and view["progress"]["attempts"] == 1
    ann.get("/api/exercises")
    # The teacher sees it all.
    full = teacher.get(f"/api/classes/{number}/exercises/average/attempts/{ann.username}").json()
    assert full["checks"][1]["message"].startswith("SECRET-MESSAGE-13")
    assert full["checks"][1]["details"]["why"] == "SECRET-DETAILS-21"
    # Not one response to the student held any of it; nor the other files calls they might try.
    for path in ("/api/files/home", f"/api/files/home/average", f"/api/files/checks/{number}/average/tests.py",
                 f"/api/classes/{number}/exercises/average", f"/api/classes/{number}/grid",
                 f"/api/classes/{number}/exercises/average/attempts/{ann.username}", "/api/roster",
                 f"/api/roster?class={number}"):
        assert ann.get(path).status_code in (200, 403, 404)
    assert seen.bodies and seen.leaked() == []


def test_start_copies_the_starters_and_never_overwrites_the_students_work(server, room):
    number, teacher, ann, ben, out = room
    put_exercise(teacher, number)
    r = ann.post(f"/api/exercises/{number}/average/start")
    assert r.json() == {"folder": "average", "path": "average/average.py",
                        "copied": ["average/average.py", "average/data/numbers.txt"], "kept": []}, r.text
    etag = ann.get("/api/files/home/average/average.py").json()["etag"]
    ann.request("PUT", "/api/files/home/average/average.py", data=b"mine\n", headers={"If-Match": etag})
    ann.request("DELETE", "/api/files/home/average/data/numbers.txt")
    r = ann.post(f"/api/exercises/{number}/average/start").json()
    assert r["copied"] == ["average/data/numbers.txt"] and r["kept"] == ["average/average.py"]
    assert ann.get("/api/files/home/average/average.py").json()["content"] == "mine\n"
    # Only the class's members start its exercises.
    assert out.post(f"/api/exercises/{number}/average/start").json()["error"] == "not_your_class"
    assert out.get("/api/files/home/average").status_code == 404
    assert ann.post(f"/api/exercises/{number}/nothing/start").json()["error"] == "no_such_exercise"


# -- attempts, the grid, grades.csv ----------------------------------------------------------

def test_attempts_fill_the_grid_and_the_csv(server, people):
    teacher = people.teacher("mrs-g")
    ann = people.student("ann", display_name="=HYPERLINK(\"http://x\")")
    ben = people.student("ben", display_name="Bén Ünïcode")
    cy = people.student("cy")
    number = a_class(server, teacher, ann, ben, cy)
    put_exercise(teacher, number)
    everything = [{"id": i, "passed": True} for i in ("shown", "secret-id-55", "later", "loop", "two", "test_one")]
    half = [{"id": "shown", "passed": True}, {"id": "two", "passed": True}]
    ann1, ann2, ann3, ben1 = grader(
        server, attempt(server, ann, number, everything), attempt(server, ann, number, half),
        attempt(server, ann, number, everything, not_gradable=True, message="Line 3: invalid syntax"),
        attempt(server, ben, number, half))
    assert (ann1["score"], ann2["score"], ann3["score"]) == (10, 4, 0)
    assert ann3["counted"] is False and ann3["note"] == \
        "Your program could not be checked, so this did not count as an attempt: Line 3: invalid syntax"
    assert [ann1["attempts"], ann2["attempts"], ann3["attempts"]] == [1, 2, 2]

    grid = teacher.get(f"/api/classes/{number}/grid").json()
    assert grid["exercises"] == [{"slug": "average", "title": "Average", "due": None, "max_score": 10}]
    rows = {s["username"]: s for s in grid["students"]}
    cell = rows[ann.username]["cells"]["average"]
    assert (cell["attempts"], cell["best"], cell["latest"], cell["not_gradable"]) == (2, 10, 0, True)
    assert cell["stuck_on"] == ["shown", "secret-id-55", "later", "loop", "two", "test_one"]
    assert rows[ben.username]["cells"]["average"]["stuck_on"] == ["secret-id-55", "later", "loop", "test_one"]
    assert rows[cy.username]["cells"] == {"average": None}  # not started
    assert rows[ben.username]["name"] == "Bén Ünïcode"

    latest = teacher.get(f"/api/classes/{number}/exercises/average/attempts/{ann.username}").json()
    assert latest["id"] == ann3["id"] and latest["not_gradable"] and latest["message"] == "Line 3: invalid syntax"
    r = teacher.get(f"/api/classes/{number}/exercises/average/attempts/{cy.username}")
    assert r.status_code == 404 and r.json()["error"] == "no_attempt"
    r = teacher.get(f"/api/classes/{number}/exercises/average/attempts/{teacher.username}")
    assert r.status_code == 404 and r.json()["error"] == "no_such_student"

    r = teacher.get(f"/api/classes/{number}/grades.csv")
    assert r.headers["Content-Type"] == "text/csv; charset=utf-8" and r.content.startswith(b"\xef\xbb\xbf")
    table = list(csv.reader(io.StringIO(r.content.decode("utf-8-sig"))))
    assert table[0] == ["username", "name", "Average (10)"]
    assert table[1:] == [[ann.username, "'=HYPERLINK(\"http://x\")", "10"], [ben.username, "Bén Ünïcode", "4"],
                         [cy.username, "Cy", ""]]
    for path in ("grid", "grades.csv", "exercises/average/attempts/" + ann.username):
        assert ann.get(f"/api/classes/{number}/{path}").status_code == 403
        assert people.teacher("mr-x").get(f"/api/classes/{number}/{path}").json()["error"] == "not_your_class"


def test_grades_csv_escapes_formulas_behind_invisible_and_full_width_characters(server, people):
    """OWASP's CSV injection, as spreadsheets fold and skip characters: a
    zero-width space, a byte order mark, a word joiner, spaces, the
    full-width and small forms of = + - @."""
    teacher = people.teacher("mrs-c")
    names = ["\u200b=HYPERLINK(\"http://x\")", "\ufeff@SUM(A1)", "\u2060\u00a0-2+3", "\uff1d1+1", "\uff0bcmd",
             "\uff0d1", "\uff20A1", "\ufe66A1", "\u3000=1", "\u3164=1"]
    students = [people.student(f"f{i}", display_name=name) for i, name in enumerate(names)]
    plain = people.student("plain", display_name="Ann = 1 + 1")
    number = a_class(server, teacher, *students, plain)
    put_exercise(teacher, number, title="\uff1dTitle")
    r = teacher.get(f"/api/classes/{number}/grades.csv")
    table = list(csv.reader(io.StringIO(r.content.decode("utf-8-sig"))))
    assert table[0][2] == "'\uff1dTitle (10)"
    shown = {row[0]: row[1] for row in table[1:]}
    for student, name in zip(students, names):
        assert shown[student.username] == "'" + name, (name, shown[student.username])
    assert shown[plain.username] == "Ann = 1 + 1"  # only a cell's start makes a formula


def test_a_slug_with_a_control_character_is_a_bad_slug(server, room):
    """Not 'no such exercise': `$` matched before a final newline."""
    number, teacher, ann, *_ = room
    put_exercise(teacher, number)
    for slug in ("average%0A", "average%0D", "average%09", "average%00", "average%0A%0A", "%0Aaverage"):
        for who, path in ((teacher, f"/api/classes/{number}/exercises/{slug}"),
                          (teacher, f"/api/classes/{number}/exercises/{slug}/attempts/{ann.username}"),
                          (ann, f"/api/exercises/{number}/{slug}")):
            r = who.get(path)
            assert r.status_code == 400 and r.json()["error"] == "bad_slug", (slug, path, r.text)
    assert model.slug_problem("average\n") and not model.slug_problem("average")


def test_a_due_date_stops_counting_and_shows_the_after_due_checks(server, room):
    number, teacher, ann, *_ = room
    due = datetime.now(timezone.utc) + timedelta(seconds=3)
    put_exercise(teacher, number, due=due.isoformat())
    assert ann.get(f"/api/exercises/{number}/average").json()["due_passed"] is False
    before, after = grader(
        server, attempt(server, ann, number, [{"id": "shown", "passed": True}], started=due - timedelta(seconds=1)),
        attempt(server, ann, number, [{"id": "shown", "passed": True}, {"id": "later", "passed": True}],
                started=due + timedelta(seconds=1)))
    assert before["counted"] and not after["counted"]
    assert after["note"].startswith("The due date (") and "no longer counts towards your grade" in after["note"]
    cell = teacher.get(f"/api/classes/{number}/grid").json()["students"][0]["cells"]["average"]
    assert (cell["attempts"], cell["best"], cell["latest"], cell["latest_counted"]) == (1, 2, 3, False)
    while datetime.now(timezone.utc) < due:
        asyncio.run(asyncio.sleep(0.2))
    view = ann.get(f"/api/exercises/{number}/average").json()
    assert view["due_passed"] is True
    later = [c for c in view["checks"] if c["id"] == "later"]
    assert later and later[0]["input"] == "LATER-IN-8c" and later[0]["hint"] == "LATER-HINT-3"
    assert [c["label"] for c in view["checks"] if c.get("hidden")] == ["Hidden check 1"]


def test_the_live_class_view_follows_attempts(server, room):
    number, teacher, ann, *_ = room
    put_exercise(teacher, number)

    async def main():
        async with watching(server, teacher, number) as (ws, _):
            first = await until(ws, lambda s: s["username"] == ann.username)
            assert first["last_check"] is None
            async with grader_side(server) as exercises:
                await attempt(server, ann, number, [{"id": "shown", "passed": True}])(exercises)
            return await until(ws, lambda s: s["username"] == ann.username and s["last_check"])
    last = asyncio.run(main())["last_check"]
    assert (last["exercise"], last["score"], last["max_score"]) == ("average", 2, 10)


# -- bad input ------------------------------------------------------------------------------

def test_bad_input_gets_a_clear_json_error_and_changes_nothing(server, people, room):
    number, teacher, ann, *_ = room
    put_exercise(teacher, number)
    before = teacher.get(f"/api/classes/{number}/exercises/average").json()
    base = f"/api/classes/{number}/exercises"
    bad_bodies = [
        ("not json", {"data": b"{nope", "headers": {"Content-Type": "application/json"}}),
        ("a list", {"json": [1, 2]}),
        ("text", {"data": b"title=x", "headers": {"Content-Type": "text/plain"}}),
        ("huge", {"data": b'{"title": "' + b"x" * (3 << 20) + b'"}', "headers": {"Content-Type": "application/json"}}),
        ("wrong types", {"json": form(title=5)}),
        ("checks not a list", {"json": form(checks={"a": 1})}),
        ("check not a table", {"json": form(checks=["x"])}),
        ("tests not text", {"json": form(tests=["def test_a(): pass"])}),
        ("starter path", {"json": form(starter={"../../escape.py": "x"})}),
        ("starter absolute", {"json": form(starter={"/etc/passwd": "x"})}),
        ("starter not text", {"json": form(starter={"a.py": 3})}),
        ("starter file and folder", {"json": form(starter={"data": "x", "data/b.py": "y"})}),
        ("lone surrogate", {"data": b'{"title": "\\ud800"}', "headers": {"Content-Type": "application/json"}}),
        ("due", {"json": form(due="tomorrow")}),
        ("due no zone", {"json": form(due="2030-01-01T10:00:00")}),
        ("due seconds zone", {"json": form(due="2030-01-01T10:00:00+01:00:30")}),
        ("file", {"json": form(file="../../home/x.py")}),
        ("title huge", {"json": form(title="x" * 1000)}),
        ("nested", {"data": b'{"checks": ' + b"[" * 100000 + b"]" * 100000 + b"}",
                    "headers": {"Content-Type": "application/json"}}),
    ]
    for name, kw in bad_bodies:
        r = teacher.request("PUT", f"{base}/average", **kw)
        assert 400 <= r.status_code < 500 and r.json()["error"] and r.json()["message"], (name, r.status_code, r.text)
    hostile = ["..", ".", "%2e%2e", "..%2F..%2Fhome", "Average", "a b", "x" * 65, "-x", "%00", "%E2%80%AE",
               "average%2Fstarter", "ave%0Arage"]
    for slug in hostile:
        for method, path in (("PUT", f"{base}/{slug}"), ("GET", f"{base}/{slug}"), ("DELETE", f"{base}/{slug}"),
                             ("GET", f"/api/exercises/{number}/{slug}"), ("POST", f"/api/exercises/{number}/{slug}/start"),
                             ("GET", f"{base}/{slug}/attempts/{ann.username}")):
            r = teacher.request(method, path, **({"json": form()} if method == "PUT" else {}))
            # (the client resolves "." and ".." itself: what is left may be another URL, refused all the same)
            assert r.status_code in (400, 404, 405), (slug, method, r.status_code, r.text)
            assert r.json()["error"] in ("bad_slug", "not_found", "method_not_allowed"), (slug, method, r.text)
    for username in ("..", "ADMIN", "a%00", "x" * 80, "%2e%2e%2fadmin"):
        r = teacher.get(f"{base}/average/attempts/{username}")
        assert r.status_code == 404 and r.json()["error"] in ("no_such_student", "not_found"), r.text
    for path in (f"/api/classes/999999999/exercises", f"/api/classes/999999999/grid",
                 f"/api/exercises/999999999/average", f"/api/classes/{number}0/grades.csv"):
        r = teacher.get(path)
        assert r.status_code == 404 and r.json()["error"] == "no_such_class", (path, r.text)
    assert ann.request("PUT", f"{base}/average", json=form(title="Mine")).status_code == 403
    assert ann.request("DELETE", f"{base}/average").status_code == 403
    assert people.teacher("mr-x").request("PUT", f"{base}/average", json=form()).json()["error"] == "not_your_class"
    assert teacher.get(f"/api/classes/{number}/exercises/average").json() == before
    assert [e["slug"] for e in teacher.get(base).json()["exercises"]] == ["average"]
    assert teacher.get(f"/api/files/checks/{number}").json()["entries"][0]["name"] == "average"


NASTY = ["", "\x00", "\ud800", "\u202e", "../..", "/etc/passwd", "x" * 300, "1e999", "[[check]]", '"\n[x]\n',
         "test_two", "average.py", "uses_loop", "2030-01-01T10:00:00+01:00", "defines:", "hidden"]
any_text = st.one_of(st.sampled_from(NASTY), st.text(max_size=30))
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), any_text)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(any_text, inner, max_size=3),
                      max_leaves=8)
check_tables = st.fixed_dictionaries({}, optional={k: st.one_of(values, st.sampled_from(model.KINDS + model.COMPARES
                                                                                         + model.VISIBILITIES))
                                                   for k in model.COMMON_KEYS + ("input", "expected", "compare",
                                                                                  "test", "rule", "declared")})
forms = st.fixed_dictionaries({}, optional={
    "title": values, "file": values, "due": values, "instructions": values, "tests": values, "etag": values,
    "starter": st.one_of(values, st.dictionaries(any_text, values, max_size=3)),
    "checks": st.one_of(values, st.lists(check_tables, max_size=3))})


@pytest.fixture
def fuzzed_room(server, people):
    teacher, ann = people.teacher("mrs-f"), people.student("ann")
    number = a_class(server, teacher, ann)
    put_exercise(teacher, number)
    return number, teacher, teacher.get(f"/api/classes/{number}/exercises/average").json()


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(body=forms)
def test_any_form_is_saved_whole_or_refused_in_a_sentence(fuzzed_room, body):
    number, teacher, before = fuzzed_room
    data = json.dumps(body, allow_nan=False).encode("utf-8", "surrogatepass")
    r = teacher.request("PUT", f"/api/classes/{number}/exercises/average", data=data,
                        headers={"Content-Type": "application/json"})
    assert r.status_code < 500 and r.json(), r.text
    if r.status_code != 200:
        assert r.json()["error"] and r.json()["message"]
        assert teacher.get(f"/api/classes/{number}/exercises/average").json() == before
    else:
        put_exercise(teacher, number)  # back as it was, for the next example


def test_files_the_form_cannot_show_are_named_or_left_as_they_are(server, room):
    number, teacher, ann, *_ = room
    area = f"/api/files/checks/{number}"
    put_exercise(teacher, number)
    picture = bytes(range(256)) * 4
    teacher.request("PUT", f"{area}/average/starter/picture.png", data=picture)
    made = teacher.get(f"/api/classes/{number}/exercises/average").json()
    assert made["starter"]["picture.png"] is None
    # The form sent back as read leaves the picture; the student gets it.
    back = {k: made[k] for k in ("title", "file", "due", "instructions", "tests", "starter", "checks", "etag")}
    assert teacher.request("PUT", f"/api/classes/{number}/exercises/average", json=back).status_code == 200
    assert teacher.get(f"{area}/average/starter/picture.png?download=1").content == picture
    assert "average/picture.png" in ann.post(f"/api/exercises/{number}/average/start").json()["copied"]
    assert ann.get("/api/files/home/average/picture.png?download=1").content == picture
    # An exercise.toml that is not text is a problem named, not an error.
    teacher.request("PUT", f"{area}/binary/exercise.toml", data=b"\xff\xfe title")
    listed = {e["slug"]: e["problems"] for e in teacher.get(f"/api/classes/{number}/exercises").json()["exercises"]}
    assert listed["binary"] == ["binary/exercise.toml is not text (UTF-8)."]
    assert teacher.get(f"/api/classes/{number}/exercises/binary").json()["problems"] == listed["binary"]
