"""The debugger in a real browser against the real server: Debug, step
over a loop and watch `i` change, a breakpoint set in the gutter, into a
function of another file and out, input() while debugging, Stop while
paused; what the program's variables say shows as text."""
import re

import pytest

from tests.browser import (LIMITS, editor, expect, login, open_file, shot, student, student_ide, terminal_text,
                           wait_terminal, write_program)
from tests.helpers import create_user
from tests.live_support import a_class

pytestmark = pytest.mark.timeout(300)

PROGRAM = ('s = "<img src=x onerror=window.hacked=1>"\ntotal = 0\nfor i in range(3):\n    total += i\n'
           'print("total", total)\n')


def paused_at(page, line, text):
    expect(page.locator("#debug-note")).to_contain_text(f"Paused at line {line} of")
    expect(page.locator("#editor .cm-paused-line")).to_have_text(text)


def value_of(page, name):
    return page.locator(f'#debug-vars .var[data-name="{name}"] .var-value').first


def click_gutter(page, line):
    """Click the breakpoint gutter beside `line` (from 1)."""
    row = page.locator("#editor .cm-line").nth(line - 1).bounding_box()
    gutter = page.locator("#editor .cm-breakpoint-gutter").bounding_box()
    page.mouse.click(gutter["x"] + gutter["width"] / 2, row["y"] + row["height"] / 2)


def test_step_over_a_loop_and_stop_at_a_breakpoint(start_server, new_page):
    page, _, _ = student_ide(new_page, start_server(processes=1, **LIMITS))
    write_program(page, "loop.py", PROGRAM)

    page.get_by_role("button", name="Debug").click()
    paused_at(page, 1, PROGRAM.splitlines()[0])
    step = page.get_by_role("button", name="Step over")
    for _ in range(3):
        step.click()
    paused_at(page, 4, "    total += i")
    expect(value_of(page, "i")).to_have_text("0")
    expect(page.locator('#debug-vars .var[data-name="i"]')).to_have_class("var changed")
    expect(value_of(page, "s")).to_have_text("'<img src=x onerror=window.hacked=1>'")  # text, never HTML
    page.get_by_label("Watch an expression").fill("s + str(total * 10) + '<b>x</b>'")
    page.keyboard.press("Enter")
    expect(page.locator("#debug-watches .var-value")).to_have_text(
        "'<img src=x onerror=window.hacked=1>0<b>x</b>'")
    paused_at(page, 4, "    total += i")
    step.click()
    paused_at(page, 3, "for i in range(3):")
    expect(page.locator('#debug-vars .var[data-name="i"]')).to_have_class("var")  # the for line changed nothing yet
    step.click()
    paused_at(page, 4, "    total += i")
    expect(value_of(page, "i")).to_have_text("1")
    shot(page, "debugger-paused")
    # On a 1366x768 laptop the bar keeps all of it on screen while debugging, on one line.
    bar = page.locator("header.topbar")
    assert bar.evaluate("(bar) => bar.scrollWidth <= bar.clientWidth")
    for name in ("#step-out", "#continue", "#history-btn", "#settings-btn", "#help-btn", "#user-btn"):
        box = page.locator(name).bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 1366 and box["y"] + box["height"] <= 60, (name, box)
    expect(page.get_by_role("button", name="Ask for help")).to_be_visible()

    click_gutter(page, 4)  # a breakpoint in the loop, while paused: taken with the next command
    expect(page.locator("#editor .cm-breakpoint")).to_have_count(1)
    page.get_by_role("button", name="Continue").click()
    paused_at(page, 4, "    total += i")
    expect(value_of(page, "i")).to_have_text("2")
    expect(page.locator("#debug-watches .var-value")).to_have_text("'<img src=x onerror=window.hacked=1>10<b>x</b>'")
    page.get_by_role("button", name="Continue").click()
    wait_terminal(page, "total 3")
    expect(page.locator("#debug-note")).to_contain_text("The program has ended")
    expect(page.locator("#editor .cm-paused-line")).to_have_count(0)

    # The breakpoint is kept for this file: the next Debug stops at it on Continue.
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    expect(page.locator("#editor .cm-breakpoint")).to_have_count(1)
    page.get_by_role("button", name="Debug").click()
    paused_at(page, 1, PROGRAM.splitlines()[0])
    page.get_by_role("button", name="Continue").click()
    paused_at(page, 4, "    total += i")
    expect(value_of(page, "i")).to_have_text("0")
    assert page.evaluate("() => window.hacked") is None
    assert page.errors == []


