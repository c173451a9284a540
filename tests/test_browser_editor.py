"""An editor that helps instead of hindering (issue 13, items 1-5 and 8), in
Chromium at 1366x768 against the real server: Enter is a new line after
every line of a lesson; completion knows `random.ra`; mistakes are
underlined before running and a run's error line is marked and reached
from the console; focus comes back to the editor; Ctrl+C copies; waiting
for input shows; the panes resize, the tree hides, lines wrap, figures fit;
and the small things: no 401 on the sign-in page, an icon, no F5-only hint,
whole words in the console. Screenshots go to test-artifacts/."""
import json
import re
import uuid

import pytest

from tests.browser import (LIMITS, editor, editor_text, expect, login, new_file, open_file, replace_text,
                           shot, student, terminal_text, wait_ready, wait_terminal, write_program)
from tests.conftest import EDITING_HELP, _shared
from tests.helpers import wait_for_editing_help

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

# A lesson's lines; those marked True end in a word the editor has
# suggestions for (which Enter used to take instead of starting a new line).
LESSON = [("import random", True), ("import math", True), ("import time", True),
          ("from random import randint", True), ("import matplotlib.pyplot as plt", False), ("total = 0", False),
          ("count = randint(1, 6)", False), ("total = total + count", True), ("print(math.sqrt(total))", False),
          ("plt.plot([1, 2, 3])", False), ("plt.show()", False)]
POPUP = ".cm-tooltip-autocomplete"


@pytest.fixture
def ide_server(shared_servers):
    """One server for this module's stories (programs in the local sandbox)."""
    for server in _shared(shared_servers, **LIMITS, **EDITING_HELP):
        yield wait_for_editing_help(server)


@pytest.fixture
def ide(ide_server, new_page):
    """A new student signed in to the IDE: (page, username)."""
    user, password = student(ide_server, "s" + uuid.uuid4().hex[:10])
    page = new_page(ide_server)
    login(page, user, password, lands_on="/ide")
    return page, user


def popup_labels(page):
    return page.locator(f"{POPUP} li .cm-completionLabel").all_inner_texts()


def active_in(page, selector):
    return page.evaluate("(s) => !!document.activeElement?.closest(s)", selector)


def test_enter_is_always_a_new_line_and_tab_or_ctrl_space_accept(ide):
    page, _ = ide
    new_file(page, "lesson.py")
    editor(page).click()
    for line, suggested in LESSON:
        page.keyboard.type(line, delay=15)
        if suggested:
            expect(page.locator(POPUP)).to_be_visible()  # Enter comes while the suggestions are open
        page.keyboard.press("Enter")
    assert [line.strip() for line in editor_text(page).split("\n")] == [line for line, _ in LESSON] + [""]
    shot(page, "20-editor-lesson-typed")

    # random.ra offers randint first (not randbytes, which jedi lists first), no private names; Tab takes it.
    page.keyboard.type("x = random.ra")
    expect(page.locator(POPUP)).to_be_visible()
    expect(page.locator(f"{POPUP} li[aria-selected]")).to_have_text(re.compile("randint"))
    assert not [name for name in popup_labels(page) if name.startswith("_")]
    shot(page, "21-editor-completion-randint")
    page.keyboard.press("Tab")
    expect(page.locator(".cm-activeLine")).to_have_text("x = random.randint")
    # The call's signature shows while its arguments are typed.
    page.keyboard.type("(1, ")
    expect(page.locator(".assist-signature-help")).to_contain_text("randint(a: int, b: int) -> int")
    expect(page.locator(".assist-signature-help strong")).to_have_text("b: int")
    shot(page, "22-editor-signature")
    page.keyboard.press("End")
    page.keyboard.press("Enter")

    # Ctrl+Space asks, and accepts; matplotlib's members are known.
    page.keyboard.type("plt.sh")
    expect(page.locator(f"{POPUP} li", has_text="show")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator(POPUP)).to_have_count(0)
    page.keyboard.press("Control+Space")
    expect(page.locator(f"{POPUP} li", has_text="show")).to_be_visible()
    page.keyboard.press("Control+Space")
    expect(page.locator(".cm-activeLine")).to_have_text("plt.show")
    # Tab with no suggestions open indents, as before.
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    expect(page.locator(".cm-activeLine")).to_have_text(re.compile(r"^\s{4}$"))
    assert page.errors == []


