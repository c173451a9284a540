"""The Trash view and what a program leaves, in a real browser (Debian's
Chromium driven by Playwright) against the real server: delete a folder,
restore one of its files from the Trash; a FIFO is shown as something the
IDE cannot open, and can be deleted; a program that fills its home past the
quota is told so in the console, its next run is refused, and the teacher's
roster marks it."""
import os
import re

import pytest

from tests.browser import (shot, login, open_file, editor_text, wait_terminal, write_program, student_ide,
                           LIMITS, expect)
from tests.helpers import create_user

pytestmark = pytest.mark.timeout(300)


def test_delete_a_folder_then_restore_a_file_from_the_trash(start_server, new_page):
    server = start_server(processes=1)
    create_user(server.env["DATABASE_URL"], "ada", "ada-password")
    api = server.client()
    api.login_ok("ada", "ada-password")
    for path, text in (("proj/main.py", "print('main')\n"), ("proj/util.py", "def f(): pass\n")):
        assert api.request("PUT", "/api/files/home/" + path, data=text.encode()).status_code == 200
    home_dir = os.path.join(server.env["DATA_DIR"], "storage", "home", "ada")
    os.mkfifo(os.path.join(home_dir, "trap.txt"))  # as a program could

    page = new_page(server)
    login(page, "ada", "ada-password", lands_on="/ide")
    home = page.locator('.tree-section[data-area="home"]')

    # The FIFO is listed, marked as not openable, and can be deleted.
    trap = home.locator('.tree-row[data-path="trap.txt"]')
    expect(trap).to_have_class(re.compile(r"\bother\b"))
    trap.click(button="right")
    page.get_by_role("menuitem", name="Delete…").click()
    page.get_by_role("dialog", name="Delete trap.txt?").get_by_role("button", name="Delete").click()
    expect(trap).to_have_count(0)

    home.locator('.tree-row[data-path="proj"]').focus()
    page.keyboard.press("Delete")
    confirm = page.get_by_role("dialog", name="Delete proj?")
    expect(confirm).to_contain_text("restored from the Trash")
    confirm.get_by_role("button", name="Delete").click()
    expect(home.locator('.tree-row[data-path="proj"]')).to_have_count(0)

    page.get_by_role("button", name="Trash of My files").click()
    trash = page.get_by_role("dialog", name="Trash of My files")
    expect(trash.locator('.trash-entry[data-path="proj"]')).to_contain_text("2 files")
    shot(page, "20-trash")
    trash.get_by_role("button", name="Restore proj/util.py").click()
    expect(trash.locator('.trash-files li[data-path="proj/util.py"]')).to_have_count(0)
    expect(trash.locator('.trash-files li[data-path="proj/main.py"]')).to_be_visible()
    trash.get_by_role("button", name="Close").first.click()

    home.locator('.tree-row[data-path="proj"]').click()
    open_file(page, "proj/util.py")
    assert editor_text(page).strip() == "def f(): pass"
    assert api.get("/api/files/home/proj/main.py").status_code == 404  # only the one chosen came back
    assert page.errors == []


# It goes on after its write, so that it is the guard that stops it (a program
# that ends first is told after its run that the folder is over its quota).
FILL_THE_HOME = ('import time\nwith open("big.bin", "wb") as f:\n    f.write(b"x" * (1536 << 10))\n'
                 'print("written", flush=True)\ntime.sleep(60)\n')


def test_a_redraw_of_the_tree_keeps_the_keyboard_on_its_row(start_server, new_page):
    """A file saved elsewhere redraws the tree; a keyboard user's next key
    still reaches the row they were on (it went to the page before)."""
    server = start_server(processes=1)
    create_user(server.env["DATABASE_URL"], "ada", "ada-password")
    api = server.client()
    api.login_ok("ada", "ada-password")
    assert api.request("PUT", "/api/files/home/proj/main.py", data=b"print(1)\n").status_code == 200
    page = new_page(server)
    login(page, "ada", "ada-password", lands_on="/ide")
    home = page.locator('.tree-section[data-area="home"]')
    home.locator('.tree-row[data-path="proj"]').focus()
    assert api.request("PUT", "/api/files/home/elsewhere.py", data=b"x = 1\n").status_code == 200
    expect(home.locator('.tree-row[data-path="elsewhere.py"]')).to_have_count(1)  # redrawn
    expect(home.locator('.tree-row[data-path="proj"]')).to_be_focused()
    page.keyboard.press("Delete")
    expect(page.get_by_role("dialog", name="Delete proj?")).to_be_visible()