def test_into_another_file_input_and_stop_while_paused(start_server, new_page):
    page, _, _ = student_ide(new_page, start_server(processes=1, **LIMITS))
    write_program(page, "helper.py", "def double(x):\n    y = x * 2\n    return y\n")
    write_program(page, "main.py", 'from helper import double\nname = input("Name? ")\nn = double(21)\n'
                                   'print("Hello", name, n)\nprint("bye")\n')

    page.get_by_role("button", name="Debug").click()
    paused_at(page, 1, "from helper import double")
    page.get_by_role("button", name="Step over").click()
    paused_at(page, 2, 'name = input("Name? ")')
    page.get_by_role("button", name="Step over").click()
    wait_terminal(page, "Name\\? ")
    expect(page.locator("#run-state")).to_have_attribute("data-state", "input")
    page.locator("#terminal").click()
    page.keyboard.type("Ada")
    page.keyboard.press("Enter")
    paused_at(page, 3, "n = double(21)")
    expect(value_of(page, "name")).to_have_text("'Ada'")

    page.get_by_role("button", name="Step into").click()  # opens helper.py at the function's first line
    expect(page.locator(".tab.selected")).to_contain_text("helper.py")
    paused_at(page, 2, "    y = x * 2")
    expect(page.locator("#debug-stack .frame")).to_have_count(2)
    expect(value_of(page, "x")).to_have_text("21")
    page.locator("#debug-stack .frame").nth(1).click()  # the caller: the main program's variables
    expect(value_of(page, "name")).to_have_text("'Ada'")
    expect(page.locator(".tab.selected")).to_contain_text("main.py")
    page.get_by_role("button", name="Step out").click()
    paused_at(page, 4, 'print("Hello", name, n)')
    expect(value_of(page, "n")).to_have_text("42")

    page.get_by_role("button", name="Stop").click()
    expect(page.locator("#run-state")).to_have_attribute("data-state", "stopped")
    expect(page.locator("#debug-bar")).to_be_hidden()
    expect(page.get_by_role("button", name="Debug")).to_be_enabled()
    assert page.errors == []


KEYS_PROGRAM = ("def double(x):\n    y = x * 2\n    return y\n\n\ntotal = 0\nfor i in range(2):\n"
                "    total += double(i)\nprint('total', total)\n")


def prevented(page, key):
    """Press `key`: whether the page took it (its default, the browser's use of it, prevented)."""
    page.evaluate("""() => { window.lastKey = null;
        window.addEventListener('keydown', (e) => { window.lastKey = e.defaultPrevented; }, { once: true }); }""")
    page.keyboard.press(key)
    return page.evaluate("() => window.lastKey")


