"""Exams (server/exams/): made by a class's teacher from its exercises,
taken by each student in a folder of the exam's, on the server's clock,
and locked at each student's end through every path that changes files.
Attacks through the API: another student's folder, another class's
exam, a teacher of another class, a student making an exam, forms that
make no sense. A real server (the shared one), real PostgreSQL."""
import asyncio
import time
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from server.errors import Refused
from server.exams.service import Exams
from server.files.area import Area
from tests.live_support import a_class, user_of
from tests.test_exercises import grader_side

GRACE = 5  # exams/service.py GRACE: a student's end is enforced this long after it
EXERCISE = {"title": "Average", "file": "average.py", "due": None, "instructions": "Write `average(numbers)`.\n",
            "tests": "", "starter": {"average.py": "def average(numbers):\n    return 0\n"},
            "checks": [{"id": "shown", "kind": "output", "input": "4\n6\n", "expected": "5.0\n"}]}


def room(server, people):
    """A class of its own with the exercise 'average': (number, teacher, ann, ben)."""
    teacher, ann, ben = people.teacher("mr-e"), people.student("ann"), people.student("ben")
    number = a_class(server, teacher, ann, ben)
    r = teacher.request("PUT", f"/api/classes/{number}/exercises/average", json=EXERCISE)
    assert r.status_code == 200, r.text
    return number, teacher, ann, ben


def exam(teacher, number, **form):
    r = teacher.request("POST", f"/api/classes/{number}/exams",
                        json={"title": "Test 1", "exercises": ["average"], **form})
    assert r.status_code == 201, r.text
    return r.json()["exam"]


def iso(seconds_from_now):
    return (datetime.now(timezone.utc) + timedelta(seconds=seconds_from_now)).isoformat()


def save(client, spec, path, text, etag="*"):
    return client.request("PUT", f"/api/files/{spec}/{path}", data=text.encode(), headers={"If-Match": etag})


def test_a_teacher_makes_an_exam_and_each_student_works_in_a_folder_of_their_own(server, people):
    number, teacher, ann, ben = room(server, people)
    made = exam(teacher, number, minutes=30, allows={"assist": True, "own_files": True})
    assert made["state"] == "running" and made["allows"] == {"run": True, "check": True, "assist": True,
                                                             "own_files": True, "ask": True}
    mine = ann.request("GET", "/api/exam").json()["exam"]
    assert (mine["id"], mine["state"], mine["folder"]) == (made["id"], "running", f"exam/{made['id']}")
    assert 1700 < mine["seconds_left"] <= 1800  # the server's clock says so, not the browser's
    spec = mine["folder"]
    listed = ann.request("GET", f"/api/files/{spec}/average").json()["entries"]
    assert [e["name"] for e in listed] == ["average.py"]  # the exercise's starter, given at the first look
    assert save(ann, spec, "average/average.py", "def average(n):\n    return sum(n) / len(n)\n").status_code == 200
    assert ann.request("GET", "/api/files/home/average/average.py").status_code == 404  # not in her home

    seen = teacher.request("GET", f"/api/files/exams/{made['id']}/{ann.username}/average/average.py")
    assert seen.status_code == 200 and "sum(n)" in seen.json()["content"], seen.text
    r = save(teacher, f"exams/{made['id']}/{ann.username}", "average/average.py", "changed by the teacher")
    assert (r.status_code, r.json()["error"]) == (403, "read_only")
    staff = teacher.request("GET", f"/api/exams/{made['id']}").json()["exam"]
    assert [s["username"] for s in staff["students"]] == sorted([ann.username, ben.username])
    assert teacher.request("GET", f"/api/classes/{number}/exams").json()["exams"][0]["id"] == made["id"]