def test_a_file_saved_elsewhere_during_a_drag_does_not_drop_the_drag(start_server, new_page):
    """The tree waits for the drop to redraw: Chromium ends a drag whose row
    is taken off the page, so a change announced mid-drag lost the move. The
    drag is dispatched as the page's own events (Playwright's drag is one
    step, with no moment in the middle for the change)."""
    server = start_server(processes=1)
    create_user(server.env["DATABASE_URL"], "ada", "ada-password")
    api = server.client()
    api.login_ok("ada", "ada-password")
    for path in ("week1/a.py", "ideas.py"):
        assert api.request("PUT", "/api/files/home/" + path, data=b"x = 1\n").status_code == 200
    page = new_page(server)
    login(page, "ada", "ada-password", lands_on="/ide")
    home = page.locator('.tree-section[data-area="home"]')
    source = home.locator('.tree-row[data-path="ideas.py"]').element_handle()
    data = page.evaluate_handle("() => new DataTransfer()")
    source.dispatch_event("dragstart", {"dataTransfer": data})
    assert api.request("PUT", "/api/files/home/elsewhere.py", data=b"y = 2\n").status_code == 200
    page.wait_for_timeout(1500)  # the change is announced and the tree loaded meanwhile
    assert source.evaluate("(row) => row.isConnected")  # still on the page: the drag goes on
    expect(home.locator('.tree-row[data-path="elsewhere.py"]')).to_have_count(0)  # drawn after the drop
    target = home.locator('.tree-row[data-path="week1"]')
    target.dispatch_event("dragover", {"dataTransfer": data})
    target.dispatch_event("drop", {"dataTransfer": data})
    source.dispatch_event("dragend", {"dataTransfer": data})
    expect(home.locator('.tree-row[data-path="elsewhere.py"]')).to_be_visible()
    expect(home.locator('.tree-row[data-path="week1/ideas.py"]')).to_be_visible()
    names = {e["path"] for e in api.get("/api/files/home", params={"tree": "1"}).json()["entries"]}
    assert {"week1/ideas.py", "elsewhere.py"} <= names and "ideas.py" not in names


def test_a_program_past_the_quota_is_told_in_the_console_and_the_teacher_sees_it(start_server, new_page):
    server = start_server(processes=1, QUOTA_BYTES=1 << 20, RUN_FILE_MB=2, **LIMITS)
    page, user, _ = student_ide(new_page, server)
    create_user(server.env["DATABASE_URL"], "grace", "grace-password", role="teacher")
    write_program(page, "fill.py", FILL_THE_HOME)

    run = page.get_by_role("button", name="Run")
    run.click()
    # The program is stopped as it writes past the quota (its write budget), and told why, in the console.
    text = " ".join(wait_terminal(page, "over its quota").split())  # the console breaks lines between words
    assert "wrote more than your folder can hold" in text and "Delete at least" in text, text
    shot(page, "22-over-quota-notice")
    # The next run is refused, saying why; Run is ready again.
    run.click()
    expect(page.locator("#run-state")).to_have_attribute("data-state", "error")
    expect(page.locator("#run-state")).to_contain_text("Delete at least")
    expect(run).to_be_enabled()

    teacher = new_page(server)
    login(teacher, "grace", "grace-password", lands_on="/teacher")
    ada = teacher.locator(f'#class-panel .student[data-username="{user}"]')
    expect(ada.locator(".badge")).to_contain_text("over quota")
    assert page.errors == [] and teacher.errors == []
