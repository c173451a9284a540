"""Grading an exam's submissions (server/exams/grading.py): after each
student's end, their locked exam folder is graded with the exercise's
checks, hidden ones included, through the checks' own machinery, for the
class's teachers alone. A real server, real PostgreSQL, real sandboxes."""
import asyncio
import time
from datetime import datetime

from loadtest.run_client import RunClient
from tests.live_support import a_class
from tests.test_exams import GRACE, exam, iso, save

EXERCISE = {"title": "Average", "file": "average.py", "due": None, "instructions": "Print the average of two numbers.\n",
            "tests": "", "starter": {"average.py": "print(0)\n"},
            "checks": [{"id": "shown", "kind": "output", "input": "4\n6\n", "expected": "5.0\n"},
                       {"id": "secret", "kind": "output", "input": "1\n2\n", "expected": "1.5\n", "points": 2,
                        "visibility": "hidden"}]}
RIGHT = "a = float(input())\nb = float(input())\nprint((a + b) / 2)\n"
ONLY_THE_EXAMPLE = "input()\ninput()\nprint(5.0)\n"  # passes the check the student sees, not the hidden one


def answer(client, method, path, **kw):
    r = client.request(method, path, **kw)
    return r.status_code, r.json().get("error")


def graded(teacher, exam_id, timeout=180):
    """The exam's grades once none is queued (a generous hang timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        r = teacher.request("GET", f"/api/exams/{exam_id}/grades")
        assert r.status_code == 200, r.text
        grades = r.json()["grades"]
        if grades and all(g["state"] != "queued" for g in grades):
            return {g["username"]: g for g in grades}
        assert time.monotonic() < deadline, grades
        time.sleep(0.5)


def test_after_the_end_a_teacher_grades_the_locked_submissions_with_every_check(server, people):
    teacher, ann, ben, cal = people.teacher("mr-g"), people.student("ann"), people.student("ben"), people.student("cal")
    other_teacher = people.teacher("mr-o")
    number = a_class(server, teacher, ann, ben, cal)
    a_class(server, other_teacher, people.student("out"))
    assert teacher.request("PUT", f"/api/classes/{number}/exercises/average", json=EXERCISE).status_code == 200
    made = exam(teacher, number, ends=iso(4))
    grade, grades = f"/api/exams/{made['id']}/grade", f"/api/exams/{made['id']}/grades"
    assert teacher.request("PUT", f"/api/exams/{made['id']}/students/{cal.username}/extra",
                           json={"minutes": 10}).status_code == 200
    spec = f"exam/{made['id']}"
    assert save(ann, spec, "average/average.py", ONLY_THE_EXAMPLE).status_code == 200
    assert save(ben, spec, "average/average.py", RIGHT).status_code == 200

    r = teacher.request("POST", grade, json={})
    assert (r.status_code, r.json()["error"]) == (409, "exam_not_over") and "once" in r.json()["message"]
    assert answer(teacher, "POST", grade, json={"student": ann.username}) == (409, "exam_not_over")
    assert answer(ann, "POST", grade, json={}) == (403, "forbidden")  # a student cannot ask
    assert answer(ann, "GET", grades) == (403, "forbidden")
    assert answer(other_teacher, "POST", grade, json={}) == (403, "not_your_class")
    assert answer(other_teacher, "GET", grades) == (403, "not_your_class")
    assert answer(teacher, "POST", grade, json={"student": "nobody-here"}) == (404, "no_such_student")
    time.sleep(max(0.0, datetime.fromisoformat(made["ends"]).timestamp() - time.time()) + GRACE + 0.5)

    # Cal's extra time runs on: his folder is no submission yet.
    assert answer(teacher, "POST", grade, json={"student": cal.username}) == (409, "exam_not_over")
    assert answer(other_teacher, "POST", grade, json={}) == (403, "not_your_class")
    r = teacher.request("POST", grade, json={})
    assert r.status_code == 202, r.text
    assert r.json()["grading"] == {"queued": 2, "students": sorted([ann.username, ben.username]),
                                   "not_over": [cal.username]}
    got = graded(teacher, made["id"])
    assert set(got) == {ann.username, ben.username}  # nothing of Cal's
    mine = got[ann.username]
    assert (mine["state"], mine["score"], mine["max_score"], mine["exercise"]) == ("graded", 1, 3, "average"), mine
    assert [(c["id"], c["passed"], c["earned"], c["hidden"]) for c in mine["checks"]] == \
        [("shown", True, 1, False), ("secret", False, 0, True)]
    assert mine["file"] == "average/average.py" and mine["folder"] == f"exams/{made['id']}/{ann.username}"
    assert (got[ben.username]["state"], got[ben.username]["score"]) == ("graded", 3)
    # The teacher opens what was graded, read-only.
    seen = teacher.request("GET", f"/api/files/{mine['folder']}/average/average.py")
    assert seen.status_code == 200 and seen.json()["content"] == ONLY_THE_EXAMPLE and \
        seen.headers["ETag"].strip('"') == mine["version"]
    # Grading is not an attempt of the student's: nothing of it reaches them.
    view = ann.request("GET", f"/api/exercises/{number}/average").json()
    assert "secret" not in str(view) and "1.5" not in str(view)

    # One student's again, after her end: graded afresh, the others kept.
    r = teacher.request("POST", grade, json={"student": ann.username})
    assert r.status_code == 202 and r.json()["grading"]["students"] == [ann.username], r.text
    again = graded(teacher, made["id"])
    assert again[ann.username]["score"] == 1 and again[ann.username]["asked"] > mine["asked"]
    assert again[ben.username]["asked"] == got[ben.username]["asked"]


def test_a_submission_without_the_exercise_file_says_so_in_a_sentence(server, people):
    teacher, ann = people.teacher("mr-g"), people.student("ann")
    number = a_class(server, teacher, ann)
    assert teacher.request("PUT", f"/api/classes/{number}/exercises/average", json=EXERCISE).status_code == 200
    made = exam(teacher, number, ends=iso(2))  # Ann never opens her folder: it was never given the starter
    time.sleep(max(0.0, datetime.fromisoformat(made["ends"]).timestamp() - time.time()) + GRACE + 0.5)
    r = teacher.request("POST", f"/api/exams/{made['id']}/grade", json={"student": ann.username})
    assert r.status_code == 202, r.text
    mine = graded(teacher, made["id"])[ann.username]
    assert mine["state"] == "not_graded" and mine["score"] is None, mine
    assert mine["message"].endswith(".") and ann.username in mine["message"], mine


def test_a_students_program_running_then_holds_her_grading_back_and_says_so(server, people):
    """Grading needs the student's run lock, as her own Check does: while a
    program of hers runs (after the exam, in her home) her submission is
    tried again a little later, then said not graded, in a sentence."""
    teacher, ann = people.teacher("mr-g"), people.student("ann")
    number = a_class(server, teacher, ann)
    assert teacher.request("PUT", f"/api/classes/{number}/exercises/average", json=EXERCISE).status_code == 200
    made = exam(teacher, number, ends=iso(2))
    assert save(ann, f"exam/{made['id']}", "average/average.py", RIGHT).status_code == 200
    time.sleep(max(0.0, datetime.fromisoformat(made["ends"]).timestamp() - time.time()) + GRACE + 0.5)
    assert save(ann, "home", "wait.py", "input('Go on? ')\n").status_code == 200
    grade = f"/api/exams/{made['id']}/grade"

    async def while_her_program_waits():
        async with RunClient(server.url, ann.http.cookies.get_dict()) as rc:
            await rc.send(type="run", path="wait.py")
            while (await rc.receive(60))["type"] != "input":
                pass
            r = await asyncio.to_thread(teacher.request, "POST", grade, json={"student": ann.username})
            assert r.status_code == 202, r.text
            return await asyncio.to_thread(graded, teacher, made["id"])
    mine = asyncio.run(while_her_program_waits())[ann.username]
    assert mine["state"] == "not_graded" and "had a program running" in mine["message"], mine
    r = teacher.request("POST", grade, json={"student": ann.username})  # her program is gone with its page
    assert r.status_code == 202, r.text
    mine = graded(teacher, made["id"])[ann.username]
    assert (mine["state"], mine["score"]) == ("graded", 3), mine