def test_at_a_students_end_their_folder_stops_changing_through_every_path(server, people):
    number, teacher, ann, ben = room(server, people)
    made = exam(teacher, number, ends=iso(4))
    spec = f"exam/{made['id']}"
    r = teacher.request("PUT", f"/api/exams/{made['id']}/students/{ben.username}/extra", json={"minutes": 10})
    assert r.status_code == 200 and r.json()["extra_minutes"] == 10, r.text
    assert ben.request("GET", f"/api/exams/{made['id']}").json()["exam"]["extra_minutes"] == 10

    assert save(ann, spec, "answer.py", "first").status_code == 200
    etag = save(ann, spec, "answer.py", "handed in").json()["etag"]
    assert save(ann, spec, "gone.py", "to delete").status_code == 200
    assert ann.request("DELETE", f"/api/files/{spec}/gone.py").status_code == 200
    version = ann.request("GET", f"/api/history/{spec}/answer.py").json()["versions"][-1]["version"]
    deleted = ann.request("GET", f"/api/trash/{spec}").json()["entries"][0]["id"]
    time.sleep(max(0.0, datetime.fromisoformat(made["ends"]).timestamp() - time.time()) + GRACE + 0.5)

    assert ann.request("GET", "/api/exam").json()["exam"] is None  # nothing running for her any more
    refused = [save(ann, spec, "answer.py", "after the end", etag),
               save(ann, spec, "new.py", "after the end"),
               ann.request("POST", f"/api/files/{spec}/later", json={"action": "mkdir"}),
               ann.request("POST", f"/api/files/{spec}/answer.py", json={"action": "move", "to": "moved.py"}),
               ann.request("POST", f"/api/files/{spec}/answer.py", json={"action": "restore", "version": version}),
               ann.request("DELETE", f"/api/files/{spec}/answer.py"),
               ann.request("POST", f"/api/trash/{spec}", json={"id": deleted}),
               ann.request("POST", f"/api/upload/{spec}", files={"file": ("up.py", b"uploaded")})]
    assert [(r.status_code, r.json()["error"]) for r in refused] == [(403, "exam_over")] * len(refused)
    assert "can no longer change" in refused[0].json()["message"]
    names = sorted(e["name"] for e in ann.request("GET", f"/api/files/{spec}").json()["entries"])
    assert names == ["answer.py", "average"]  # and nothing else changed
    assert ann.request("GET", f"/api/files/{spec}/answer.py").json()["content"] == "handed in"

    assert save(ben, spec, "answer.py", "ben still writes").status_code == 200  # his extra time
    r = teacher.request("PUT", f"/api/exams/{made['id']}/students/{ben.username}/extra", json={"minutes": 0})
    assert r.status_code == 200
    time.sleep(GRACE + 0.5)
    assert save(ben, spec, "answer.py", "too late").status_code == 403


def test_the_files_service_itself_refuses_changes_to_a_locked_folder(server, people):
    """What changes files without the API (a run's files taken back, starter
    files) goes through the files service, which asks the exam too."""
    number, teacher, ann, _ = room(server, people)
    made = exam(teacher, number, ends=iso(2))
    assert save(ann, f"exam/{made['id']}", "answer.py", "handed in").status_code == 200
    time.sleep(max(0.0, datetime.fromisoformat(made["ends"]).timestamp() - time.time()) + GRACE + 0.5)
    area = Area.exam(made["id"], ann.username)

    async def changes():
        async with grader_side(server) as exercises:
            files = exercises.files
            files.exams = Exams(files.pool, exercises.classes, exercises)
            refused = []
            for change in (lambda: files.save(ann.username, area, ("answer.py",), b"changed", None),
                           lambda: files.mkdir(ann.username, area, ("later",)),
                           lambda: files.delete(ann.username, area, ("answer.py",)),
                           lambda: exercises.give_starters(ann.username, number, "average", area)):
                with pytest.raises(Refused) as e:
                    await change()
                refused.append(e.value.code)
            # A worker that never gave her the starters still shows her the folder.
            shown = await files.area(user_of(server, ann.username), f"exam/{made['id']}", write=False)
            return refused, shown
    assert asyncio.run(changes()) == (["exam_over"] * 4, area)
    assert ann.request("GET", f"/api/files/exam/{made['id']}/answer.py").json()["content"] == "handed in"


