"""The editor shows the truth (issue 21), in Chromium against the real
server with two workers: a file saved from a second session updates a
clean editor and opens the conflict view (keeping both by default) for a
dirty one; a teacher's re-push reaches an open editor; Run after a
foreign save never runs a text the page does not show; files that a
program or another session makes appear in the tree without a click."""
import json
import re
import uuid

import pytest

from tests.browser import (LIMITS, editor, editor_text, expect, login, open_file, shot, student, terminal_text,
                           wait_terminal, write_program)
from tests.conftest import People, _shared

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


@pytest.fixture
def two_workers(shared_servers):
    yield from _shared(shared_servers, processes=2, **LIMITS)


@pytest.fixture
def ide(two_workers, new_page):
    """A new student in the IDE, and a second session of theirs (another
    computer): (page, username, other)."""
    user, password = student(two_workers, "s" + uuid.uuid4().hex[:10])
    page = new_page(two_workers)
    login(page, user, password, lands_on="/ide")
    other = two_workers.client()
    other.login_ok(user, password)
    return page, user, other


def etag_of(client, path, area="home"):
    return client.get(f"/api/files/{area}/{path}").json()["etag"]


def save_elsewhere(client, path, text, area="home"):
    r = client.request("PUT", f"/api/files/{area}/{path}", data=text.encode(),
                       headers={"If-Match": f'"{etag_of(client, path, area)}"'})
    assert r.status_code == 200, r.text


def test_a_save_elsewhere_updates_a_clean_editor_and_a_dirty_one_gets_the_conflict_view(ide):
    page, _, other = ide
    write_program(page, "lesson.py", 'print("version A")\n')
    save_elsewhere(other, "lesson.py", 'print("version B from the other computer")\n')
    expect(page.locator("#editor .cm-content")).to_contain_text("version B from the other computer")
    expect(page.locator(".toast").last).to_contain_text("saved from another tab or computer")
    expect(page.locator("#save-status")).to_have_text("Saved")
    shot(page, "40-follow-clean-editor")

    # Edits of the student's own, not saved yet, meet another save: the conflict view, keeping both by default.
    editor(page).click()
    page.keyboard.press("Control+End")
    page.keyboard.type("# mine")
    save_elsewhere(other, "lesson.py", 'print("version C")\n')
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("was changed somewhere else")
    expect(dialog.locator(".dialog-buttons .primary")).to_have_text(re.compile("Keep both"))
    shot(page, "41-follow-dirty-editor-conflict")
    page.keyboard.press("Enter")  # the default: both kept
    expect(page.locator("#editor .cm-content")).to_contain_text("version C")
    expect(page.locator('.tree-section[data-area="home"] .tree-row[data-path="lesson-mine.py"]')).to_be_visible()
    assert page.errors == []


def test_a_re_push_reaches_an_open_editor(ide, two_workers):
    page, user, _ = ide
    teacher = People(two_workers).teacher("t")
    r = teacher.request("PUT", "/api/files/course/lesson2.py", data=b'print("starter with a bug"\n')
    assert r.status_code == 200, r.text
    assert teacher.post("/api/course/push", json={"path": "lesson2.py", "students": [user]}).status_code == 200
    expect(page.locator('.tree-section[data-area="home"] .tree-row[data-path="lesson2.py"]')).to_be_visible()  # no click on refresh
    open_file(page, "lesson2.py")
    expect(page.locator("#editor .cm-content")).to_contain_text("starter with a bug")
    save_elsewhere(teacher, "lesson2.py", 'print("starter, fixed")\n', area="course")
    assert teacher.post("/api/course/push", json={"path": "lesson2.py", "students": [user]}).status_code == 200
    expect(page.locator("#editor .cm-content")).to_contain_text("starter, fixed")
    expect(page.locator(".toast").last).to_contain_text("Your teacher updated lesson2.py")
    shot(page, "42-follow-re-push")
    assert page.errors == []


def test_run_after_a_save_elsewhere_never_runs_text_the_page_does_not_show(ide):
    page, _, other = ide
    # The news of the other save is lost on the way (as on a flaky network):
    # the editor still shows version A when Run is pressed.
    def drop_file_news(ws):
        server = ws.connect_to_server()
        ws.on_message(lambda m: server.send(m))
        server.on_message(lambda m: None if _is_file_news(m) else ws.send(m))

    page.route_web_socket(re.compile(r".*/ws/run$"), drop_file_news)
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    write_program(page, "shown.py", 'print("version A")\n')
    save_elsewhere(other, "shown.py", 'print("version B from the other computer")\n')
    page.wait_for_timeout(500)
    assert "version A" in editor_text(page)
    page.get_by_role("button", name="Run").click()
    text = wait_terminal(page, "──")
    assert "version B from the other computer" not in text and "version A" not in text.split("──")[0]
    assert "changed somewhere else" in text
    # The page shows the version that is there now; Run runs that one.
    expect(page.locator("#editor .cm-content")).to_contain_text("version B from the other computer")
    shot(page, "43-run-refused-changed-elsewhere")
    page.get_by_role("button", name="Run").click()
    wait_terminal(page, "Finished")
    assert "version B from the other computer" in terminal_text(page)
    assert page.errors == []


def _is_file_news(message):
    try:
        return json.loads(message).get("type") == "files"
    except (ValueError, AttributeError, TypeError):
        return False


def test_files_a_program_or_another_session_makes_appear_in_the_tree(ide):
    page, _, other = ide
    write_program(page, "writer.py", 'open("scores.txt", "w").write("10")\n')
    page.get_by_role("button", name="Run").click()
    wait_terminal(page, "Finished")
    expect(page.locator('.tree-section[data-area="home"] .tree-row[data-path="scores.txt"]')).to_be_visible()
    r = other.request("PUT", "/api/files/home/from_the_other_computer.py", data=b"x = 1\n")
    assert r.status_code == 200
    expect(page.locator('.tree-section[data-area="home"] .tree-row[data-path="from_the_other_computer.py"]')).to_be_visible()
    assert other.request("DELETE", "/api/files/home/scores.txt").status_code == 200
    expect(page.locator('.tree-section[data-area="home"] .tree-row[data-path="scores.txt"]')).to_have_count(0)
    shot(page, "44-tree-follows")
    assert page.errors == []
