"""WCAG 2.1 AA in Chromium (issue 30, item 10): axe-core finds no violation
(WCAG 2.0/2.1 A and AA, and 2.2's target size) in any state of a lesson's
pages: sign-in; the IDE empty, with a file, after a run, after an error, with
an exercise checked, its history, its help, while debugging; the teacher's
page, the full-screen class with a student's detail open, the gradebook, and
the admin's page. Every state fits 1280x720 without sideways scrolling, the
main pages reflow at 200 % zoom (640x360 CSS px), what a screen reader must
hear is in live regions, and a lesson's core actions work with the keyboard alone.

One server, one browser, a page per person: the states come one after
another as a lesson brings them."""
import pytest

from tests.browser import (LIMITS, assert_accessible, assert_no_sideways_scroll, editor, expect, expect_saved,
                           login, replace_text, shot, wait_ready, wait_terminal, write_program)
from tests.conftest import running_server
from tests.helpers import create_user
from tests.live_support import a_class

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

WAIT = 20_000  # ms: only catches a hang
SCREEN = {"width": 1280, "height": 720}
ZOOMED = {"width": 640, "height": 360}  # 1280x720 at 200 % zoom, in CSS pixels
EXERCISE = {"title": "Double", "file": "double.py", "due": None,
            "instructions": "# Double\n\nRead a number and print twice it.\n",
            "starter": {"double.py": "n = int(input())\nprint(n)\n"}, "tests": "",
            "checks": [{"id": "four", "kind": "output", "input": "2\n", "expected": "4\n", "points": 1,
                        "visibility": "visible"}]}


@pytest.fixture(scope="module")
def lesson(postgres_url):
    """A server with a class (teacher grace, student ada) and one exercise: (server, class number)."""
    with running_server(postgres_url, **LIMITS) as server:
        dsn = server.env["DATABASE_URL"]
        create_user(dsn, "ada", "ada-password", display_name="Ada Lovelace")
        create_user(dsn, "grace", "grace-password", role="teacher", display_name="Grace Hopper")
        number = a_class(server, "grace", "ada", name="8A Python")
        teacher = server.client()
        teacher.login_ok("grace", "grace-password")
        r = teacher.request("PUT", f"/api/classes/{number}/exercises/double", json=EXERCISE)
        assert r.status_code == 200, r.text
        ada = server.client()
        ada.login_ok("ada", "ada-password")
        r = ada.request("PUT", "/api/files/home/keys.py", data=b"print(1 + 1)\n")
        assert r.status_code == 200, r.text
        yield server, number


def check(page, state, zoomed=False):
    """No axe-core violation, and no sideways scroll at 1280x720 (and, for
    the main pages, at 200 % zoom)."""
    assert_accessible(page, state)
    assert_no_sideways_scroll(page, f"{state} at 1280x720")
    if zoomed:
        page.set_viewport_size(ZOOMED)
        try:
            assert_no_sideways_scroll(page, f"{state} at 200 % zoom (640x360)")
        finally:
            page.set_viewport_size(SCREEN)
    assert page.errors == []