def test_the_debugger_keys(start_server, new_page):
    page, _, _ = student_ide(new_page, start_server(processes=1, **LIMITS))
    write_program(page, "keys.py", KEYS_PROGRAM)

    # The help lists the keys; the buttons' titles say them.
    page.keyboard.press("F1")
    help_ = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(help_.locator("tr", has_text="Debug the current file")).to_contain_text("Ctrl+F5")
    expect(help_.locator("tr", has_text="step over")).to_contain_text("F10")
    expect(help_.locator("tr", has_text="step into")).to_contain_text("F11")
    expect(help_.locator("tr", has_text="step out")).to_contain_text("Shift+F11")
    expect(help_.locator("tr", has_text="continue")).to_contain_text("F5")
    expect(help_.locator("tr", has_text="Stop the program")).to_contain_text("Shift+F5")
    page.keyboard.press("Escape")
    for button, key in (("#debug", "Ctrl+F5"), ("#step-over", "F10"), ("#step-into", "F11"), ("#step-out", "Shift+F11"),
                        ("#continue", "F5"), ("#stop", "Shift+F5")):  # (the debugger's show once it runs)
        expect(page.locator(button)).to_have_attribute("title", re.compile(rf"[( ]{re.escape(key)}\b"))
    # Nothing is debugged: the step keys are the browser's (F11: full screen), not the page's.
    editor(page).click()
    assert prevented(page, "F10") is False and prevented(page, "F11") is False

    page.keyboard.press("Control+F5")
    paused_at(page, 1, "def double(x):")
    page.keyboard.press("F10")
    paused_at(page, 6, "total = 0")
    page.keyboard.press("F10")
    paused_at(page, 7, "for i in range(2):")
    page.keyboard.press("F10")
    paused_at(page, 8, "    total += double(i)")
    expect(value_of(page, "i")).to_have_text("0")
    page.keyboard.press("F11")  # into double()
    paused_at(page, 2, "    y = x * 2")
    expect(page.locator("#debug-stack .frame")).to_have_count(2)
    expect(value_of(page, "x")).to_have_text("0")
    page.keyboard.press("Shift+F11")  # out: the rest of line 8 runs, then the loop's next turn
    paused_at(page, 7, "for i in range(2):")
    expect(page.locator("#debug-stack .frame")).to_have_count(1)
    page.locator("#terminal").click()  # the keys work from the console too
    page.keyboard.press("F10")
    paused_at(page, 8, "    total += double(i)")
    expect(value_of(page, "i")).to_have_text("1")
    expect(page.locator('#debug-vars .var[data-name="i"]')).to_have_class("var changed")
    # A Chromebook has no F10 or F11: Chrome DevTools' keys do the same.
    page.keyboard.press("Control+;")
    paused_at(page, 2, "    y = x * 2")
    expect(value_of(page, "x")).to_have_text("1")
    page.keyboard.press("Control+Shift+;")
    paused_at(page, 7, "for i in range(2):")
    page.keyboard.press("Control+'")
    paused_at(page, 9, "print('total', total)")
    expect(value_of(page, "total")).to_have_text("2")
    page.keyboard.press("F5")  # continue: no breakpoint, to the end
    wait_terminal(page, "total 2")
    expect(page.locator("#debug-note")).to_contain_text("The program has ended")
    expect(page.locator("#debug-bar")).to_be_hidden()

    # Shift+F5 stops a debugged program.
    page.keyboard.press("Control+F5")
    paused_at(page, 1, "def double(x):")
    page.keyboard.press("Shift+F5")
    expect(page.locator("#run-state")).to_have_attribute("data-state", "stopped")
    expect(page.locator("#debug-bar")).to_be_hidden()
    # Nothing debugged any more: F5 runs the file, as it always did.
    page.keyboard.press("F5")
    wait_terminal(page, "total 2(.|\\n)*Finished")
    expect(page.locator("#editor .cm-paused-line")).to_have_count(0)
    assert page.errors == []


def test_a_plot_and_ctrl_c_while_debugging(start_server, new_page):
    page, _, _ = student_ide(new_page, start_server(processes=1, **LIMITS))
    write_program(page, "plot.py", "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9, 16])\nplt.show()\n"
                                   "import time\nn = 0\nwhile True:\n    n += 1\n    print('tick', n)\n"
                                   "    time.sleep(0.05)\n")
    page.get_by_role("button", name="Debug").click()
    paused_at(page, 1, "import matplotlib.pyplot as plt")
    step = page.get_by_role("button", name="Step over")
    step.click()
    expect(page.locator("#debug-note")).to_contain_text("Paused at line 2 of", timeout=60_000)  # matplotlib loads
    step.click()
    paused_at(page, 3, "plt.show()")
    expect(page.locator("#plots img")).to_have_count(0)
    step.click()
    paused_at(page, 4, "import time")
    figure = page.locator("#plots img")  # shown while the program waits at the next line
    expect(figure).to_have_count(1)
    page.wait_for_function("() => document.querySelector('#plots img').naturalWidth > 100")

    # Continue into an endless loop (not paused): Ctrl+C in the console interrupts it, as in a run.
    page.get_by_role("button", name="Continue").click()
    wait_terminal(page, "tick 5")
    expect(page.locator("#run-state")).to_have_attribute("data-state", "running")
    page.locator("#terminal").click()
    page.keyboard.press("Control+c")
    wait_terminal(page, "KeyboardInterrupt")
    expect(page.locator("#run-state")).to_have_attribute("data-state", "stopped")
    expect(page.locator("#debug-note")).to_contain_text("The program has ended")
    expect(page.locator("#debug-bar")).to_be_hidden()
    expect(figure).to_have_count(1)
    assert page.errors == []