def exam_run(server, client, path, spec):
    """Run `path` of the exam folder `spec`: (exit or error message, output)."""
    from loadtest.run_client import RunClient

    async def go():
        async with RunClient(server.url, client.http.cookies.get_dict()) as rc:
            await rc.send(type="run", path=path, area=spec)
            seen = []
            while True:
                message = await rc.receive(60)
                seen.append(message)
                if message["type"] in ("exit", "error"):
                    return message, "".join(m.get("data", "") for m in seen if m["type"] == "output")
    return asyncio.run(go())


def test_a_student_runs_the_files_of_their_exam_folder_when_the_exam_lets_them(server, people):
    number, teacher, ann, ben = room(server, people)
    made = exam(teacher, number, minutes=30)
    spec = f"exam/{made['id']}"
    assert save(ann, spec, "average/numbers.txt", "4 6").status_code == 200
    code = "import statistics\nprint('mean', statistics.mean(map(int, open('numbers.txt').read().split())))\n"
    assert save(ann, spec, "average/main.py", code).status_code == 200
    ended, output = exam_run(server, ann, "average/main.py", spec)
    assert ended["type"] == "exit" and ended["reason"] == "ok" and "mean 5" in output, (ended, output)
    ended, _ = exam_run(server, ben, "average/main.py", spec)  # his own folder: no such file there
    assert ended["type"] == "error" and ended["error"] == "not_found", ended

    closed = exam(teacher, number, minutes=30, allows={"run": False})
    assert save(ann, f"exam/{closed['id']}", "main.py", "print(1)").status_code == 200
    ended, _ = exam_run(server, ann, "main.py", f"exam/{closed['id']}")
    assert (ended["type"], ended["error"]) == ("error", "run_off") and "turned off" in ended["message"], ended
    outsider = people.student("out")
    ended, _ = exam_run(server, outsider, "average/main.py", spec)
    assert (ended["type"], ended["error"]) == ("error", "no_such_exam"), ended
    ended, _ = exam_run(server, ann, "average/main.py", f"exams/{made['id']}/{ann.username}")
    assert ended["type"] == "error" and ended["error"] == "not_runnable_here", ended


def test_what_a_students_page_saw_reaches_the_teacher_as_evidence_with_the_servers_time(server, people):
    number, teacher, ann, ben = room(server, people)
    made = exam(teacher, number, minutes=30)
    url = f"/api/exams/{made['id']}/signals"
    sent = [{"kind": "paste", "chars": 812, "outside": True}, {"kind": "focus_lost"},
            {"kind": "focus_back", "away_seconds": 41.5}, {"kind": "offline"}, {"kind": "online", "away_seconds": 3}]
    for form in sent:
        r = ann.request("POST", url, json=form)
        assert r.status_code == 201, r.text
    # A signal is always the sender's own: a name in it changes nothing.
    assert ben.request("POST", url, json={"kind": "focus_lost", "username": ann.username}).status_code == 201
    assert save(ann, f"exam/{made['id']}", "main.py", "print(1)").status_code == 200
    ended, _ = exam_run(server, ann, "main.py", f"exam/{made['id']}")  # the server records Run itself
    assert ended["type"] == "exit", ended

    seen = teacher.request("GET", url, params={"student": ann.username}).json()["signals"]
    assert [(s["kind"], {k: v for k, v in s.items() if k not in ("id", "at", "kind", "username")}) for s in seen] == \
        [(f["kind"], {k: v for k, v in f.items() if k != "kind"}) for f in sent] + [("run", {})]
    assert {s["username"] for s in seen} == {ann.username}
    # Each at the server's time of arrival, in order: after the exam was made, before the server's now.
    later = datetime.fromisoformat(teacher.request("GET", f"/api/exams/{made['id']}").json()["exam"]["now"])
    times = [datetime.fromisoformat(made["now"])] + [datetime.fromisoformat(s["at"]) for s in seen] + [later]
    assert times == sorted(times), times
    everyone = teacher.request("GET", url).json()["signals"]
    assert [s["username"] for s in everyone].count(ben.username) == 1
    newer = teacher.request("GET", url, params={"after": str(seen[2]["id"])}).json()["signals"]
    assert newer[0]["id"] > seen[2]["id"]

    refused = [ann.request("POST", url, json=form) for form in (
        {"kind": "run"}, {"kind": "second_session"}, {"kind": "paste", "chars": -1, "outside": True},
        {"kind": "paste", "chars": "812", "outside": True}, {"kind": "paste", "chars": 1, "outside": 1},
        {"kind": "focus_back", "away_seconds": True}, {}, {"kind": ["paste"]})]
    assert [r.status_code for r in refused] == [400] * len(refused) and all(r.json()["message"] for r in refused)
    outsider, other_teacher = people.student("out"), people.teacher("mr-o")
    a_class(server, other_teacher, outsider)
    assert outsider.request("POST", url, json={"kind": "focus_lost"}).status_code == 404
    assert other_teacher.request("GET", url).status_code == 403
    assert ann.request("GET", url).status_code == 403  # a student reads nobody's, not even her own
    assert teacher.request("POST", url, json={"kind": "focus_lost"}).status_code == 403
    later = exam(teacher, number, starts=iso(3600), minutes=30)
    r = ann.request("POST", f"/api/exams/{later['id']}/signals", json={"kind": "focus_lost"})
    assert (r.status_code, r.json()["error"]) == (409, "exam_not_running")


