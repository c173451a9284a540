"""The teacher's side of an exam's end in Chromium (issue 33): the form's
Safe Exam Browser Config Key, then grading the submissions from the exam's
students and reading one, read-only."""
import time
from datetime import datetime, timedelta, timezone

from tests.browser import LIMITS, assert_accessible, expect, login
from tests.test_browser_exam import a_class_with_an_exercise

KEY = "5e" * 32
GRACE = 5  # exams/service.py GRACE


def test_a_teacher_requires_safe_exam_browser_with_the_form(start_server, new_page):
    server = start_server(**LIMITS)
    number, teacher = a_class_with_an_exercise(server)
    page = new_page(server)
    login(page, "grace", "grace-password", lands_on="/teacher")
    page.get_by_role("region", name="Exams").get_by_role("button", name="New exam").click()
    form = page.get_by_role("dialog", name="New exam")
    form.get_by_label("Title").fill("Locked down")
    form.get_by_label("Average").check()
    form.get_by_label("Safe Exam Browser Config Key (optional)").fill("not a key")
    form.get_by_role("button", name="Make the exam").click()
    expect(form.get_by_role("alert")).to_contain_text("Config Key")  # a sentence, and nothing made
    assert teacher.get(f"/api/classes/{number}/exams").json()["exams"] == []
    form.get_by_label("Safe Exam Browser Config Key (optional)").fill(KEY)
    assert_accessible(page, "the new exam form with Safe Exam Browser")
    form.get_by_role("button", name="Make the exam").click()
    expect(form).to_have_count(0)
    made = teacher.get(f"/api/classes/{number}/exams").json()["exams"]
    assert [(e["title"], e["safe_exam_browser"]) for e in made] == [("Locked down", True)]
    ada = server.client()
    ada.login_ok("ada", "ada-password")
    assert ada.get(f"/api/files/exam/{made[0]['id']}").json()["error"] == "seb_required"


def test_a_teacher_grades_the_submissions_and_reads_one(start_server, new_page):
    server = start_server(**LIMITS)
    number, teacher = a_class_with_an_exercise(server)
    ends = datetime.now(timezone.utc) + timedelta(seconds=3)
    r = teacher.post(f"/api/classes/{number}/exams", json={"title": "Quiz", "exercises": ["average"],
                                                           "ends": ends.isoformat()})
    assert r.status_code == 201, r.text
    exam = r.json()["exam"]
    ada = server.client()
    ada.login_ok("ada", "ada-password")
    answer = "numbers = [4, 6]\nprint('Average:', sum(numbers) / len(numbers))\n"
    saved = ada.request("PUT", f"/api/files/exam/{exam['id']}/average/average.py", data=answer.encode(),
                        headers={"If-Match": "*"})
    assert saved.status_code == 200, saved.text
    time.sleep(max(0.0, ends.timestamp() - time.time()) + GRACE + 0.5)

    page = new_page(server)
    login(page, "grace", "grace-password", lands_on="/teacher")
    page.get_by_role("region", name="Exams").locator(".exam-row").first.get_by_role("button").click()
    students = page.get_by_role("dialog", name="Quiz: students")
    row = students.locator('tr[data-username="ada"]')
    expect(row).to_contain_text("not graded yet")
    students.get_by_role("button", name="Grade the submissions").click()
    expect(row).to_contain_text("1 of 1", timeout=120_000)  # hang guard: the checks wait in their line
    row.get_by_text("1 of 1").click()
    expect(row).to_contain_text("passed: Output: shown")
    assert_accessible(page, "an exam's graded submissions")

    row.get_by_role("button", name="Open Ada Student's submission").click()
    submission = page.get_by_role("dialog", name="Ada Student's submission (read-only)")
    submission.locator('.tree-row[data-path="average"]').click()
    submission.locator('.tree-row[data-path="average/average.py"]').click()
    expect(submission.locator(".exam-submission-file")).to_contain_text("sum(numbers) / len(numbers)")
    assert_accessible(page, "a submission, read-only")
