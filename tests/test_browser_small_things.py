"""Small things a student trips over (issue 21), in Chromium against the
real server: "Move to folder…" offers the folders to click and says why
when it cannot move; the header says when a program waits for input(),
whatever the prompt; a mistyped address shows a page with a way back;
after sign-in the keys go to the editor; a throttled sign-in shows the
server's own sentence. Screenshots go to test-artifacts/."""
import re
import uuid

import pytest
import requests

from tests.browser import (LIMITS, editor, expect, login, new_file, shot, student, wait_ready,
                           wait_terminal, write_program)
from tests.conftest import _shared

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

WAITING = "Waiting for your input: type it in the console and press Enter"


@pytest.fixture
def small_server(shared_servers):
    yield from _shared(shared_servers, **LIMITS)


@pytest.fixture
def ide(small_server, new_page):
    """A new student signed in to the IDE: (page, username, password)."""
    user, password = student(small_server, "s" + uuid.uuid4().hex[:10])
    page = new_page(small_server)
    login(page, user, password, lands_on="/ide")
    return page, user, password


def tree_row(page, path):
    return page.locator(f'.tree-section[data-area="home"] .tree-row[data-path="{path}"]')


def menu_move(page, path):
    tree_row(page, path).click(button="right")
    page.get_by_role("menuitem", name="Move to folder…").click()
    return page.get_by_role("dialog", name=f"Move {path.split('/')[-1]}")


def make_folder(page, name):
    page.get_by_role("button", name="New folder in My files").click()
    page.get_by_role("dialog").get_by_label("Folder name").fill(name)
    page.get_by_role("dialog").get_by_role("button", name="Create").click()
    expect(tree_row(page, name)).to_be_visible()


# -- 2. waiting for input -----------------------------------------------------

@pytest.mark.parametrize("program, shown", [
    ('name = input("Your name? ")\nprint("Hi", name)\n', "Your name\\? "),
    ('print("Type your name:")\nname = input()\nprint("Hi", name)\n', "Type your name:"),
    ('name = input("What is your name?\\n")\nprint("Hi", name)\n', "What is your name\\?"),
], ids=["prompt", "no-prompt", "prompt-with-newline"])
def test_the_header_says_a_program_waits_for_input(ide, program, shown):
    page, _, _ = ide
    write_program(page, "ask.py", program)
    page.get_by_role("button", name="Run").click()
    wait_terminal(page, shown)
    state = page.locator("#run-state")
    expect(state).to_have_text(WAITING)
    expect(state).to_have_attribute("data-state", "input")
    page.keyboard.type("Ada")
    page.keyboard.press("Enter")
    wait_terminal(page, "Hi Ada")
    expect(state).to_have_attribute("data-state", "done")
    assert page.errors == []


def test_the_waiting_pulse_stops_for_a_student_who_asked_for_less_motion(small_server, new_page):
    """The header pulses while a program waits for input, unless the
    system or browser asks for reduced motion; it still says so in words."""
    animations = {}
    for motion in ("no-preference", "reduce"):
        user, password = student(small_server, "m" + uuid.uuid4().hex[:10])
        page = new_page(small_server, motion=motion)
        login(page, user, password, lands_on="/ide")
        write_program(page, "ask.py", 'input("Name? ")\n')
        page.get_by_role("button", name="Run").click()
        state = page.locator("#run-state")
        expect(state).to_have_text(WAITING)
        animations[motion] = state.evaluate("e => getComputedStyle(e).animationName")
        page.keyboard.press("Enter")
        expect(state).to_have_attribute("data-state", "done")
    assert animations == {"no-preference": "pulse", "reduce": "none"}