def test_documentation_of_a_suggestion(ide):
    page, _ = ide
    new_file(page, "docs.py")
    editor(page).click()
    page.keyboard.type("import random\nrandom.randi")
    expect(page.locator(f"{POPUP} li[aria-selected]")).to_have_text(re.compile("randint"))
    expect(page.locator(".cm-completionInfo")).to_contain_text("Return random integer in range [a, b]")
    assert page.errors == []


def test_the_students_own_names_from_their_other_files(ide):
    page, _ = ide
    write_program(page, "shapes.py", 'def area(width, height):\n    """Width times height."""\n'
                                     "    return width * height\n")
    new_file(page, "main.py")
    editor(page).click()
    page.keyboard.type("import shapes\nshapes.ar")
    expect(page.locator(f"{POPUP} li[aria-selected]")).to_have_text(re.compile("area"))
    page.keyboard.press("Tab")
    page.keyboard.type("(")
    expect(page.locator(".assist-signature-help")).to_contain_text("area(width, height)")
    assert page.errors == []


def test_mistakes_are_underlined_before_running(ide):
    page, _ = ide
    new_file(page, "typo.py")
    replace_text(page, "total = 0\nfor i in range(3):\n    total = totl + i\nprint(total)\n")
    mark = page.locator(".cm-lintRange-error")
    expect(mark).to_have_count(1)
    expect(mark).to_have_text("totl")
    expect(page.locator(".cm-lint-marker-error")).to_have_count(1)
    mark.hover()
    expect(page.locator(".cm-tooltip-lint")).to_contain_text("Undefined name 'totl'")
    shot(page, "23-editor-undefined-name")
    # Fixing it removes the mark; a syntax error is marked where it is.
    replace_text(page, "total = 0\nfor i in range(3)\n    total = total + i\n")
    expect(page.locator(".cm-lint-marker-error")).to_have_count(1)
    page.locator(".cm-lint-marker-error").hover()
    expect(page.locator(".cm-tooltip-lint, .cm-tooltip-hover")).to_contain_text("Expected ':'")
    replace_text(page, "total = 0\nfor i in range(3):\n    total = total + i\n")
    expect(page.locator(".cm-lintRange-error")).to_have_count(0)
    assert page.errors == []


def test_a_runs_error_is_marked_and_its_lines_lead_to_it(ide):
    page, _ = ide
    write_program(page, "helpers.py", "def share(total, people):\n    return total / people\n")
    write_program(page, "party.py", "from helpers import share\n\nprint('start')\nprint(share(10, 0))\n")
    page.get_by_role("button", name="Run").click()
    wait_terminal(page, "ZeroDivisionError")
    wait_terminal(page, "──")
    # The run is over: what the student types next goes to the code.
    page.wait_for_function("() => !!document.activeElement?.closest('#editor')")
    expect(page.locator(".cm-run-frame-line")).to_have_text("print(share(10, 0))")
    text = terminal_text(page)
    assert 'File "/home/student/helpers.py", line 2' in text and "runpy" not in text, text
    shot(page, "24-run-error-marked")

    # The traceback's line in helpers.py is a link to it.
    link = page.locator("#terminal .xterm-rows > div", has_text='helpers.py", line 2')
    box = link.bounding_box()
    page.mouse.move(box["x"] + 30, box["y"] + box["height"] / 2)
    page.mouse.click(box["x"] + 30, box["y"] + box["height"] / 2)
    expect(page.locator(".tab.selected")).to_contain_text("helpers.py")
    expect(page.locator(".cm-run-error-line")).to_have_text(re.compile(r"return total / people"))
    expect(page.locator(".cm-run-error-message")).to_have_text("ZeroDivisionError: division by zero")
    expect(page.locator(".cm-run-error-explanation")).to_contain_text("Line 2 of helpers.py: your program divides by zero")
    expect(page.locator(".cm-activeLine.cm-run-error-line")).to_have_count(1)  # the cursor is on it
    shot(page, "25-run-error-line-opened")
    # Editing the line takes its mark away; the next run starts clean.
    page.keyboard.press("End")
    page.keyboard.type(" if people else 0")
    expect(page.locator(".cm-run-error-line")).to_have_count(0)
    assert page.errors == []