def test_a_second_session_is_a_signal_and_every_tab_follows_the_exam_folder(server, people):
    from loadtest.run_client import RunClient
    from tests.conftest import PASSWORD
    number, teacher, ann, _ = room(server, people)
    made = exam(teacher, number, minutes=30)
    other = server.client()  # ann again, signed in elsewhere: another session
    other.login_ok(ann.username, PASSWORD)
    url = f"/api/exams/{made['id']}/signals"

    def kinds():
        return [s["kind"] for s in teacher.request("GET", url).json()["signals"]]

    def until(wanted):
        deadline = time.monotonic() + 30  # (a hang guard)
        while kinds() != wanted and time.monotonic() < deadline:
            time.sleep(0.1)
        return kinds()

    async def story():
        async with RunClient(server.url, ann.http.cookies.get_dict()) as first:
            await first.send(type="watch")
            assert await asyncio.to_thread(until, ["ide_opened"]) == ["ide_opened"]
            async with RunClient(server.url, ann.http.cookies.get_dict()) as again:  # the same session: a reload
                await again.send(type="watch")
                assert await asyncio.to_thread(until, ["ide_opened"] * 2) == ["ide_opened"] * 2
            async with RunClient(server.url, other.http.cookies.get_dict()) as second:
                await second.send(type="watch")
                assert await asyncio.to_thread(until, ["ide_opened"] * 2 + ["second_session"]) \
                    == ["ide_opened"] * 2 + ["second_session"]
                r = await asyncio.to_thread(save, ann, f"exam/{made['id']}", "average/average.py", "from tab one")
                assert r.status_code == 200
                told = await first.until("files", 30)  # (the other tab's too)
                told_second = await second.until("files", 30)
                return told, told_second
    for told in asyncio.run(story()):
        assert told["area"] == f"exam/{made['id']}" and any(c["path"] == "average/average.py"
                                                            for c in told["changes"]), told


def test_a_page_that_floods_signals_is_told_to_wait(server, people):
    number, teacher, ann, _ = room(server, people)
    made = exam(teacher, number, minutes=30)
    url = f"/api/exams/{made['id']}/signals"
    codes = [ann.request("POST", url, json={"kind": "focus_lost"}).status_code for _ in range(121)]
    assert codes[:120] == [201] * 120 and codes[120] == 429
    assert len(teacher.request("GET", url).json()["signals"]) == 120