def test_a_second_input_after_output_is_told_too(ide):
    page, _, _ = ide
    write_program(page, "two.py", 'a = input("First? ")\nprint("You said", a)\nprint("Now the second one:")\n'
                                  'b = input()\nprint("Both:", a, b)\nimport time\ntime.sleep(30)\n')
    page.get_by_role("button", name="Run").click()
    state = page.locator("#run-state")
    expect(state).to_have_text(WAITING)
    page.keyboard.type("one")
    page.keyboard.press("Enter")
    wait_terminal(page, "Now the second one:")
    expect(state).to_have_text(WAITING)
    shot(page, "21-waiting-for-second-input")
    page.keyboard.type("two")
    page.keyboard.press("Enter")
    wait_terminal(page, "Both: one two")
    # Sleeping is not waiting for input.
    expect(state).to_have_text("Running…")
    page.get_by_role("button", name="Stop").click()
    expect(state).to_have_attribute("data-state", "stopped")
    assert page.errors == []


# -- 1. Move to folder… -------------------------------------------------------

def test_move_with_no_other_folder_says_so_and_offers_to_make_one(ide):
    page, _, _ = ide
    new_file(page, "notes.py")
    dialog = menu_move(page, "notes.py")
    expect(dialog).to_contain_text("There is no other folder to move notes.py to yet")
    shot(page, "21-move-no-folder")
    dialog.get_by_role("button", name="New folder…").click()
    ask = page.get_by_role("dialog", name="Move notes.py to a new folder")
    ask.get_by_label("Name of the new folder").fill("week1")
    ask.get_by_role("button", name="Make it and move").click()
    expect(tree_row(page, "week1/notes.py")).to_be_visible()
    expect(page.locator(".tab.selected")).to_contain_text("week1/notes.py")  # the open tab follows
    assert page.errors == []


def test_move_offers_the_folders_to_click_and_says_why_it_cannot(ide, small_server):
    page, user, password = ide
    make_folder(page, "week1")
    make_folder(page, "week2")
    new_file(page, "notes.py")

    # The folders, the top level among them; where it is now cannot be picked.
    dialog = menu_move(page, "notes.py")
    choices = dialog.locator(".folder-choice")
    expect(choices).to_have_count(3)
    expect(choices.nth(0)).to_contain_text("My files (the top level)")
    expect(choices.nth(0)).to_be_disabled()
    shot(page, "21-move-choose-a-folder")
    dialog.get_by_role("button", name="week1").click()
    expect(dialog).to_be_hidden()
    expect(tree_row(page, "week1/notes.py")).to_be_visible()
    expect(page.locator(".tab.selected")).to_contain_text("week1/notes.py")

    # A file of the same name is already there: said, nothing moved.
    client = small_server.client()
    client.login_ok(user, password)
    assert client.request("PUT", "/api/files/home/week2/notes.py", data="other",
                          headers={"Content-Type": "text/plain"}).status_code in (200, 201)
    page.get_by_role("button", name="Refresh My files").click()
    tree_row(page, "week2").click()
    dialog = menu_move(page, "week1/notes.py")
    dialog.get_by_role("button", name="week2").click()
    expect(dialog.get_by_role("alert")).to_have_text(
        "The folder week2 already has a file called notes.py. Rename one of them first, then move it.")
    dialog.get_by_role("button", name="Cancel").click()
    expect(tree_row(page, "week1/notes.py")).to_be_visible()

    # A folder is not offered itself, nor a folder inside it, and says why.
    tree_row(page, "week1").click(button="right")
    page.get_by_role("menuitem", name="New folder here…").click()
    page.get_by_role("dialog").get_by_label("Folder name").fill("inner")
    page.get_by_role("dialog").get_by_role("button", name="Create").click()
    expect(tree_row(page, "week1/inner")).to_be_visible()
    dialog = menu_move(page, "week1")
    expect(dialog).to_contain_text("A folder cannot go inside itself")
    folders = dialog.locator(".folder-choice").all_inner_texts()
    assert not any("week1" in f for f in folders), folders
    dialog.get_by_role("button", name="week2").click()
    expect(tree_row(page, "week2/week1")).to_be_visible()
    assert page.errors == []


