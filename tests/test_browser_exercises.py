"""Exercises in Chromium (issue 23): a teacher writes an exercise with the
browser's form and it appears for the class's student, who opens it (the
instructions rendered safely), starts it and checks it; the teacher's
gradebook shows the student's row and grades.csv downloads."""
import csv
import io
import re
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

from tests.browser import LIMITS, editor, expect, expect_saved, login, replace_text, shot, student
from tests.helpers import create_user
from tests.live_support import a_class, user_of
from tests.test_exercises import grader

WAIT = 15_000  # ms: only catches a hang
# What the hidden check holds (a right program passes it): none of it may reach the student's browser.
SECRETS = ("1234567", "7654321", "4444444", "SECRET-HINT-42", "secret-case", "SECRET-MESSAGE-13")
INSTRUCTIONS = """# Average

Read numbers until an empty line, then print `Average: ` and their average.

<script>window.pwned = 1</script>
<img src=x onerror="window.pwned = 2">
[a trap](javascript:window.pwned=3) and [the Python docs](https://docs.python.org/3/)
"""
STARTER = 'numbers = []\nwhile (line := input()):\n    numbers.append(float(line))\nprint("Average: 0")\n'
SOLUTION = 'numbers = []\nwhile (line := input()):\n    numbers.append(float(line))\n' \
           'print("Average:", sum(numbers) / len(numbers) if numbers else "none")\n'


def people(server):
    """A teacher and a student of one class: the class's number."""
    student(server, "ada")
    create_user(server.env["DATABASE_URL"], "grace", "grace-password", role="teacher", display_name="Grace Hopper")
    return a_class(server, "grace", "ada", name="8A Python")


def teacher_page(new_page, server):
    page = new_page(server)
    login(page, "grace", "grace-password", lands_on="/teacher")
    return page


def write_exercise(teacher):
    """The teacher writes the Average exercise with the form: a visible
    output check, a hidden one, a code check and a starter file."""
    panel = teacher.locator("#class-panel")
    panel.get_by_role("button", name="New exercise").click()
    form = teacher.get_by_role("dialog", name="New exercise")
    form.get_by_label("Folder name").fill("average")
    form.get_by_label("Title", exact=True).fill("Average")
    form.get_by_label("The student's file").fill("average.py")
    form.get_by_label("Instructions (Markdown)").fill(INSTRUCTIONS)
    checks = [("two-numbers", "4\n6\n\n", "Average: 5.0\n", "visible", "Print 'Average: ' and the average."),
              ("secret-case", "1234567\n7654321\n\n", "Average: 4444444.0\n", "hidden", "SECRET-HINT-42")]
    for n, (check_id, given, expected, visibility, hint) in enumerate(checks):
        form.get_by_role("button", name="Add a check").click()
        check = form.locator(".check-form").nth(n)
        check.get_by_label("Id", exact=True).fill(check_id)
        check.get_by_label("Input (what is typed)").fill(given)
        check.get_by_label("Expected output").fill(expected)
        check.get_by_label("Compare", exact=True).select_option("normalized")
        check.get_by_label("Points", exact=True).fill("2")
        check.get_by_label("Visibility", exact=True).select_option(visibility)
        check.get_by_label("Hint (shown when the check fails)").fill(hint)
    form.get_by_role("button", name="Add a check").click()
    loop = form.locator(".check-form").nth(2)
    loop.get_by_label("Id", exact=True).fill("loop")
    loop.get_by_label("Kind", exact=True).select_option("code")
    loop.get_by_label("Rule", exact=True).fill("uses_loop")
    form.get_by_role("button", name="Add a starter file").click()
    form.get_by_label("File name").fill("average.py")
    form.locator(".starter-form textarea").fill(STARTER)
    shot(teacher, "60-teacher-exercise-form")
    form.get_by_role("button", name="Save").click()
    expect(form).to_have_count(0)
    expect(panel.locator('.ex-row[data-slug="average"]')).to_contain_text("3 checks, 5 points")


def open_exercise(page):
    page.get_by_role("tab", name="Exercises").click()
    page.locator("#exercises-panel .ex-item", has_text="Average").click()
    view = page.locator("#exercises-panel .ex-view")
    expect(view.locator(".ex-title-big")).to_have_text("Average")
    return view


