"""Talking to the class in Chromium (issue 24) on a 2-worker server: the
teacher's message appears in every open IDE of the class (students' run
sockets on both workers, and a student's browser, without a click and
without taking the focus from the editor); a raised hand reaches the
teacher's queue in order, with its note and line; answering it lowers it
in the student's IDE. Everything a person chose (a message, a note, a
display name, a file name) shows as text, never as markup."""
import asyncio
import concurrent.futures
import contextlib
import threading

from tests.browser import LIMITS, expect, login, shot, write_program
from tests.conftest import People
from tests.helpers import create_user
from tests.live_support import a_class
from tests.test_class_talk import ides_on_both_workers

WAIT = 15_000  # ms: only catches a hang
HOSTILE = '<img src=x onerror="window.pwned=1">'


def in_editor(page):
    return page.evaluate("() => !!document.activeElement?.closest('#editor')")


class IdesInAThread:
    """Students' IDE sockets (over both workers) in a thread of their own,
    beside the synchronous browser: `ready` once they listen, `result()`
    the first class message each heard."""

    def __init__(self, server, students):
        self.ready = threading.Event()
        self.pool = concurrent.futures.ThreadPoolExecutor(1)
        self.future = self.pool.submit(asyncio.run, self._listen(server, students))

    async def _listen(self, server, students):
        async with contextlib.AsyncExitStack() as stack:
            ides = await ides_on_both_workers(server, students, stack)
            self.ready.set()
            return {username: await rc.until("class_message", 30) for username, rc in ides.items()}

    def result(self):
        try:
            return self.future.result(timeout=60)
        finally:
            self.pool.shutdown()


def test_a_broadcast_reaches_every_ide_and_a_raised_hand_reaches_the_teacher(start_server, new_page):
    server = start_server(processes=2, **LIMITS)
    dsn = server.env["DATABASE_URL"]
    create_user(dsn, "grace", "grace-password", role="teacher", display_name=HOSTILE + "Mrs Grace")
    create_user(dsn, "ada", "ada-password", display_name="<script>window.pwned=2</script>Ada")
    create_user(dsn, "bob", "bob-password", display_name="Bob Builder")
    people = People(server)
    others = [people.student(f"s{n}") for n in range(4)]
    number = a_class(server, "grace", "ada", "bob", *others, name="8B")

    teacher = new_page(server)
    login(teacher, "grace", "grace-password", lands_on="/teacher")
    talk = teacher.locator("#class-panel .class-talk")
    expect(talk.locator(".hands-empty")).to_have_text("No hands up.")

    page = new_page(server)
    login(page, "ada", "ada-password", lands_on="/ide")
    write_program(page, "loop.py", "n = 0\nwhile n < 10:\n    print(n)\n")
    page.keyboard.press("Control+End")
    listeners = IdesInAThread(server, others)
    assert listeners.ready.wait(60)

    # The teacher writes to everyone; the student, typing in her editor, sees it without a click.
    talk.get_by_label("Message").fill(f"{HOSTILE}<script>window.pwned=3</script> Stop and look at the board")
    talk.get_by_role("button", name="Send").click()
    expect(talk.locator(".talk-status")).to_have_text("Sent to 6 students.")
    notice = page.locator("#talk-notices .class-message")
    expect(notice).to_contain_text(f"Message from {HOSTILE}Mrs Grace", timeout=WAIT)
    expect(notice.locator(".talk-text")).to_have_text(f"{HOSTILE}<script>window.pwned=3</script> "
                                                      "Stop and look at the board")
    assert page.locator("#talk-notices").get_attribute("aria-live") == "polite"
    assert in_editor(page), "the notice took the focus from the editor"
    heard = listeners.result()
    assert sorted(heard) == sorted(s.username for s in others)
    assert all(m["text"].endswith("Stop and look at the board") for m in heard.values())
    shot(page, "40-student-teacher-message")

    # Bob raises his hand first (his file's name is his own choice), then Ada from her IDE.
    bob = server.client()
    bob.login_ok("bob", "bob-password")
    r = bob.post(f"/api/classes/{number}/hand", json={"note": "", "file": "<img src=x onerror=window.pwned=4>.py",
                                                       "line": 3})
    assert r.status_code == 200, r.text
    page.get_by_role("button", name="Ask for help").click()
    dialog = page.get_by_role("dialog", name="Ask your teacher for help")
    dialog.get_by_label("What do you need help with?").fill("<b onmouseover=window.pwned=5>my loop</b> never stops")
    expect(dialog.get_by_label("Show my teacher where I am: loop.py, line 4")).to_be_checked()
    dialog.get_by_role("button", name="Raise my hand").click()
    expect(page.locator("#hand-btn")).to_have_attribute("aria-pressed", "true")
    assert in_editor(page)

    queue = talk.locator(".hands-queue .hand")
    expect(queue).to_have_count(2, timeout=WAIT)
    expect(queue.nth(0)).to_contain_text("Bob Builder (bob)")
    expect(queue.nth(0).locator(".hand-where")).to_have_text("<img src=x onerror=window.pwned=4>.py:3")
    expect(queue.nth(1).locator(".hand-name")).to_have_text("<script>window.pwned=2</script>Ada")
    expect(queue.nth(1).locator(".hand-note")).to_have_text("<b onmouseover=window.pwned=5>my loop</b> never stops")
    expect(queue.nth(1).locator(".hand-where")).to_have_text("loop.py:4")
    expect(queue.nth(1)).to_contain_text("just now")
    expect(talk.locator(".hands-count")).to_have_text("(2)")
    assert talk.locator("img, b, script").count() == 0
    shot(teacher, "41-teacher-hands-queue")

    # The teacher answers Ada: her hand goes down in her IDE, and she is told who answered.
    queue.nth(1).get_by_role("button", name="Mark").click()
    expect(queue).to_have_count(1)
    expect(queue.nth(0).get_by_role("button", name="Mark")).to_be_focused()  # the keyboard goes on to the next hand
    expect(page.locator("#hand-btn")).to_have_attribute("aria-pressed", "false", timeout=WAIT)
    expect(page.locator("#talk-notices .hand-notice")).to_contain_text(
        f"{HOSTILE}Mrs Grace marked your raised hand as answered.")
    assert page.locator("#talk-notices img, #talk-notices script, #talk-notices b").count() == 0
    assert in_editor(page)

    # Dismissed, the message stays away after a reload.
    notice.get_by_role("button", name="OK, close the message").click()
    expect(notice).to_have_count(0)
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    expect(page.locator("#talk-notices .class-message")).to_have_count(0)
    for p in (page, teacher):
        assert p.evaluate("window.pwned") is None
    assert teacher.errors == [] and page.errors == []