# -- 3. a mistyped address --------------------------------------------------------

@pytest.mark.parametrize("address", ["/ide/typo", "/nothing", "/api/nope"])
def test_a_mistyped_address_shows_a_page_with_a_way_back(small_server, new_page, address):
    user, password = student(small_server, "s" + uuid.uuid4().hex[:10])
    page = new_page(small_server)
    answer = page.goto(address)
    assert answer.status == 404
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()
    expect(page.locator("main")).to_contain_text(f"There is no page at {address}")
    if address == "/ide/typo":
        shot(page, "21-not-found")
    page.get_by_role("link", name="Go to the sign-in page").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    # Signed in, the way back leads to the IDE.
    login(page, user, password, lands_on="/ide")
    page.goto(address)
    page.get_by_role("link", name="Back to your files").click()
    page.wait_for_url(re.compile(r"/ide$"))
    wait_ready(page)
    assert page.errors == []


def test_programs_asking_for_a_missing_address_still_get_json(small_server):
    browser_accept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
    page = requests.get(small_server.url + "/nothing", headers={"Accept": browser_accept}, timeout=10)
    assert page.status_code == 404 and page.headers["Content-Type"].startswith("text/html")
    assert '<a id="way-back"' in page.text and 'href="/"' in page.text
    for path, headers in [("/api/nope", {}), ("/api/nope", {"Accept": browser_accept}),
                          ("/nothing", {"Accept": "application/json"}),
                          ("/nothing", {"Accept": browser_accept, "X-Requested-With": "XMLHttpRequest"}),
                          ("/nothing", {})]:
        answer = requests.get(small_server.url + path, headers=headers, timeout=10)
        assert answer.status_code == 404, (path, headers)
        assert answer.json() == {"error": "not_found", "message": f"There is nothing at {path}."}, (path, headers)
    # The text of the address is never taken for markup.
    odd = requests.get(small_server.url + "/<b>x</b>", headers={"Accept": browser_accept}, timeout=10)
    assert "<b>x</b>" not in odd.text and "&lt;b&gt;x&lt;/b&gt;" in odd.text


# -- 4. after sign-in ------------------------------------------------------------

def test_after_sign_in_the_keys_go_to_the_editor(small_server, new_page):
    user, password = student(small_server, "s" + uuid.uuid4().hex[:10])
    page = new_page(small_server)
    login(page, user, password, lands_on="/ide")  # hello.py, a new student's first file, is open
    expect(page.locator(".tab.selected")).to_contain_text("hello.py")
    page.wait_for_function("() => !!document.activeElement?.closest('#editor .cm-editor')")
    page.keyboard.type("# typed at once\n")
    expect(editor(page)).to_contain_text("# typed at once")
    assert page.errors == []


# -- 5. a throttled sign-in ---------------------------------------------------------

def test_a_throttled_sign_in_shows_the_servers_sentence(start_server, new_page):
    server = start_server(processes=1, LOGIN_FAILURES_PER_USER=2, **LIMITS)
    user, _ = student(server)
    page = new_page(server)
    page.goto("/")
    for _ in range(3):
        page.get_by_label("Username").fill(user)
        page.get_by_label("Password").fill("nope-nope-nope")
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#message")).not_to_have_text(re.compile("Signing in"))
    message = page.locator("#message")
    expect(message).to_have_text(re.compile(
        r"^Too many failed sign-ins for this account\. Try again in \d+ (seconds?|minutes)\. "
        r"You can still sign in on a computer you have signed in on before\. "
        r"If you forgot your password, ask your teacher to reset it\.$"))
    expect(page.locator("#wait")).to_have_text(re.compile(r"The Sign in button works again in \d+ (s|min)\."))
    expect(page.get_by_role("button", name="Sign in")).to_be_disabled()
    shot(page, "21-sign-in-throttled")
    assert page.errors == []
