"""Pushes that arrive and course files that run (issue 24), in Chromium
against the real server with two workers: a push reaches every open editor
without a click (a clean one shows it, one with unsaved edits gets the
conflict choice and keeps its text); "update everyone's copy anyway" tells
the student where their version is; the push report names who got what,
shows a student's display name and a course file's name literally; Run on
a course file runs a read-only copy."""
import re

import pytest

from tests.browser import LIMITS, editor, editor_text, expect, login, open_file, shot, wait_terminal
from tests.helpers import create_user
from tests.live_support import a_class

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

INJECTION = "<img src=x onerror=window.__pwned=1>"


def a_person(server, name, role="student", display_name=None):
    create_user(server.env["DATABASE_URL"], name, f"{name}-password", role=role, display_name=display_name)
    client = server.client()
    client.login_ok(name, f"{name}-password")
    return client


def put(client, area, path, text):
    r = client.request("PUT", f"/api/files/{area}/{path}", data=text.encode(), headers={"If-Match": "*"})
    assert r.status_code == 200, r.text


def student_page(new_page, server, name, path):
    """A student in the IDE with the pushed file `path` open."""
    page = new_page(server)
    login(page, name, f"{name}-password", lands_on="/ide")
    open_file(page, path)
    return page


def push_from_the_tree(teacher, area, path, changed=None):
    """Send `path` of the course folder to the whole class: the report."""
    teacher.locator(f'.tree-section[data-area="{area}"] .tree-row[data-path="{path}"]').click(button="right")
    teacher.get_by_role("menuitem", name="Send to students…").click()
    push = teacher.get_by_role("dialog", name=re.compile("Send "))
    if changed:
        push.get_by_label(changed).check()
    push.get_by_role("button", name="Send", exact=True).click()
    report = push.locator(".push-report")
    expect(report.locator("table")).to_be_visible()
    return push, report


