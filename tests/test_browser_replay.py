"""Replay in Chromium (issue 33): a student writes a file in the IDE,
typing with a paste in the middle and a correction after it; her teacher
replays how it was written: the timeline from the empty file to the end,
the paste highlighted and listed, Play at speed, all with the keyboard."""
import time

from tests.browser import LIMITS, assert_accessible, editor, expect, expect_saved, login, new_file, shot, student
from tests.helpers import create_user
from tests.live_support import a_class
from tests.test_browser_class import row

PASTED = "total = sum(range(10))\n"


def test_a_teacher_replays_how_a_student_wrote_a_file_with_a_paste(start_server, new_page):
    server = start_server(**LIMITS)
    ada, ada_password = student(server, "ada")
    create_user(server.env["DATABASE_URL"], "grace", "grace-password", role="teacher", display_name="Grace Hopper")
    a_class(server, "grace", "ada", name="9C Python")

    page = new_page(server)
    login(page, ada, ada_password, lands_on="/ide")
    new_file(page, "story.py")
    editor(page).click()
    page.keyboard.type("# my program\n")
    page.evaluate("""(text) => {
        const data = new DataTransfer();
        data.setData('text/plain', text);
        document.querySelector('#editor .cm-content').dispatchEvent(
            new ClipboardEvent('paste', {clipboardData: data, bubbles: true, cancelable: true}));
    }""", PASTED)
    page.keyboard.type("answer = totl")
    page.keyboard.press("Backspace")
    page.keyboard.type("al")
    expect_saved(page)
    final = "# my program\n" + PASTED + "answer = total"
    page.close()  # (her socket closes: what it recorded is written within a second)

    teacher_api = server.client()
    teacher_api.login_ok("grace", "grace-password")
    deadline = time.monotonic() + 20  # hang guard
    while not teacher_api.get("/api/replay/user/ada/story.py").json()["chunks"] and time.monotonic() < deadline:
        time.sleep(0.2)

    teacher = new_page(server)
    login(teacher, "grace", "grace-password", lands_on="/teacher")
    row(teacher, "ada").click()
    teacher.locator('#class-panel .tree-row[data-path="story.py"]').click()
    expect(editor(teacher)).to_contain_text("answer = total")
    teacher.get_by_role("button", name="Replay how it was written").click()
    dialog = teacher.get_by_role("dialog", name="Replay of story.py (ada)")
    typed = len("# my program\n") + len("answer = totl") + len("al")
    edits = typed + 1 + 1  # each key, the paste, the Backspace
    expect(dialog).to_contain_text(f"{edits} edits")
    expect(dialog).to_contain_text(f"{typed} characters typed, 1 paste ({len(PASTED)} characters")
    shown = dialog.locator(".cm-content")
    timeline = dialog.get_by_role("slider", name="Place in the replay (edits)")
    expect(timeline).to_have_attribute("max", str(edits))

    # The keyboard moves along the timeline: the start, one edit on, the end.
    timeline.focus()
    teacher.keyboard.press("Home")
    expect(dialog.locator(".replay-where")).to_contain_text(f"Before the first edit (of {edits})")
    assert shown.inner_text().strip() == ""
    teacher.keyboard.press("ArrowRight")
    expect(shown).to_have_text("#")
    teacher.keyboard.press("End")
    expect(dialog.locator(".replay-where")).to_contain_text(f"edit {edits} of {edits}")
    assert shown.inner_text().replace("\u200b", "") == final
    # The paste is highlighted while it stays, and listed: a click shows the text just after it.
    expect(dialog.locator(".cm-pasted")).to_have_text(PASTED.rstrip("\n"))
    dialog.get_by_text("Pastes (1)").click()
    dialog.get_by_role("button", name=f"{len(PASTED)} characters pasted").click()
    expect(dialog.locator(".replay-where")).to_contain_text(f"edit {len('# my program') + 2} of {edits}")
    expect(shown).to_contain_text("total = sum(range(10))")
    expect(shown).not_to_contain_text("answer")
    assert_accessible(teacher, "the replay of a student's file")
    shot(teacher, "85-teacher-replay")

    # Played at 200 times the speed, it ends as she left it.
    dialog.get_by_label("Speed").select_option("200")
    dialog.get_by_role("button", name="Play").click()
    expect(dialog.locator(".replay-where")).to_contain_text(f"edit {edits} of {edits}", timeout=30_000)  # hang guard
    expect(dialog.get_by_role("button", name="Play")).to_be_visible()
    assert shown.inner_text().replace("\u200b", "") == final