def test_a_typo_gets_pythons_hint_and_a_plain_sentence_and_nothing_is_cut_mid_word(ide):
    page, _ = ide
    words = "every word of this long message must stay whole in the narrow console"
    write_program(page, "typo.py", f'if len("{words}") > 1:\n    prnt("hi")\n')
    page.get_by_role("button", name="Run").click()
    text = re.sub(r"\s+", " ", wait_terminal(page, "──"))
    assert "NameError: name 'prnt' is not defined. Did you mean: 'print'?" in text, text
    assert "Python does not know the name prnt. Did you mean print?" in text, text
    # Inline under the line, whole: the error and the sentence.
    expect(page.locator(".cm-run-error-message")).to_contain_text("Did you mean: 'print'?")
    expect(page.locator(".cm-run-error-explanation")).to_contain_text("Line 2 of typo.py")
    shot(page, "26-run-error-explained")
    # The traceback's lines are broken between words: each word is whole on a row of its own.
    page.get_by_role("button", name="Run").click()
    write_program(page, "long.py", f'raise ValueError("{words}")\n')
    page.get_by_role("button", name="Run").click()
    text = wait_terminal(page, "ValueError")
    wait_terminal(page, "──")
    rows = terminal_text(page).split("\n")
    for word in words.split():
        assert any(re.search(rf"\b{word}\b", row) for row in rows), (word, rows)
    assert page.errors == []


def test_console_copies_with_ctrl_c_and_shows_a_wait_for_input(ide):
    page, _ = ide
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    write_program(page, "ask.py", 'print("Hello from the program")\nname = input("Your name? ")\n'
                                  'print("Hi", name)\nimport time\ntime.sleep(60)\n')
    page.get_by_role("button", name="Run").click()
    wait_terminal(page, "Your name\\? ")
    state = page.locator("#run-state")
    expect(state).to_have_attribute("data-state", "input")
    expect(state).to_contain_text("Waiting for your input")
    assert active_in(page, "#terminal")  # the cursor is in the console
    shot(page, "26-console-waiting-for-input")
    page.keyboard.type("Ada")
    page.keyboard.press("Enter")
    wait_terminal(page, "Hi Ada")
    expect(state).to_have_attribute("data-state", "running")

    # Select the program's first line with the mouse; Ctrl+C copies it and interrupts nothing.
    row = page.locator("#terminal .xterm-rows > div", has_text="Hello from the program")
    box = row.bounding_box()
    page.mouse.dblclick(box["x"] + 5, box["y"] + box["height"] / 2)  # selects the word "Hello"
    page.keyboard.press("Control+c")
    assert page.evaluate("() => navigator.clipboard.readText()") == "Hello"
    page.wait_for_timeout(500)
    expect(state).to_have_attribute("data-state", "running")
    # Without a selection, Ctrl+C interrupts the program, as in a terminal.
    page.mouse.click(box["x"] + 5, box["y"] + box["height"] * 3)
    page.keyboard.press("Control+c")
    wait_terminal(page, "KeyboardInterrupt")
    wait_terminal(page, "──")
    page.wait_for_function("() => !!document.activeElement?.closest('#editor')")
    assert page.errors == []