def test_a_push_reaches_open_editors_and_the_report_says_who_got_what(start_server, new_page):
    server = start_server(processes=2, **LIMITS)
    grace = a_person(server, "grace", "teacher", "Grace Hopper")
    a_person(server, "ann", display_name="Ann Smith")
    a_person(server, "ben", display_name=INJECTION)
    number = a_class(server, "grace", "ann", "ben", name="9C")
    area = f"class/{number}"
    put(grace, area, "lesson2.py", "# lesson 2, v1\n")
    assert grace.post("/api/course/push", json={"area": area, "path": "lesson2.py"}).status_code == 200

    ann = student_page(new_page, server, "ann", "lesson2.py")
    ben = student_page(new_page, server, "ben", "lesson2.py")
    # Ben types, and his saves do not get through (a flaky network): his text is only in his page.
    ben.route(re.compile(r".*/api/files/home/lesson2\.py$"),
              lambda route: route.abort() if route.request.method == "PUT" else route.continue_())
    editor(ben).click()
    ben.keyboard.press("Control+End")
    ben.keyboard.type("print('ben was here')")
    expect(ben.locator("#save-status")).not_to_have_attribute("data-status", "saved")

    teacher = new_page(server)
    login(teacher, "grace", "grace-password", lands_on="/teacher")
    teacher.get_by_role("tab", name="Files").click()
    put(grace, area, "lesson2.py", "# lesson 2, v2\n")
    push, report = push_from_the_tree(teacher, area, "lesson2.py")
    expect(report).to_contain_text("updated for 2")

    # Ann's clean editor shows v2 without a click, with the notice of a change elsewhere.
    expect(editor(ann)).to_contain_text("lesson 2, v2")
    expect(ann.locator(".toast").last).to_contain_text("Your teacher updated lesson2.py")
    # Ben's edits meet the push: the conflict choice, his text kept.
    dialog = ben.get_by_role("dialog")
    expect(dialog).to_contain_text("was changed somewhere else")
    expect(dialog).to_contain_text("ben was here")
    shot(ben, "60-push-meets-unsaved-edits")
    ben.unroute(re.compile(r".*/api/files/home/lesson2\.py$"))
    ben.keyboard.press("Enter")  # the default: both kept
    expect(editor(ben)).to_contain_text("lesson 2, v2")
    expect(ben.locator('.tree-section[data-area="home"] .tree-row[data-path="lesson2-mine.py"]')).to_be_visible()
    assert "ben was here" in ben.evaluate("() => fetch('/api/files/home/lesson2-mine.py').then(r => r.json())")["content"]

    # Ann makes the file hers; the teacher updates everyone's copy anyway.
    editor(ann).click()
    ann.keyboard.press("Control+End")
    ann.keyboard.type("print('my answer')")
    expect(ann.locator("#save-status")).to_have_attribute("data-status", "saved")
    push.get_by_role("button", name="Close").first.click()
    put(grace, area, "lesson2.py", "# lesson 2, v3\n")
    push, report = push_from_the_tree(teacher, area, "lesson2.py", changed=re.compile("Update everyone's copy anyway"))
    row = report.locator('tr[data-username="ann"]')
    expect(row).to_contain_text("Ann Smith")
    expect(row).to_contain_text("lesson2.py: replaced; their version is kept in the file's history")
    expect(editor(ann)).to_contain_text("lesson 2, v3")
    expect(ann.locator(".toast.warn").last).to_contain_text("Your teacher replaced lesson2.py")
    expect(ann.locator(".toast.warn").last).to_contain_text("History")
    shot(ann, "61-push-replaced-notice")
    assert "my answer" not in editor_text(ann)
    versions = ann.evaluate("() => fetch('/api/history/home/lesson2.py').then(r => r.json())")["versions"]
    kept = ann.evaluate(f"() => fetch('/api/history/home/lesson2.py?version={versions[0]['version']}')"
                        ".then(r => r.json())")
    assert "my answer" in kept["content"]

    # Ben's display name shows as text in the report, his username beside it.
    ben_row = report.locator('tr[data-username="ben"]')
    expect(ben_row.locator(".student-name")).to_have_text(INJECTION)
    expect(ben_row).to_contain_text("(ben)")
    push.get_by_role("button", name="Close").first.click()

    # Ann changes hers again; the next version is sent beside it, and shows in her tree without a click.
    editor(ann).click()
    ann.keyboard.press("Control+End")
    ann.keyboard.type("print('my second answer')")
    expect(ann.locator("#save-status")).to_have_attribute("data-status", "saved")
    put(grace, area, "lesson2.py", "# lesson 2, v4\n")
    push, report = push_from_the_tree(teacher, area, "lesson2.py", changed=re.compile("Send it as a new file"))
    expect(report.locator('tr[data-username="ann"]')).to_contain_text(
        "lesson2.py: sent as a new file named lesson2 (teacher).py")
    expect(ann.locator('.tree-section[data-area="home"] .tree-row[data-path="lesson2 (teacher).py"]')).to_be_visible()
    expect(editor(ann)).to_contain_text("my second answer")
    push.get_by_role("button", name="Close").first.click()

    # A course file named like markup: its name shows as text too; nothing ran.
    name = "<img src=x onerror=window.__pwned=2>.py"
    put(grace, area, name, "print('hi')\n")
    teacher.get_by_role("button", name=re.compile("Refresh 9C|Refresh Course")).first.click()
    push, report = push_from_the_tree(teacher, area, name)
    expect(push.get_by_role("heading")).to_contain_text(name)
    expect(report.locator('tr[data-username="ann"]')).to_contain_text(f"{name}: a new copy")
    shot(teacher, "62-push-report-by-name")
    for page in (teacher, ann, ben):
        assert page.evaluate("() => window.__pwned") is None
        assert page.errors == []


