"""An exam in Chromium (issue 33), as a student takes it: the bar with the
time left by the server's clock, the exam folder first in the files with
its starter, typing saved there, Run on it, a paste the teacher reads as a
signal, and at the end the folder read-only in the page as on the server."""
import re
import time
from datetime import datetime, timedelta, timezone

from tests.browser import LIMITS, assert_accessible, editor, expect, expect_saved, login, replace_text, shot, \
    student, wait_terminal
from tests.helpers import create_user
from tests.live_support import a_class

EXERCISE = {"title": "Average", "file": "average.py", "due": None, "instructions": "Write the average.\n",
            "tests": "", "starter": {"average.py": "numbers = [4, 6]\nprint('Average: 0')\n"},
            "checks": [{"id": "shown", "kind": "output", "input": "", "expected": "Average: 5.0\n"}]}
LENGTH = 20  # seconds the exam lasts; Ada has extra time for her story, taken back to end it


def a_class_with_an_exercise(server):
    """Grace teaches Ada in a class with the exercise Average: (its number, Grace's API client)."""
    student(server, "ada")
    create_user(server.env["DATABASE_URL"], "grace", "grace-password", role="teacher", display_name="Grace Hopper")
    number = a_class(server, "grace", "ada", name="8A Python")
    teacher = server.client()
    teacher.login_ok("grace", "grace-password")
    assert teacher.request("PUT", f"/api/classes/{number}/exercises/average", json=EXERCISE).status_code == 200
    return number, teacher


def an_exam_with_extra_time_for_ada(server, title):
    """Grace's exam of Average, ending in LENGTH seconds, with 10 minutes
    more for Ada (the story takes its time; setting them to 0 ends it):
    (Grace's API client, the exam, its end, the URL of Ada's extra time)."""
    number, teacher = a_class_with_an_exercise(server)
    ends = datetime.now(timezone.utc) + timedelta(seconds=LENGTH)
    r = teacher.post(f"/api/classes/{number}/exams", json={"title": title, "exercises": ["average"],
                                                           "ends": ends.isoformat()})
    assert r.status_code == 201, r.text
    exam = r.json()["exam"]
    extra = f"/api/exams/{exam['id']}/students/ada/extra"
    assert teacher.request("PUT", extra, json={"minutes": 10}).status_code == 200
    return teacher, exam, ends, extra


def open_answer(page, exam):
    """Ada opens her answer from the exam's folder in the file tree."""
    tree = page.locator(f'.tree-section[data-area="exam/{exam["id"]}"]')
    tree.locator('.tree-row[data-path="average"]').click()
    tree.locator('.tree-row[data-path="average/average.py"]').click()
    expect(page.locator(".tab.selected")).to_contain_text("average.py")


def test_a_student_takes_an_exam_and_it_locks_at_her_end(start_server, new_page):
    server = start_server(**LIMITS)
    teacher, exam, _, extra = an_exam_with_extra_time_for_ada(server, "Test 1")
    area = f"exam/{exam['id']}"

    page = new_page(server)
    login(page, "ada", "ada-password", lands_on="/ide")
    bar = page.get_by_role("region", name="Exam", exact=True)
    expect(bar).to_contain_text("Exam: Test 1")
    expect(bar.get_by_role("timer")).to_have_text(re.compile(r"^10:[0-2]\d left$"))  # her extra time counts
    tree = page.locator(f'.tree-section[data-area="{area}"]')
    expect(tree).to_contain_text("Exam: Test 1")
    mine = page.locator('.tree-section[data-area="home"]')
    expect(mine).to_be_hidden()  # the exam does not allow her own files: its folder alone
    expect(page.get_by_role("button", name="Ask for help")).to_be_visible()  # it allows asking
    open_answer(page, exam)
    replace_text(page, "numbers = [4, 6]\nprint('Average:', sum(numbers) / len(numbers))\n")
    expect_saved(page)
    saved = teacher.get(f"/api/files/exams/{exam['id']}/ada/average/average.py").json()["content"]
    assert "sum(numbers)" in saved  # in her exam folder, which her teacher reads
    page.get_by_role("button", name="Run").click()
    wait_terminal(page, r"Average: 5\.0")

    # A paste from outside the IDE: the teacher reads it as a signal (nothing is blocked).
    editor(page).click()
    page.evaluate("""() => {
        const data = new DataTransfer();
        data.setData('text/plain', '# pasted from elsewhere\\n');
        document.querySelector('#editor .cm-content').dispatchEvent(
            new ClipboardEvent('paste', {clipboardData: data, bubbles: true, cancelable: true}));
    }""")
    expect_saved(page)

    def pastes():
        signals = teacher.get(f"/api/exams/{exam['id']}/signals", params={"student": "ada"}).json()["signals"]
        return [s for s in signals if s["kind"] == "paste"]
    deadline = time.monotonic() + 15  # (a hang guard: the signal is sent as the paste happens)
    while not pastes() and time.monotonic() < deadline:
        time.sleep(0.2)
    found = pastes()
    assert found and found[0]["chars"] == len("# pasted from elsewhere\n") and found[0]["outside"] is True, found
    assert_accessible(page, "a student's IDE during an exam")
    shot(page, "80-student-exam")

    # Her extra time taken back, her end is the exam's: the page learns it from the server (every 30 s),
    # says so, the file turns read-only, and the server agrees.
    assert teacher.request("PUT", extra, json={"minutes": 0}).status_code == 200
    expect(bar.get_by_role("timer")).to_have_text("over", timeout=(LENGTH + 60) * 1000)  # hang guard
    expect(bar).to_contain_text("handed in")
    expect(page.locator("#doc-banner")).to_contain_text("the exam is over")
    expect(editor(page)).to_have_attribute("contenteditable", "false")
    expect(mine).to_be_visible()  # and her own files are back
    expect(mine).to_contain_text("hello.py")
    assert_accessible(page, "a student's IDE after her exam")
    page.wait_for_timeout(6000)  # (the server's grace for saves on their way)
    r = server.client()
    r.login_ok("ada", "ada-password")
    refused = r.request("PUT", f"/api/files/{area}/average/average.py", data=b"after", headers={"If-Match": "*"})
    assert refused.status_code == 403 and refused.json()["error"] == "exam_over"