def test_a_teacher_writes_an_exercise_and_the_student_starts_it(start_server, new_page, tmp_path):
    server = start_server(**LIMITS)
    number = people(server)
    teacher = teacher_page(new_page, server)

    # A mistake comes back as a sentence, and nothing is saved.
    teacher.locator("#class-panel").get_by_role("button", name="New exercise").click()
    form = teacher.get_by_role("dialog", name="New exercise")
    form.get_by_label("Folder name").fill("broken")
    form.get_by_label("Title", exact=True).fill("Broken")
    form.get_by_role("button", name="Save").click()
    expect(form.locator(".form-problems")).to_contain_text("'file' is missing")
    form.get_by_role("button", name="Cancel").click()
    expect(teacher.locator("#class-panel .ex-list-note")).to_contain_text("No exercises yet")

    write_exercise(teacher)
    # The exercise is files in the class's checks area, in the teacher's tree too.
    teacher.get_by_role("tab", name="Files").click()
    checks_tree = teacher.locator(f'.tree-section[data-area="checks/{number}"]')
    expect(checks_tree.locator('.tree-row[data-path="average"]')).to_be_visible()

    page = new_page(server)
    login(page, "ada", "ada-password", lands_on="/ide")
    page.get_by_role("tab", name="Exercises").click()
    item = page.locator("#exercises-panel .ex-item", has_text="Average")
    expect(item).to_contain_text("5 points · not checked yet")
    expect(item).to_contain_text("No due date")
    view = open_exercise(page)

    # The instructions are Markdown, shown safely: no script, no handler, no javascript: link.
    instructions = view.locator(".ex-instructions")
    expect(instructions.locator("h1")).to_have_text("Average")
    expect(instructions.locator("code")).to_have_text("Average: ")
    expect(instructions).to_contain_text("<script>window.pwned = 1</script>")
    expect(instructions).to_contain_text('<img src=x onerror="window.pwned = 2">')
    assert instructions.locator("script, img, [onerror]").count() == 0
    assert instructions.locator('a[href^="javascript"]').count() == 0
    docs = instructions.get_by_role("link", name="the Python docs")
    expect(docs).to_have_attribute("target", "_blank")
    expect(docs).to_have_attribute("rel", re.compile("noopener"))
    assert page.evaluate("window.pwned") is None

    # The checks as she may see them: the hidden one only by its number and points.
    items = view.locator(".check-item")
    expect(items).to_have_count(3)
    expect(items.nth(0)).to_contain_text("Output: two-numbers")
    expect(items.nth(1)).to_contain_text("Hidden check 1")
    expect(items.nth(1)).to_contain_text("2 points")
    expect(items.nth(2)).to_contain_text("Uses a loop")
    items.nth(0).get_by_text("What this check does").click()
    expect(items.nth(0)).to_contain_text("ignoring spaces and capitals")
    expect(items.nth(0)).to_contain_text("Print 'Average: ' and the average.")
    for secret in SECRETS:
        assert secret not in page.content()

    # Start: the starter file, in her files, open in the editor; then Check.
    expect(view.get_by_role("button", name="Check")).to_be_hidden()
    view.get_by_role("button", name="Start").click()
    expect(page.locator(".tab.selected")).to_contain_text("average.py")
    expect(editor(page)).to_contain_text('print("Average: 0")')
    expect(view.get_by_role("button", name="Check")).to_be_visible()
    expect(view.get_by_role("button", name="Start")).to_be_hidden()
    expect(page.locator('.tree-section[data-area="home"] .tree-row[data-path="average"]')).to_have_count(1)
    view.get_by_role("button", name="Open my file").focus()
    box = page.locator("#sidebar").bounding_box()
    assert box["width"] >= 330, box  # room for the instructions at 1366x768
    shot(page, "61-student-exercise")

    # The teacher's gradebook has her row (not started), and grades.csv downloads.
    teacher.get_by_role("tab", name="Class").click()
    teacher.locator("#class-panel").get_by_role("button", name="Gradebook").click()
    book = teacher.get_by_role("dialog", name="Gradebook: 8A Python")
    row = book.locator('tr[data-username="ada"]')
    expect(row).to_contain_text("Ada Student")
    expect(row.locator('td[data-slug="average"]')).to_have_text("not started")
    with teacher.expect_download() as download:
        book.get_by_role("link", name="Download grades (CSV)").click()
    path = tmp_path / "grades.csv"
    download.value.save_as(path)
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8-sig"))))
    assert rows == [["username", "name", "Average (5)"], ["ada", "Ada Student", ""]]
    shot(teacher, "62-teacher-gradebook")

    # Changed in the form (a new title, a due date in three days): the student sees it in words.
    book.get_by_role("button", name="Close").first.click()
    teacher.locator('#class-panel .ex-row[data-slug="average"] .ex-item').click()
    form = teacher.get_by_role("dialog", name="Exercise: Average")
    expect(form.get_by_label("Instructions (Markdown)")).to_have_value(INSTRUCTIONS)
    expect(form.locator(".check-form")).to_have_count(3)
    form.get_by_label("Title", exact=True).fill("Average of numbers")
    soon = datetime.now() + timedelta(days=3)  # the browser's clock and time zone are this machine's
    form.get_by_label("Due (optional)").fill(f"{soon:%Y-%m-%d}T16:00")
    form.get_by_role("button", name="Save").click()
    expect(teacher.locator('#class-panel .ex-row[data-slug="average"]')).to_contain_text("Average of numbers")
    view.get_by_role("button", name="← All exercises").click()
    expect(page.locator("#exercises-panel .ex-item")).to_contain_text("Average of numbers")
    expect(page.locator("#exercises-panel .ex-item")).to_contain_text(f"due {soon:%A} 16:00")
    # Past its due date, checks no longer count, and the student is told so.
    teacher.locator('#class-panel .ex-row[data-slug="average"] .ex-item').click()
    form = teacher.get_by_role("dialog", name="Exercise: Average of numbers")
    form.get_by_label("Due (optional)").fill("2020-01-31T16:00")
    form.get_by_role("button", name="Save").click()
    expect(form).to_have_count(0)
    page.get_by_role("button", name="Refresh").click()
    # (in the browser's own way of writing dates: en-US here)
    expect(page.locator("#exercises-panel .ex-item")).to_contain_text("was due Jan 31, 2020, 16:00")
    page.locator("#exercises-panel .ex-item").click()
    expect(view.locator(".ex-due")).to_have_text("The due date has passed: checks no longer count.")
    view.get_by_role("button", name="← All exercises").click()

    # An exercise written as files with a mistake: the teacher reads what to fix; students do not see it.
    files = server.client()
    files.login_ok("grace", "grace-password")
    r = files.request("PUT", f"/api/files/checks/{number}/broken/exercise.toml", data=b'title = "Broken"\n')
    assert r.status_code == 200, r.text
    teacher.reload()
    expect(teacher.locator('#class-panel .ex-row[data-slug="broken"]')).to_contain_text(
        "Not shown to students until this is fixed:exercise.toml: 'file' is missing")
    page.get_by_role("button", name="Refresh").click()
    expect(page.locator("#exercises-panel .ex-item")).to_have_count(1)
    teacher.get_by_role("button", name="Delete Average of numbers").click()
    teacher.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(teacher.locator("#class-panel .ex-row")).to_have_count(1)
    assert teacher.errors == [] and page.errors == []