def test_run_on_a_course_file_runs_a_read_only_copy(start_server, new_page):
    server = start_server(**LIMITS)
    grace = a_person(server, "grace", "teacher", "Grace Hopper")
    a_person(server, "ann", display_name="Ann Smith")
    number = a_class(server, "grace", "ann", name="9C")
    area = f"class/{number}"
    put(grace, area, "helper.py", "def greet(who):\n    return 'Hello, ' + who\n")
    put(grace, area, "starter.py", "import helper\nprint(helper.greet('class'))\nopen('out.txt', 'w')\n")

    for name, lands_on in (("grace", "/teacher"), ("ann", "/ide")):
        page = new_page(server)
        login(page, name, f"{name}-password", lands_on=lands_on)
        if name == "grace":
            page.get_by_role("tab", name="Files").click()
        open_file(page, "starter.py", area=area)
        run = page.get_by_role("button", name="Run")
        expect(run).to_be_enabled()
        expect(run).to_have_attribute("title", re.compile("read-only copy"))
        run.click()
        text = " ".join(wait_terminal(page, "──").split())  # the console wraps its lines
        assert "Running a read-only copy of starter.py from the course folder" in text
        assert "Hello, class" in text
        assert "PermissionError" in text  # it may not write beside itself
        shot(page, f"63-run-course-file-{name}")
        assert page.errors == []
    # The course folder holds what it held.
    files = sorted(e["name"] for e in grace.get(f"/api/files/{area}").json()["entries"])
    assert files == ["helper.py", "starter.py"]


def test_a_student_who_kept_theirs_sees_the_new_version_and_takes_it_as_a_new_file(start_server, new_page):
    server = start_server(**LIMITS)
    grace = a_person(server, "grace", "teacher", "Grace Hopper")
    ann = a_person(server, "ann", display_name="Ann Smith")
    number = a_class(server, "grace", "ann", name="9C")
    area = f"class/{number}"
    put(grace, area, "lesson2.py", "total = 0\nprint(total)\n")
    assert grace.post("/api/course/push", json={"area": area, "path": "lesson2.py"}).status_code == 200
    put(ann, "home", "lesson2.py", "total = 0\nprint('mine', total)\n")

    page = student_page(new_page, server, "ann", "lesson2.py")
    put(grace, area, "lesson2.py", "total = 1\nprint(total)\n")
    r = grace.post("/api/course/push", json={"area": area, "path": "lesson2.py", "changed": "keep"})
    assert r.json()["skipped"]["ann"] == [{"path": "lesson2.py", "reason": "changed"}]
    # Her page says so, at once, in the live region; her file is as she left it.
    notice = page.locator("#talk-notices .starter-notice")
    expect(notice).to_contain_text("Your teacher sent a new version of lesson2.py")
    expect(notice).to_contain_text("You had changed yours, so yours was kept as it is.")
    assert "mine" in editor_text(page)

    notice.get_by_role("button", name="Show the difference").click()
    diff = page.get_by_role("dialog", name="lesson2.py: yours and the new version")
    expect(diff.locator(".cm-deletedChunk, .cm-deletedLine").first).to_contain_text("mine")
    expect(diff.locator(".cm-changedLine, .cm-insertedLine").first).to_be_visible()
    shot(page, "75-student-starter-difference")
    diff.get_by_role("button", name="Take it as a new file").click()
    # The new version beside hers, opened; hers unchanged; the notice gone, also after a reload.
    expect(page.locator("#tabs [aria-selected=true]")).to_contain_text("lesson2 (teacher).py")
    assert editor_text(page).startswith("total = 1")
    expect(notice).to_have_count(0)
    assert ann.get("/api/files/home/lesson2.py").json()["content"] == "total = 0\nprint('mine', total)\n"
    page.reload()
    expect(page.locator("#talk-notices")).to_have_attribute("data-caught-up", "true")
    expect(page.locator("#talk-notices .starter-notice")).to_have_count(0)
    assert page.errors == []