def test_a_course_file_is_debugged_as_a_read_only_copy(start_server, new_page):
    server = start_server(**LIMITS)
    create_user(server.env["DATABASE_URL"], "grace", "grace-password", role="teacher", display_name="Grace Hopper")
    user, password = student(server, "ann")
    number = a_class(server, "grace", user, name="9C")
    area = f"class/{number}"
    grace = server.client()
    grace.login_ok("grace", "grace-password")
    for path, text in (("week1/helper.py", "def greet(who):\n    text = 'Hello, ' + who\n    return text\n"),
                       ("week1/starter.py", 'import helper\nname = "<img src=x onerror=window.hacked=1>"\n'
                                            'greeting = helper.greet(name)\nprint(greeting)\n'),
                       ("helper.py", "def greet(who):\n    return 'not this one'\n")):  # not beside the starter
        r = grace.request("PUT", f"/api/files/{area}/{path}", data=text.encode(), headers={"If-Match": "*"})
        assert r.status_code == 200, r.text

    for name, lands_on in (("grace", "/teacher"), (user, "/ide")):
        page = new_page(server)
        login(page, name, f"{name}-password", lands_on=lands_on)
        if name == "grace":
            page.get_by_role("tab", name="Files").click()
        page.locator(f'.tree-section[data-area="{area}"] .tree-row[data-path="week1"]').click()
        # A breakpoint in the module beside the starter (read-only for the student: breakpoints still go in).
        open_file(page, "week1/helper.py", area=area)
        click_gutter(page, 2)
        expect(page.locator("#editor .cm-breakpoint")).to_have_count(1)
        open_file(page, "week1/starter.py", area=area)
        debug = page.get_by_role("button", name="Debug")
        expect(debug).to_be_enabled()
        expect(debug).to_have_attribute("title", re.compile("read-only copy"))
        debug.click()
        paused_at(page, 1, "import helper")
        assert "Debugging a read-only copy of week1/starter.py" in " ".join(terminal_text(page).split())
        page.get_by_role("button", name="Continue").click()
        # At the breakpoint, in the course's helper.py (its tab shown, the line marked).
        paused_at(page, 2, "    text = 'Hello, ' + who")
        expect(page.locator(".tab.selected")).to_contain_text("helper.py")
        expect(page.locator("#debug-stack .frame")).to_have_count(2)
        expect(value_of(page, "who")).to_have_text("'<img src=x onerror=window.hacked=1>'")
        page.get_by_role("button", name="Step over").click()
        paused_at(page, 3, "    return text")
        expect(value_of(page, "text")).to_have_text("'Hello, <img src=x onerror=window.hacked=1>'")
        page.get_by_role("button", name="Step out").click()
        paused_at(page, 4, "print(greeting)")
        expect(page.locator(".tab.selected")).to_contain_text("starter.py")
        page.get_by_role("button", name="Continue").click()
        wait_terminal(page, "Hello, <img src=x onerror=window.hacked=1>")
        expect(page.locator("#debug-note")).to_contain_text("The program has ended")
        shot(page, f"debugger-course-file-{name}")
        assert page.evaluate("() => window.hacked") is None
        assert page.errors == []


STUCK = ("import time\ndef stuck():\n    while True:\n        try:\n            time.sleep(60)\n"
         "        except BaseException:\n            pass\nx = 1\nprint('end')\n")


def test_a_watch_that_never_finishes_is_told(start_server, new_page):
    """While a watch is worked out the panel says so (the step buttons are
    off), and when it never finishes the run ends saying which watch."""
    page, _, _ = student_ide(new_page, start_server(processes=1, **LIMITS))
    write_program(page, "stuck.py", STUCK)
    page.get_by_role("button", name="Debug").click()
    paused_at(page, 1, "import time")
    step = page.get_by_role("button", name="Step over")
    step.click()
    paused_at(page, 2, "def stuck():")
    step.click()
    paused_at(page, 8, "x = 1")
    page.get_by_label("Watch an expression").fill("stuck()")
    page.keyboard.press("Enter")
    note = page.locator("#debug-note")
    expect(note).to_contain_text("Still working out your watches")
    expect(step).to_be_disabled()
    expect(note).to_contain_text("could not finish working out your watch 'stuck()'", timeout=30_000)
    expect(note).to_contain_text("The program has ended")
    assert page.errors == []