def test_panes_resize_the_tree_hides_lines_wrap_and_figures_fit(ide):
    page, _ = ide
    width = lambda sel: page.locator(sel).bounding_box()["width"]  # noqa: E731
    write_program(page, "wide.py", "# " + "a long comment that goes on " * 8 + "\n"
                  "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9, 16])\nplt.title('Squares')\nplt.show()\n")
    before = width("#editor")
    assert before >= 680, before  # at 1366 px, half the width is the code's (it was 600 px)
    shot(page, "27-layout-default")

    splitter = page.locator("#split-console").bounding_box()
    page.mouse.move(splitter["x"] + 2, splitter["y"] + 200)
    page.mouse.down()
    page.mouse.move(splitter["x"] - 150, splitter["y"] + 200, steps=5)
    page.mouse.up()
    console_after = width("#console")
    assert width("#editor") < before - 100 and console_after > 500
    page.locator("#files-toggle").click()
    expect(page.locator("#sidebar")).to_be_hidden()
    expect(page.locator("#files-toggle")).to_have_attribute("aria-expanded", "false")
    assert width("#editor") > before - 100 + 150
    page.keyboard.press("Control+b")
    expect(page.locator("#sidebar")).to_be_visible()

    # Wrapping long lines is a setting.
    assert page.locator("#editor .cm-lineWrapping").count() == 0
    page.get_by_role("button", name="Settings").click()
    page.get_by_label("Wrap long lines in the editor").check()
    page.get_by_role("button", name="Done").click()
    expect(page.locator("#editor .cm-lineWrapping")).to_have_count(1)

    # All of it is remembered.
    page.reload()
    wait_ready(page)
    open_file(page, "wide.py")
    assert abs(width("#console") - console_after) <= 2
    expect(page.locator("#editor .cm-lineWrapping")).to_have_count(1)

    # A figure fits the console with its caption and download link in sight.
    page.get_by_role("button", name="Run").click()
    wait_terminal(page, "Finished", timeout=60)
    caption = page.locator("#plots figcaption")
    expect(page.get_by_role("link", name="Download")).to_be_visible()
    box, plots = caption.bounding_box(), page.locator("#plots").bounding_box()
    assert box["y"] + box["height"] <= min(plots["y"] + plots["height"], 768), (box, plots)
    assert box["x"] >= plots["x"] and box["x"] + box["width"] <= plots["x"] + plots["width"]
    shot(page, "28-layout-resized-with-figure")
    assert page.errors == []


def test_the_small_things(ide_server, new_page):
    user, password = student(ide_server, "s" + uuid.uuid4().hex[:10])
    page = new_page(ide_server)
    asked, failed, refused = [], [], []
    page.on("request", lambda r: asked.append(r.url))
    page.on("response", lambda r: refused.append(r.url) if r.status == 401 else None)
    page.on("console", lambda m: failed.append(m.text) if m.type == "error" else None)
    page.goto("/")
    page.wait_for_load_state("networkidle")
    assert not [u for u in asked if "/api/me" in u] and failed == [], (asked, failed)
    icon = page.request.get("/favicon.ico")
    assert icon.status == 200 and icon.headers["content-type"] == "image/svg+xml"
    assert page.locator('link[rel="icon"]').count() == 1

    login(page, user, password, lands_on="/ide")
    assert refused == []  # signing in needed no 401 either
    assert "F5" not in page.get_by_role("button", name="Run").get_attribute("title")
    assert "Ctrl+Enter" in editor(page).inner_text()  # the welcome file says how to run
    page.keyboard.press("F1")
    first = page.locator(".shortcuts tbody tr").first
    expect(first).to_contain_text("Ctrl")
    page.keyboard.press("Escape")

    # A refused run says why in whole words, and the editor has the cursor again.
    write_program(page, "full.py", 'print("hi")\n')
    full = {"error": "quota_exceeded", "message": "Your files use 200.0 MB of 200.0 MB: delete at least 1.0 MB "
                                                  "of them before saving again."}
    page.route(re.compile(r".*/api/files/home/full\.py$"), lambda route: route.fulfill(
        status=507, content_type="application/json", body=json.dumps(full)) if route.request.method == "PUT"
        else route.continue_())
    page.locator("#split-console").focus()
    for _ in range(12):
        page.keyboard.press("ArrowRight")  # a narrow console: long lines must break
    editor(page).click()
    page.keyboard.type("# more\n")
    page.keyboard.press("Control+Enter")
    wait_terminal(page, "Not run")
    rows = [r.rstrip() for r in page.locator("#terminal .xterm-rows > div").all_inner_texts() if r.strip()]
    note = " ".join(rows)
    assert note.endswith("saving again)."), rows
    words = set(("Not run: the file could not be saved (" + full["message"][:-1] + ").").split())
    assert words <= set(note.split()), (words - set(note.split()), rows)
    assert len(rows) > 1  # it did need more than one line
    page.wait_for_function("() => !!document.activeElement?.closest('#editor')")
    shot(page, "29-not-run-whole-words")
    assert page.errors == []