def exam_check(server, client, spec, number, slug="average"):
    """Press Check on the exam folder's file of `slug`: the attempt, or the error."""
    from loadtest.run_client import RunClient

    async def go():
        async with RunClient(server.url, client.http.cookies.get_dict()) as rc:
            await rc.send(type="check", **{"class": number}, exercise=slug, area=spec)
            while True:
                message = await rc.receive(120)
                if message["type"] == "error" or message["type"] == "check" and message.get("state") == "done":
                    return message
    return asyncio.run(go())


def test_a_student_checks_the_file_of_her_exam_folder_when_the_exam_lets_her(server, people):
    number, teacher, ann, ben = room(server, people)
    made = exam(teacher, number, minutes=30)
    spec = f"exam/{made['id']}"
    assert save(ann, "home", "average/average.py", "print('the wrong answer')").status_code in (200, 403)
    assert save(ann, spec, "average/average.py", "a = float(input())\nb = float(input())\nprint((a + b) / 2)\n") \
        .status_code == 200
    done = exam_check(server, ann, spec, number)
    assert done["type"] == "check" and done["attempt"]["score"] == done["attempt"]["max_score"] == 1, done
    done = exam_check(server, ben, spec, number)  # his own folder: the starter, which prints 0
    assert done["type"] == "check" and done["attempt"]["score"] == 0, done

    closed = exam(teacher, number, minutes=30, allows={"check": False})
    said = exam_check(server, ann, f"exam/{closed['id']}", number)
    assert (said["type"], said["error"]) == ("error", "check_off") and "turned off" in said["message"], said
    assert exam_check(server, ann, spec, number, slug="other")["error"] == "no_such_exercise"
    assert exam_check(server, ann, f"exams/{made['id']}/{ann.username}", number)["error"] == "not_checkable_here"
    assert exam_check(server, people.student("out"), spec, number)["error"] == "no_such_exam"
    # Each press the exam took is a signal for the teacher, with its exercise; a refused one is not.
    pressed = [(s["username"], s["exercise"]) for s in teacher.request(
        "GET", f"/api/exams/{made['id']}/signals").json()["signals"] if s["kind"] == "check"]
    assert pressed == [(ann.username, "average"), (ben.username, "average")], pressed


def test_during_an_exam_without_their_own_files_a_student_reaches_only_its_folder(server, people):
    from loadtest.run_client import RunClient
    number, teacher, ann, ben = room(server, people)
    assert save(ann, "home", "notes.py", "print('my notes')").status_code == 200
    open_exam = exam(teacher, number, minutes=30, allows={"own_files": True})
    assert ann.request("GET", "/api/files/home/notes.py").status_code == 200  # that exam allows them
    kept = exam(teacher, number, ends=iso(6))
    time.sleep(2.5)  # (what a worker knows of it is 2 s old at most)

    refused = [ann.request("GET", "/api/files/home/notes.py"), save(ann, "home", "notes.py", "changed"),
               ann.request("GET", "/api/files/course"), ann.request("POST", f"/api/exercises/{number}/average/start")]
    assert [(r.status_code, r.json()["error"]) for r in refused] == [(403, "exam_running")] * len(refused)
    assert "only its folder is open" in refused[0].json()["message"]
    assert teacher.request("GET", f"/api/files/user/{ann.username}/notes.py").status_code == 200  # not her teacher

    async def socket_answers():
        async with RunClient(server.url, ann.http.cookies.get_dict()) as rc:
            await rc.send(type="run", path="notes.py")
            ran = await rc.until("error", 30)
            await rc.send(type="check", **{"class": number}, exercise="average")
            checked = await rc.until("error", 30)
            return ran, checked
    for said in asyncio.run(socket_answers()):
        assert said["error"] == "exam_running", said
    # Her exam's files run where her own are not: a home of their own.
    code = "import os\nhome = os.path.expanduser('~')\nprint('home holds', sorted(os.listdir(home)))\n"
    assert save(ann, f"exam/{kept['id']}", "look.py", code).status_code == 200
    ended, output = exam_run(server, ann, "look.py", f"exam/{kept['id']}")
    assert ended["type"] == "exit" and "home holds" in output and "notes.py" not in output, (ended, output)
    ended, output = exam_run(server, ann, "look.py", f"exam/{kept['id']}")  # and again: nothing is left of the run before
    assert ended["type"] == "exit" and "notes.py" not in output, (ended, output)

    assert ben.request("GET", "/api/files/home").status_code == 403  # the class's exam: him too
    time.sleep(max(0.0, datetime.fromisoformat(kept["ends"]).timestamp() - time.time()) + 2.5)
    assert ann.request("GET", "/api/files/home/notes.py").json()["content"] == "print('my notes')"
    assert open_exam["allows"]["own_files"] is True