def test_a_teacher_makes_an_exam_with_the_form_and_gives_a_student_extra_time(start_server, new_page):
    server = start_server(**LIMITS)
    number, teacher = a_class_with_an_exercise(server)

    page = new_page(server)
    login(page, "grace", "grace-password", lands_on="/teacher")
    exams = page.get_by_role("region", name="Exams")
    expect(exams).to_contain_text("No exams yet")
    exams.get_by_role("button", name="New exam").click()
    form = page.get_by_role("dialog", name="New exam")
    form.get_by_label("Title").fill("Loops test")
    form.get_by_role("button", name="Make the exam").click()  # no exercise chosen: a sentence, and nothing made
    expect(form.get_by_role("alert")).to_contain_text("Choose 1 to 20 different exercises")
    form.get_by_label("Average").check()
    form.get_by_label("Minutes").fill("30")
    form.get_by_label("Editing help").check()
    assert_accessible(page, "the new exam form")
    form.get_by_role("button", name="Make the exam").click()
    expect(form).to_have_count(0)
    row = exams.locator(".exam-row").first
    expect(row).to_contain_text("Loops test")
    expect(row).to_contain_text("Running since")
    made = teacher.get(f"/api/classes/{number}/exams").json()["exams"]
    assert [(e["title"], e["exercises"], e["allows"]["assist"]) for e in made] == [("Loops test", ["average"], True)]

    row.get_by_role("button").click()
    students = page.get_by_role("dialog", name="Loops test: students")
    ada = students.locator('tr[data-username="ada"]')
    ada.get_by_label("Extra minutes for Ada Student").fill("10")
    ada.get_by_role("button", name="Give").click()
    expect(page.locator(".toast.ok", has_text="Ada Student now ends")).to_have_count(1)
    assert_accessible(page, "an exam's students")
    shown = teacher.get(f"/api/exams/{made[0]['id']}").json()["exam"]["students"]
    assert [(s["username"], s["extra_minutes"]) for s in shown] == [("ada", 10)]


def test_a_student_is_warned_one_minute_before_her_end(start_server, new_page):
    server = start_server(**LIMITS)
    number, teacher = a_class_with_an_exercise(server)
    ends = datetime.now(timezone.utc) + timedelta(seconds=90)  # (her page opens with more than a minute left)
    r = teacher.post(f"/api/classes/{number}/exams", json={"title": "Quiz", "exercises": ["average"],
                                                           "ends": ends.isoformat()})
    assert r.status_code == 201, r.text
    page = new_page(server)
    login(page, "ada", "ada-password", lands_on="/ide")
    expect(page.get_by_role("timer")).to_have_text(re.compile(r"^1:\d\d left$"))
    expect(page.locator(".toast.warn")).to_have_text("1 minute left in the exam. Your files are saved as you type.",
                                                     timeout=60_000)  # hang guard