def test_an_attempt_shows_in_the_gradebook_and_to_the_student_without_the_hidden_check(start_server, new_page):
    """An attempt recorded by the exercises service (as the grader records
    one): the teacher's grid cell opens it with everything the grader saw;
    the student sees her results, the hidden check only as passed or not."""
    server = start_server(**LIMITS)
    number = people(server)
    teacher = teacher_page(new_page, server)
    write_exercise(teacher)
    results = [
        {"id": "two-numbers", "passed": False, "message": "The output is not what was expected.",
         "details": {"input": "4\n6\n\n", "expected": "Average: 5.0\n", "actual": "Average: 0\n",
                     "diff": "-Average: 5.0\n+Average: 0"}},
        {"id": "secret-case", "passed": True, "message": "SECRET-MESSAGE-13", "details": {"input": "1234567\n7654321\n\n"}},
        {"id": "loop", "passed": True, "message": ""}]
    teacher.locator("#class-panel").get_by_role("button", name="Gradebook").click()
    book = teacher.get_by_role("dialog", name="Gradebook: 8A Python")
    cell = book.locator('tr[data-username="ada"] td[data-slug="average"]')
    expect(cell).to_have_text("not started")
    ada = user_of(server, "ada")

    def record(exercises):
        return exercises.record_attempt(ada, number, "average", datetime.now(timezone.utc), results)
    with ThreadPoolExecutor(1) as thread:  # asyncio.run, beside Playwright's own event loop
        thread.submit(grader, server, record).result()
    # The open gradebook follows: the live class says she checked.
    expect(cell).to_contain_text("best 3/5", timeout=WAIT)

    page = new_page(server)
    seen = recording(page)
    login(page, "ada", "ada-password", lands_on="/ide")
    page.get_by_role("tab", name="Exercises").click()
    expect(page.locator("#exercises-panel .ex-item")).to_contain_text("3/5 points · 1 attempt")
    view = open_exercise(page)
    expect(view.locator(".ex-progress")).to_have_text("Best 3/5 · latest 3/5 · 1 attempt")
    failed = view.locator('.check-item[data-check="two-numbers"]')
    expect(failed).to_have_attribute("data-state", "failed")
    expect(failed).to_contain_text("The output is not what was expected.")
    expect(failed).to_contain_text("Hint: Print 'Average: ' and the average.")
    expect(view.locator('.check-item[data-check="hidden-1"]')).to_contain_text("Passed.")
    expect(view.locator('.check-item[data-check="hidden-1"] .check-points')).to_have_text("2/2")
    expect(view.locator('.check-item[data-check="loop"]')).to_have_attribute("data-state", "passed")
    assert not [s for s in SECRETS for body in seen if s in body]

    expect(teacher.locator('#class-panel .student[data-username="ada"]')).to_contain_text("checked average: 3/5")
    # One line a student; the button's name says the rest.
    expect(cell).to_contain_text("best 3/5 · 1× · stuck")
    expect(cell.get_by_role("button")).to_have_attribute("aria-label", re.compile(
        r"latest 3/5, 1 attempt, last checked .*, stuck on two-numbers\. Open the latest attempt\."))
    cell.get_by_role("button").click()
    attempt = teacher.get_by_role("dialog", name="Ada Student: Average")
    expect(attempt.locator(".attempt > .check-list > .check-item")).to_have_count(3)
    expect(attempt.locator('.check-item[data-check="two-numbers"] .diff .del')).to_have_text("-Average: 5.0")
    expect(attempt.locator('.check-item[data-check="secret-case"]')).to_contain_text("SECRET-MESSAGE-13")
    shot(teacher, "63-teacher-attempt")
    assert teacher.errors == [] and page.errors == []