def test_what_an_exam_does_not_allow_is_refused_while_it_runs(server, people):
    number, teacher, ann, ben = room(server, people)
    helped = {"path": "hello.py", "source": "x = 1\n", "area": "home"}
    exam(teacher, number, minutes=30, allows={"own_files": True, "assist": False, "ask": False})
    time.sleep(2.5)  # (what a worker knows of it is 2 s old at most)
    for r, code in ((ann.request("POST", "/api/assist/check", json=helped), "assist_off"),
                    (ann.request("POST", f"/api/classes/{number}/hand", json={"note": "help"}), "ask_off")):
        assert (r.status_code, r.json()["error"]) == (403, code) and "turned off" in r.json()["message"], r.text
    # Her teacher is taking no exam: editing help answers him as before.
    assert teacher.request("POST", "/api/assist/check", json=helped).status_code in (200, 503)


def test_nobody_reaches_an_exam_that_is_not_theirs(server, people):
    number, teacher, ann, ben = room(server, people)
    outsider, other_teacher = people.student("out"), people.teacher("mr-o")
    a_class(server, other_teacher, outsider)
    made = exam(teacher, number, minutes=30)
    later = exam(teacher, number, starts=iso(3600), minutes=30)
    assert save(ann, f"exam/{made['id']}", "mine.py", "ann's").status_code == 200

    def answer(client, method, path, **kw):
        r = client.request(method, path, **kw)
        return r.status_code, r.json().get("error")
    assert answer(outsider, "GET", f"/api/exams/{made['id']}") == (404, "no_such_exam")
    assert answer(outsider, "GET", f"/api/files/exam/{made['id']}") == (404, "no_such_exam")
    assert answer(ann, "GET", f"/api/files/exams/{made['id']}/{ann.username}") == (403, "not_your_folder")
    assert answer(ben, "GET", f"/api/files/exam/{made['id']}/mine.py") == (404, "not_found")  # his own folder
    assert answer(ann, "GET", f"/api/files/exam/{later['id']}") == (403, "exam_not_started")
    assert answer(ann, "GET", "/api/files/exam/999999999") == (404, "no_such_exam")
    assert answer(other_teacher, "GET", f"/api/exams/{made['id']}") == (403, "not_your_class")
    assert answer(other_teacher, "GET", f"/api/files/exams/{made['id']}/{ann.username}/mine.py") \
        == (403, "not_your_class")
    assert answer(other_teacher, "POST", f"/api/classes/{number}/exams",
                  json={"title": "x", "exercises": ["average"], "minutes": 5}) == (403, "not_your_class")
    assert answer(other_teacher, "PUT", f"/api/exams/{made['id']}/students/{ann.username}/extra",
                  json={"minutes": 60}) == (403, "not_your_class")
    assert answer(ann, "POST", f"/api/classes/{number}/exams",
                  json={"title": "x", "exercises": ["average"], "minutes": 5})[0] == 403
    assert answer(ann, "PUT", f"/api/exams/{made['id']}/students/{ann.username}/extra", json={"minutes": 60})[0] == 403
    assert answer(teacher, "GET", f"/api/files/exams/{made['id']}/{outsider.username}") == (404, "no_such_student")
    assert answer(teacher, "PUT", f"/api/exams/{made['id']}/students/{outsider.username}/extra",
                  json={"minutes": 5}) == (404, "no_such_student")