def test_a_student_who_opens_the_ide_after_a_group_message_still_sees_it(start_server, new_page):
    server = start_server(**LIMITS)
    dsn = server.env["DATABASE_URL"]
    create_user(dsn, "grace", "grace-password", role="teacher", display_name="Mrs Grace")
    for name in ("ada", "bob"):
        create_user(dsn, name, f"{name}-password", display_name=name.title())
    create_user(dsn, "cy", "cy-password", display_name=HOSTILE)
    a_class(server, "grace", "ada", "bob", "cy", name="9A")

    teacher = new_page(server)
    login(teacher, "grace", "grace-password", lands_on="/teacher")
    talk = teacher.locator("#class-panel .class-talk")
    talk.get_by_label("Message").fill("Bob, look at line 4 of lesson2.py")
    talk.get_by_label("Only these students:").check()
    expect(talk.locator(".talk-picker label")).to_have_count(3)
    expect(talk.locator(".talk-picker")).to_contain_text(f"{HOSTILE} (cy)")  # a name is text in the picker too
    assert talk.locator(".talk-picker img").count() == 0
    expect(talk.locator("button[type=submit]")).to_have_text("Send to 0 students")
    talk.get_by_label("Bob (bob)").check()
    # Before sending, the button says how many will get it.
    expect(talk.locator("button[type=submit]")).to_have_text("Send to 1 student")
    shot(teacher, "42-teacher-group-message")
    talk.get_by_role("button", name="Send").click()
    expect(talk.locator(".talk-status")).to_have_text("Sent to 1 student. The next message goes to everyone.")
    # The form is back on everyone: the next "look at the board" reaches the whole class.
    expect(talk.get_by_label("Everyone in the class")).to_be_checked()
    expect(talk.locator(".talk-picker")).to_be_hidden()
    expect(talk.locator("button[type=submit]")).to_have_text("Send to everyone (3 students)")

    bob = new_page(server)
    login(bob, "bob", "bob-password", lands_on="/ide")
    expect(bob.locator("#talk-notices .class-message")).to_contain_text("Bob, look at line 4 of lesson2.py")
    expect(bob.locator("#talk-notices .class-message")).to_contain_text("Message from Mrs Grace")
    ada = new_page(server)
    login(ada, "ada", "ada-password", lands_on="/ide")
    # Ada's IDE has asked for the latest messages: none is hers.
    expect(ada.locator("#talk-notices")).to_have_attribute("data-caught-up", "true")
    expect(ada.locator("#talk-notices .class-message")).to_have_count(0)
    assert teacher.errors == [] and bob.errors == [] and ada.errors == []