def test_every_state_of_a_students_ide_passes_axe_and_fits(lesson, new_page):
    server, number = lesson
    page = new_page(server, viewport=SCREEN, motion="no-preference")
    page.goto("/")
    expect(page.get_by_label("Username")).to_be_visible()
    check(page, "the sign-in page", zoomed=True)
    login(page, "ada", "ada-password", lands_on="/ide")
    tabs = page.locator("#tabs .tab")
    expect(tabs.first).to_be_visible()  # the welcome program, opened at first sign-in
    while tabs.count():
        tabs.first.press("Delete")  # Delete on a tab closes its file
    expect(page.locator("#empty")).to_be_visible()
    check(page, "the IDE with no file open", zoomed=True)

    write_program(page, "first.py", 'print("hello")\n' + "".join(f"print({n} * {n})\n" for n in range(40)))
    check(page, "the IDE with a file open", zoomed=True)

    # A run's outcome is said in a live region, so a screen reader hears it.
    state = page.locator("#run-state")
    expect(state).to_have_attribute("role", "status")
    expect(state).to_have_attribute("aria-live", "polite")
    page.get_by_role("button", name="Run", exact=True).click()
    wait_terminal(page, "1521")  # 39 * 39, the last line
    expect(state).to_have_attribute("data-state", "done", timeout=WAIT)
    check(page, "the IDE after a run")

    replace_text(page, "print(lenght([1, 2]))\n")
    expect_saved(page)
    page.get_by_role("button", name="Run", exact=True).click()
    wait_terminal(page, "NameError")
    expect(state).to_have_attribute("data-state", "stopped", timeout=WAIT)
    expect(state).to_contain_text("error")
    check(page, "the IDE after an error")

    # Earlier versions (the two texts of first.py), with the dialog's diff.
    page.get_by_role("button", name="History").click()
    history = page.get_by_role("dialog", name="History of first.py")
    expect(history.locator(".version-preview .cm-merge-revert, .version-preview .cm-changedLine, "
                           ".version-preview .cm-deletedChunk").first).to_be_visible(timeout=WAIT)
    shot(page, "a11y-history")
    check(page, "the history dialog")
    page.keyboard.press("Escape")
    expect(history).to_have_count(0)

    page.keyboard.press("F1")
    help_dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(help_dialog).to_be_visible()
    check(page, "the help dialog")
    page.keyboard.press("Escape")
    expect(help_dialog).to_have_count(0)

    write_program(page, "loop.py", "total = 0\nfor i in range(3):\n    total += i\nprint(total)\n")
    page.get_by_role("button", name="Debug").click()
    expect(page.locator("#debug-note")).to_contain_text("Paused at line 1 of", timeout=WAIT)
    page.get_by_role("button", name="Step over").click()
    expect(page.locator("#debug-note")).to_contain_text("Paused at line 2 of", timeout=WAIT)
    check(page, "the IDE while debugging")
    page.get_by_role("button", name="Stop").click()
    expect(page.get_by_role("button", name="Debug")).to_be_enabled(timeout=WAIT)

    # An exercise, started and checked: the result is said in a live region.
    page.get_by_role("tab", name="Exercises").click()
    check(page, "the list of exercises")
    page.locator("#exercises-panel .ex-item", has_text="Double").click()
    view = page.locator("#exercises-panel .ex-view")
    view.get_by_role("button", name="Start").click()
    expect(page.locator(".tab.selected")).to_contain_text("double.py")
    status = view.locator(".ex-status")
    expect(status).to_have_attribute("role", "status")
    expect(status).to_have_attribute("aria-live", "polite")
    view.get_by_role("button", name="Check").click()
    expect(view.locator(".check-item").first).to_contain_text("not passed", timeout=60_000)
    check(page, "an exercise after a check", zoomed=True)

    # A teacher's message arrives in a live region.
    notices = page.locator("#talk-notices")
    expect(notices).to_have_attribute("aria-live", "polite")
    teacher = server.client()
    teacher.login_ok("grace", "grace-password")
    r = teacher.post(f"/api/classes/{number}/messages", json={"text": "Look at the board, please."})
    assert r.status_code == 201, r.text
    expect(notices).to_contain_text("Look at the board, please.", timeout=WAIT)
    check(page, "the IDE with a teacher's message")

    # The dark theme (a browser that prefers it): the editor, the console and the history's diff.
    page.emulate_media(color_scheme="dark")
    page.reload()
    wait_ready(page)
    page.locator('.tree-section[data-area="home"] .tree-row[data-path="first.py"]').click()
    expect(page.locator(".tab.selected")).to_contain_text("first.py")
    page.get_by_role("button", name="Run", exact=True).click()
    wait_terminal(page, "NameError")
    check(page, "the IDE after an error, dark")
    page.get_by_role("button", name="History").click()
    history = page.get_by_role("dialog", name="History of first.py")
    expect(history.locator(".version-text .cm-content")).to_be_visible(timeout=WAIT)
    check(page, "the history dialog, dark")