BAD_FORMS = [
    ([], "malformed_json"), ({"exercises": ["average"], "minutes": 5}, "bad_title"),
    ({"title": " ", "exercises": ["average"], "minutes": 5}, "bad_title"),
    ({"title": "x", "exercises": [], "minutes": 5}, "bad_exercises"),
    ({"title": "x", "exercises": ["average", "average"], "minutes": 5}, "bad_exercises"),
    ({"title": "x", "exercises": ["nope"], "minutes": 5}, "no_such_exercise"),
    ({"title": "x", "exercises": ["../checks"], "minutes": 5}, None),
    ({"title": "x", "exercises": ["average"]}, "bad_end"),
    ({"title": "x", "exercises": ["average"], "minutes": 5, "ends": "2030-01-01T10:00:00+00:00"}, "bad_end"),
    ({"title": "x", "exercises": ["average"], "minutes": 0}, "bad_minutes"),
    ({"title": "x", "exercises": ["average"], "minutes": True}, "bad_minutes"),
    ({"title": "x", "exercises": ["average"], "minutes": 5, "starts": "2020-01-01T10:00:00+00:00"},
     "starts_in_the_past"),
    ({"title": "x", "exercises": ["average"], "minutes": 5, "starts": "2030-01-01T10:00:00"}, "bad_starts"),
    ({"title": "x", "exercises": ["average"], "ends": "yesterday"}, "bad_ends"),
    ({"title": "x", "exercises": ["average"], "minutes": 5, "allows": {"internet": True}}, "bad_allows"),
    ({"title": "x", "exercises": ["average"], "minutes": 5, "allows": {"run": "yes"}}, "bad_allows"),
]


def test_forms_that_make_no_sense_are_refused_in_words_and_make_nothing(server, people):
    number, teacher, _, _ = room(server, people)
    for form, code in BAD_FORMS:
        r = teacher.request("POST", f"/api/classes/{number}/exams", json=form)
        assert r.status_code in (400, 404) and r.json()["message"], (form, r.text)
        assert code is None or r.json()["error"] == code, (form, r.json())
    r = teacher.request("POST", f"/api/classes/{number}/exams", data=b"{not json",
                        headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert teacher.request("GET", f"/api/classes/{number}/exams").json()["exams"] == []


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                  max_size=3), max_leaves=8)


@given(form=st.fixed_dictionaries({}, optional={"title": JSON, "exercises": JSON, "starts": JSON, "minutes": JSON,
                                                 "ends": JSON, "allows": JSON}))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_form_gets_an_exam_or_a_sentence_never_a_server_error(server, people, form):
    if server.url not in FUZZ:  # (one class for all the examples)
        FUZZ[server.url] = room(server, people)[:2]
    number, teacher = FUZZ[server.url]
    r = teacher.request("POST", f"/api/classes/{number}/exams", json=form)
    assert r.status_code in (201, 400, 404), (form, r.status_code, r.text)
    assert r.status_code == 201 or r.json()["message"]


FUZZ: dict[str, tuple] = {}


@given(form=st.dictionaries(st.sampled_from(["kind", "chars", "outside", "away_seconds", "username"]), JSON,
                            max_size=4))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_signal_is_recorded_or_refused_in_words_never_a_server_error(server, people, form):
    if server.url not in FUZZ_SIGNALS:
        number, teacher, ann, _ = room(server, people)
        FUZZ_SIGNALS[server.url] = (exam(teacher, number, minutes=30)["id"], ann)
    exam_id, ann = FUZZ_SIGNALS[server.url]
    r = ann.request("POST", f"/api/exams/{exam_id}/signals", json=form)
    assert r.status_code in (201, 400, 429), (form, r.status_code, r.text)
    assert r.status_code == 201 or r.json()["message"]


FUZZ_SIGNALS: dict[str, tuple] = {}