def test_the_student_panel_fits_and_is_keyboard_reachable(start_server, new_page):
    """The side bar's tabs move with the arrow keys; an exercise opens from the keyboard."""
    server = start_server(**LIMITS)
    people(server)
    teacher = teacher_page(new_page, server)
    write_exercise(teacher)
    page = new_page(server)
    login(page, "ada", "ada-password", lands_on="/ide")
    page.locator("#tab-files").focus()
    page.keyboard.press("ArrowRight")
    expect(page.locator("#tab-exercises")).to_be_focused()
    expect(page.locator("#exercises-panel")).to_be_visible()
    page.keyboard.press("Tab")
    expect(page.locator("#exercises-panel .ex-refresh")).to_be_focused()
    page.keyboard.press("Enter")  # the list is drawn again: the keyboard stays where it was
    page.keyboard.press("Tab")
    expect(page.locator("#exercises-panel .ex-item").first).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#exercises-panel .ex-title-big")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Start")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator(".tab.selected")).to_contain_text("average.py")
    assert page.errors == []


def recording(page):
    """Every API response body and WebSocket frame the page receives, to
    search for what must not leak (the bundle's files hold nothing of a teacher's)."""
    seen = []

    def response(r):
        if "/api/" not in r.url:
            return
        try:
            seen.append(r.text())
        except Exception:  # a redirect or a body gone with its page: no content to search
            pass
    page.on("response", response)
    page.on("websocket", lambda ws: ws.on("framereceived", lambda frame: seen.append(
        frame if isinstance(frame, str) else frame.decode("utf-8", "replace"))))
    return seen


# -- with the grader ----------------------------------------------------------------------