def test_the_teachers_and_the_admins_pages_pass_axe_and_fit(lesson, new_page):
    server, number = lesson
    teacher = new_page(server, viewport=SCREEN, motion="no-preference")
    login(teacher, "grace", "grace-password", lands_on="/teacher")
    expect(teacher.locator('#class-panel .student[data-username="ada"]')).to_be_visible(timeout=WAIT)
    check(teacher, "the teacher's page", zoomed=True)

    # The message form, to chosen students: a tick box a student, a radio button a choice (2.2's 24 px).
    teacher.locator("#class-panel").get_by_label("Only these students:").check()
    expect(teacher.locator("#class-panel .talk-picker")).to_be_visible()
    check(teacher, "the message form to chosen students")
    teacher.locator("#class-panel").get_by_label("Everyone in the class").check()

    teacher.locator('#class-panel .student[data-username="ada"]').click()
    expect(teacher.locator("#class-panel .student-detail .detail-name")).to_contain_text("Ada Lovelace")
    check(teacher, "the teacher's page with a student's detail")

    teacher.locator("#class-panel").get_by_role("button", name="Gradebook").click()
    book = teacher.get_by_role("dialog", name="Gradebook: 8A Python")
    expect(book.locator('tr[data-username="ada"]')).to_be_visible()
    check(teacher, "the gradebook")
    book.get_by_role("button", name="Close").first.click()

    teacher.goto(f"/class/{number}")
    tile = teacher.locator('.tile[data-username="ada"]')
    expect(tile).to_be_visible(timeout=WAIT)
    check(teacher, "the full-screen class", zoomed=True)
    tile.locator("button").click()
    expect(teacher.locator("#class-detail-title")).to_have_text("Ada Lovelace (ada)")
    check(teacher, "the full-screen class with a student's detail open")

    admin = new_page(server, viewport=SCREEN, motion="no-preference")
    login(admin, "admin", server.env["ADMIN_PASSWORD"], lands_on="/admin")
    expect(admin.locator("button", has_text="Reset password").first).to_be_visible(timeout=WAIT)
    check(admin, "the admin's page", zoomed=True)


def test_a_lesson_with_the_keyboard_alone(lesson, new_page):
    """Open a file from the tree, type, run, and read the result: no mouse."""
    server, _ = lesson
    page = new_page(server, viewport=SCREEN, motion="no-preference")
    page.goto("/")
    expect(page.get_by_label("Username")).to_be_focused()  # autofocus
    page.keyboard.type("ada")
    page.keyboard.press("Tab")
    page.keyboard.type("ada-password")
    page.keyboard.press("Enter")
    page.wait_for_url("**/ide")
    page.wait_for_selector("body[data-ready=true]")

    # Alt+1 goes to the file tree (the help lists it), the arrows to keys.py, Enter opens it.
    page.keyboard.press("Alt+1")
    expect(page.locator(".tree-row:focus")).to_have_count(1)
    page.keyboard.press("Home")
    for _ in range(40):
        if page.evaluate("() => document.activeElement.closest('.tree-row')?.dataset.path") == "keys.py":
            break
        page.keyboard.press("ArrowDown")
    else:
        pytest.fail("the arrows never reached keys.py in the file tree")
    page.keyboard.press("Enter")
    expect(page.locator(".tab.selected")).to_contain_text("keys.py")
    page.keyboard.press("Alt+2")  # to the editor
    expect(editor(page)).to_be_focused()

    page.keyboard.press("Control+End")
    page.keyboard.type('print("typed by keyboard")\n')
    expect_saved(page)
    page.keyboard.press("Control+Enter")
    wait_terminal(page, "typed by keyboard")
    expect(page.locator("#run-state")).to_have_attribute("data-state", "done", timeout=WAIT)
    expect(page.locator("#run-state")).to_contain_text("Finished")
    assert page.errors == []


def test_a_violation_fails_with_its_rule_elements_and_advice(browser):
    """The check itself: a page with an unnamed button and an image without
    words fails, and the failure says which rule, where, and what to do."""
    page = browser.new_page()
    try:
        page.set_content('<html lang="en"><title>Bad</title><main><h1>Bad</h1>'
                         '<img id="photo" src="data:,"><button id="nameless"></button></main></html>')
        with pytest.raises(AssertionError) as failed:
            assert_accessible(page, "a bad page")
    finally:
        page.close()
    said = str(failed.value)
    assert "2 accessibility violations in a bad page" in said, said
    assert "- image-alt (critical): Images must have alternative text\n    #photo" in said, said
    assert "- button-name (critical): Buttons must have discernible text\n    #nameless" in said, said