def test_a_student_checks_her_exam_answer_from_the_exercises_tab(start_server, new_page):
    server = start_server(**LIMITS)
    number, teacher = a_class_with_an_exercise(server)
    r = teacher.post(f"/api/classes/{number}/exams", json={"title": "Quiz", "exercises": ["average"], "minutes": 30,
                                                           "allows": {"ask": False}})
    assert r.status_code == 201, r.text
    page = new_page(server)
    login(page, "ada", "ada-password", lands_on="/ide")
    expect(page.get_by_role("button", name="Ask for help")).to_be_hidden()  # the exam does not allow it
    page.get_by_role("tab", name="Exercises").click()
    page.locator("#exercises-panel .ex-item", has_text="Average").click()
    view = page.locator("#exercises-panel .ex-view")
    expect(view.locator(".ex-file")).to_contain_text("in the exam's folder")
    view.get_by_role("button", name="Open my file").click()
    expect(page.locator(".tab.selected")).to_contain_text("average.py")
    replace_text(page, "numbers = [4, 6]\nprint('Average:', sum(numbers) / len(numbers))\n")
    view.get_by_role("button", name="Check").click()
    expect(view.locator(".ex-progress")).to_contain_text("Last check: 1/1", timeout=60_000)
    checked = teacher.get(f"/api/classes/{number}/exercises/average/attempts/ada").json()
    assert "sum(numbers)" in checked["source"]  # what was checked: her exam folder's file
    assert_accessible(page, "an exam's exercise, checked")


def test_what_a_student_types_offline_is_handed_in_when_the_network_returns_before_her_end(start_server, new_page):
    """A network drop during the exam: the text stays in the browser and is
    saved when the network returns, and she is told; typed offline past her
    end, it is not handed in, and she is told that too."""
    server = start_server(**LIMITS)
    teacher, exam, ends, extra = an_exam_with_extra_time_for_ada(server, "Test 2")
    answer = f"/api/files/exams/{exam['id']}/ada/average/average.py"

    page = new_page(server)
    login(page, "ada", "ada-password", lands_on="/ide")
    open_answer(page, exam)

    page.context.set_offline(True)
    replace_text(page, "print('typed offline')\n")
    expect(page.locator("#save-status")).to_have_attribute("data-status", "offline")
    page.context.set_offline(False)
    expect(page.get_by_text("what you typed in average.py meanwhile is saved in your exam")).to_be_visible(
        timeout=60_000)  # hang guard (the saver retries with back-off)
    expect_saved(page)
    assert teacher.get(answer).json()["content"] == "print('typed offline')\n"

    page.context.set_offline(True)
    replace_text(page, "print('typed offline, after the end')\n")
    expect(page.locator("#save-status")).to_have_attribute("data-status", "offline")
    assert teacher.request("PUT", extra, json={"minutes": 0}).status_code == 200  # her end: the exam's
    time.sleep(max(0.0, ends.timestamp() - time.time()) + 5 + 1)  # (and the server's grace for saves on their way)
    page.context.set_offline(False)
    told = page.get_by_role("dialog", name="average.py was not handed in as you left it")
    expect(told).to_contain_text("after your exam ended", timeout=60_000)  # hang guard
    assert_accessible(page, "a student told her offline text came after her end")
    told.get_by_role("button", name="OK").click()
    assert teacher.get(answer).json()["content"] == "print('typed offline')\n"  # what she handed in


def test_a_second_tab_follows_the_first_and_both_lock_at_her_end(start_server, new_page):
    """The exam in two tabs of one browser: what one saves shows in the
    other, and at her end both turn read-only (the server refuses either)."""
    server = start_server(**LIMITS)
    teacher, exam, ends, extra = an_exam_with_extra_time_for_ada(server, "Test 3")

    first = new_page(server)
    login(first, "ada", "ada-password", lands_on="/ide")
    open_answer(first, exam)
    second = first.context.new_page()
    second.goto("/ide")
    second.wait_for_selector("body[data-ready=true]")
    open_answer(second, exam)
    replace_text(second, "print('from the second tab')\n")
    expect_saved(second)
    expect(editor(first)).to_contain_text("from the second tab", timeout=30_000)  # hang guard

    assert teacher.request("PUT", extra, json={"minutes": 0}).status_code == 200
    for page in (first, second):
        expect(page.get_by_role("timer")).to_have_text("over", timeout=(LENGTH + 60) * 1000)  # hang guard
        expect(editor(page)).to_have_attribute("contenteditable", "false")
    time.sleep(max(0.0, ends.timestamp() - time.time()) + 6)  # (the server's grace for saves on their way)
    r = server.client()
    r.login_ok("ada", "ada-password")
    refused = r.request("PUT", f"/api/files/exam/{exam['id']}/average/average.py", data=b"late",
                        headers={"If-Match": "*"})
    assert refused.status_code == 403 and refused.json()["error"] == "exam_over"