def test_a_student_fails_a_visible_check_sees_the_diff_fixes_it_and_passes(start_server, new_page):
    server = start_server(**LIMITS)
    people(server)
    teacher = teacher_page(new_page, server)
    write_exercise(teacher)
    teacher.locator("#class-panel").get_by_role("button", name="Gradebook").click()
    book = teacher.get_by_role("dialog", name="Gradebook: 8A Python")
    cell = book.locator('tr[data-username="ada"] td[data-slug="average"]')
    expect(cell).to_have_text("not started")

    page = new_page(server)
    seen = recording(page)
    login(page, "ada", "ada-password", lands_on="/ide")
    view = open_exercise(page)
    view.get_by_role("button", name="Start").click()
    expect(editor(page)).to_contain_text('print("Average: 0")')

    # The starter fails the visible output check: the diff shows what differs.
    view.get_by_role("button", name="Check").click()
    expect(view.locator(".ex-status")).to_have_attribute("data-state", "done", timeout=30_000)
    first = view.locator('.check-item[data-check="two-numbers"]')
    expect(first).to_have_attribute("data-state", "failed")
    expect(first.locator(".check-points")).to_have_text("0/2")
    # (compared ignoring spaces and capitals, the diff is of the output so normalized)
    expect(first.locator(".diff .del")).to_contain_text(re.compile("average: 5.0", re.I))
    expect(first.locator(".diff .add")).to_contain_text(re.compile("average: 0", re.I))
    expect(first).to_contain_text("Hint: Print 'Average: ' and the average.")
    expect(first.locator(".check-field", has_text="Input").first).to_contain_text("4")
    expect(view.locator('.check-item[data-check="hidden-1"]')).to_contain_text("Not passed yet.")
    expect(view.locator('.check-item[data-check="loop"]')).to_have_attribute("data-state", "passed")
    expect(view.locator(".ex-progress")).to_contain_text("1 attempt")
    shot(page, "63-student-check-failed")
    expect(cell).to_contain_text("1×", timeout=WAIT)  # the teacher's grid follows, live
    expect(cell).to_contain_text("stuck")

    # Fixed in the editor, checked again: everything passes.
    replace_text(page, SOLUTION)
    expect_saved(page)
    view.get_by_role("button", name="Check").click()
    expect(view.locator(".ex-status")).to_contain_text("3 of 3 checks passed", timeout=30_000)
    expect(view.locator('.check-item[data-state="passed"]')).to_have_count(3)
    expect(view.locator(".ex-progress")).to_contain_text("5/5")
    shot(page, "64-student-check-passed")
    expect(cell).to_contain_text("best 5/5", timeout=WAIT)
    expect(cell).to_contain_text("2×")

    # The result stays when the exercise is opened again, after a reload too.
    page.reload()
    view = open_exercise(page)
    expect(view.locator('.check-item[data-state="passed"]')).to_have_count(3)

    # The teacher opens her latest attempt; the hidden check's contents never reached her browser.
    cell.get_by_role("button").click()
    attempt = teacher.get_by_role("dialog", name="Ada Student: Average")
    expect(attempt.locator(".attempt > .check-list > .check-item")).to_have_count(3)
    assert [body for body in seen if re.search(r'"state":\s*"done"', body)], "the check's answers were searched too"
    assert not [s for s in SECRETS for body in seen if s in body]
    assert teacher.errors == [] and page.errors == []


PROMPTING = 'n = int(input("A number: "))\nprint("Double:", n * 2)\n'


