"""A student's detail in Chromium (issue 24): the teacher chooses a student
in the Class panel and sees the file open in the student's IDE (read-only,
following her saves) and her console following a new run, text and figure;
what she chose (her name, her file's name, her program's output) shows as
text, never as markup or script, whatever it holds."""
from tests.browser import LIMITS, expect, login, replace_text, expect_saved, shot, wait_terminal, write_program
from tests.helpers import create_user
from tests.live_support import a_class

WAIT = 20_000  # ms: only catches a hang
NAME = '<img src=x onerror="window.pwned=1">.py'
PROGRAM = ('import matplotlib.pyplot as plt\n'
           'print("<img src=x onerror=window.pwned=2> <script>window.pwned=3</script>")\n'
           'print("\\x1b[31mred\\x1b[0m \\x1b]0;a title\\x07\\x1b[2Jcleared")\n'
           'name = input("your name? ")\n'
           'print("hello", name)\n'
           'plt.plot([1, 4, 9])\n'
           'plt.show()\n')


def test_the_teacher_sees_a_students_open_file_and_console_live(start_server, new_page):
    server = start_server(processes=2, **LIMITS)
    dsn = server.env["DATABASE_URL"]
    create_user(dsn, "ada", "ada-password", display_name='<b onmouseover="window.pwned=4">Ada</b>')
    create_user(dsn, "grace", "grace-password", role="teacher", display_name="Grace Hopper")
    a_class(server, "grace", "ada", name="9C")

    page = new_page(server)
    login(page, "ada", "ada-password", lands_on="/ide")
    write_program(page, NAME, PROGRAM)

    teacher = new_page(server)
    login(teacher, "grace", "grace-password", lands_on="/teacher")
    teacher.locator('#class-panel .student[data-username="ada"]').click()
    detail = teacher.locator("#class-panel .student-detail")
    expect(detail.locator(".detail-name")).to_have_text('<b onmouseover="window.pwned=4">Ada</b> (ada)')
    # Her open file, read-only, as she has it.
    expect(detail.locator(".detail-file-name")).to_have_text(NAME, timeout=WAIT)
    expect(detail.locator(".detail-code .cm-content")).to_contain_text("your name?", timeout=WAIT)
    expect(detail.locator(".detail-code .cm-content")).to_have_attribute("contenteditable", "false")

    # She runs it: the teacher's console follows, during the run and after her input.
    page.get_by_role("button", name="Run", exact=True).click()
    wait_terminal(page, "your name\\? ")
    output = detail.locator(".detail-output")
    expect(output).to_contain_text("your name? ", timeout=WAIT)
    expect(detail.locator(".detail-run-state")).to_contain_text("waiting for them to type", timeout=WAIT)
    expect(output).to_contain_text("<img src=x onerror=window.pwned=2> <script>window.pwned=3</script>")
    expect(output).to_contain_text("red cleared")  # escape sequences left out
    page.keyboard.type("Ada")
    page.keyboard.press("Enter")
    expect(output).to_contain_text("hello Ada", timeout=WAIT)
    expect(detail.locator(".detail-plots img")).to_have_count(1, timeout=WAIT)
    expect(detail.locator(".detail-run-state")).to_contain_text("Last run", timeout=WAIT)
    assert detail.locator(".detail-plots img").get_attribute("src").startswith("data:image/png;base64,iVBOR")

    # She changes the file and saves: the teacher's copy follows.
    replace_text(page, 'print("second version")\n')
    expect_saved(page)
    expect(detail.locator(".detail-code .cm-content")).to_contain_text("second version", timeout=WAIT)
    shot(teacher, "32-teacher-student-detail")
    # She opens another file: the teacher's detail shows that one.
    write_program(page, "second.py", 'print("another file")\n')
    expect(detail.locator(".detail-file-name")).to_have_text("second.py", timeout=WAIT)
    expect(detail.locator(".detail-code .cm-content")).to_contain_text("another file", timeout=WAIT)

    # Nothing she chose became markup or ran: one image (her figure), no script, no error.
    assert detail.locator("img").count() == 1 and detail.locator("script, b").count() == 0
    assert "\x1b" not in output.inner_text() and "a title" not in output.inner_text()
    assert teacher.evaluate("window.pwned") is None and page.evaluate("window.pwned") is None
    assert teacher.errors == [] and page.errors == []

    # The teacher copies the file to her own files and runs it there.
    detail.get_by_role("button", name="Copy to my files", exact=True).click()
    expect(teacher.locator(".tab.selected")).to_contain_text("ada/second.py")
    teacher.get_by_role("button", name="Run", exact=True).click()
    wait_terminal(teacher, "another file")