def test_a_result_says_how_the_output_was_compared_and_greys_the_prompt(start_server, new_page):
    """A prompt is not compared by default (the form says so); the result
    says which comparison was used and shows the run, the prompt and what
    was typed in grey; under 'exactly' the prompt is compared, and fails."""
    server = start_server(**LIMITS)
    people(server)
    teacher = teacher_page(new_page, server)
    teacher.locator("#class-panel").get_by_role("button", name="New exercise").click()
    form = teacher.get_by_role("dialog", name="New exercise")
    form.get_by_label("Folder name").fill("double")
    form.get_by_label("Title", exact=True).fill("Double")
    form.get_by_label("The student's file").fill("double.py")
    checks = [("double", "Double: 42\n", None), ("exact", "Double: 42\n", "exact"), ("triple", "Triple: 63\n", None)]
    for n, (check_id, expected, compare) in enumerate(checks):
        form.get_by_role("button", name="Add a check").click()
        check = form.locator(".check-form").nth(n)
        check.get_by_label("Id", exact=True).fill(check_id)
        check.get_by_label("Input (what is typed)").fill("21\n")
        check.get_by_label("Expected output").fill(expected)
        expect(check.get_by_label("Compare", exact=True)).to_have_value("output")  # the default: prompts left out
        if compare:
            check.get_by_label("Compare", exact=True).select_option(compare)
    expect(form.locator(".check-form").nth(0)).to_contain_text("Only 'exactly' compares prompts")
    expect(form.locator(".check-form").nth(0).get_by_label("Compare", exact=True).locator("option:checked")) \
        .to_have_text("as printed, input() prompts left out")
    form.get_by_role("button", name="Add a starter file").click()
    form.get_by_label("File name").fill("double.py")
    form.locator(".starter-form textarea").fill("n = 0\n")
    form.get_by_role("button", name="Save").click()
    expect(form).to_have_count(0)

    page = new_page(server)
    login(page, "ada", "ada-password", lands_on="/ide")
    page.get_by_role("tab", name="Exercises").click()
    page.locator("#exercises-panel .ex-item", has_text="Double").click()
    view = page.locator("#exercises-panel .ex-view")
    view.get_by_role("button", name="Start").click()
    expect(page.locator(".tab.selected")).to_contain_text("double.py")
    replace_text(page, PROMPTING)
    expect_saved(page)
    view.get_by_role("button", name="Check").click()
    expect(view.locator(".ex-status")).to_have_attribute("data-state", "done", timeout=30_000)
    expect(view.locator('.check-item[data-check="double"]')).to_have_attribute("data-state", "passed")
    exact = view.locator('.check-item[data-check="exact"]')
    expect(exact).to_have_attribute("data-state", "failed")
    expect(exact.locator(".check-compare")).to_have_text("Compared exactly, what input() shows before you type included.")
    expect(exact.locator(".diff .add")).to_contain_text("A number: Double: 42")
    triple = view.locator('.check-item[data-check="triple"]')
    expect(triple).to_have_attribute("data-state", "failed")
    expect(triple.locator(".check-compare")).to_have_text("Compared leaving out what input() shows before you type.")
    run = triple.locator(".transcript")
    expect(run.locator(".prompt")).to_have_text("A number: ")
    expect(run.locator(".typed")).to_have_text("21\n")
    grey = run.locator(".prompt").evaluate("e => getComputedStyle(e).color")
    assert grey == run.locator(".typed").evaluate("e => getComputedStyle(e).color")
    assert grey != run.evaluate("e => getComputedStyle(e).color")  # the output's own colour
    expect(triple.locator(".diff .add")).to_have_text("+Double: 42\n")  # the prompt is not in the diff
    expect(triple).to_contain_text("in grey: what input() showed, not compared; what was typed")
    triple.scroll_into_view_if_needed()
    shot(page, "65-student-check-prompt-greyed")
    assert teacher.errors == [] and page.errors == []


def test_check_waits_for_a_running_program_and_code_that_does_not_parse_costs_no_attempt(start_server, new_page):
    """Check while the student's own program runs: a sentence, and nothing
    checked; code that does not parse: said so, and no attempt counted."""
    server = start_server(**LIMITS)
    people(server)
    write_exercise(teacher_page(new_page, server))
    page = new_page(server)
    login(page, "ada", "ada-password", lands_on="/ide")
    view = open_exercise(page)
    view.get_by_role("button", name="Start").click()
    expect(editor(page)).to_contain_text("Average: 0")
    page.get_by_role("button", name="Run", exact=True).click()
    expect(page.locator("#run-state")).to_contain_text("Waiting for your input", timeout=WAIT)
    view.get_by_role("button", name="Check").click()
    expect(view.locator(".ex-status")).to_have_text("Stop your program, then press Check.")
    page.get_by_role("button", name="Stop").click()
    replace_text(page, "while True\n    print(")
    expect_saved(page)
    view.get_by_role("button", name="Check").click()
    expect(view.locator(".ex-status")).to_have_text("Your program could not be checked.", timeout=30_000)
    expect(view.locator(".ex-note")).to_contain_text("did not count as an attempt")
    expect(view.locator(".ex-progress")).to_contain_text("0 attempts")
    assert page.errors == []
