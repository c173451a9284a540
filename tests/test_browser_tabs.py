"""The IDE across browser tabs and visits, in a real browser (Debian's
Chromium driven by Playwright) against the real server: a second tab takes
the run socket and "Use it here" takes it back, signing out in one tab ends
the session in the others, the open files come back after a reload, and
text kept while offline meets a newer version as a conflict at the next
visit."""
import re

import pytest

from tests.browser import (shot, login, wait_ready, editor, editor_text, replace_text, save_status,
                           expect_saved, wait_terminal, open_file, write_program, student, student_ide, LIMITS,
                           expect)

pytestmark = pytest.mark.timeout(300)

OTHER_TABS = "This IDE is open in other tabs."


def test_a_second_tab_takes_the_run_socket_and_use_it_here_takes_it_back(start_server, new_page):
    server = start_server(processes=1, RUN_SOCKETS_PER_USER=1, **LIMITS)
    user, password = student(server)
    one = new_page(server)
    login(one, user, password, lands_on="/ide")
    write_program(one, "where.py", 'print("ran", "here")\n')

    two = new_page(server)
    login(two, user, password, lands_on="/ide")
    expect(one.locator("#conn-banner")).to_contain_text(OTHER_TABS)
    shot(one, "21-open-in-another-tab")
    # The tab pushed out stays parked: the tab that took over runs a program
    # and keeps its socket afterwards.
    open_file(two, "where.py")
    two.get_by_role("button", name="Run").click()
    assert "ran here" in wait_terminal(two, "Finished")
    expect(two.locator("#conn-banner")).to_be_hidden()
    expect(one.locator("#conn-banner")).to_contain_text(OTHER_TABS)

    one.get_by_role("button", name="Use it here").click()
    expect(one.locator("#conn-banner")).to_be_hidden()
    one.get_by_role("button", name="Run").click()
    assert "ran here" in wait_terminal(one, "Finished")
    expect(one.locator("#run-state")).to_have_attribute("data-state", "done")
    assert one.errors == [] and two.errors == []


def test_use_it_here_pushes_the_other_tab_out_in_turn(start_server, new_page):
    server = start_server(processes=1, RUN_SOCKETS_PER_USER=1, **LIMITS)
    user, password = student(server)
    one, two = new_page(server), new_page(server)
    login(one, user, password, lands_on="/ide")
    login(two, user, password, lands_on="/ide")
    expect(one.locator("#conn-banner")).to_contain_text(OTHER_TABS)
    one.get_by_role("button", name="Use it here").click()
    expect(two.locator("#conn-banner")).to_contain_text(OTHER_TABS)


def test_signing_out_in_another_tab_ends_the_session_here(start_server, new_page):
    server = start_server(processes=1, **LIMITS)
    page, user, password = student_ide(new_page, server)
    other = page.context.new_page()  # the same browser: the same session
    other.goto("/ide")
    wait_ready(other)

    other.locator("#user-btn").click()
    other.get_by_role("menuitem", name="Sign out").click()
    other.wait_for_url(re.compile(r"/$"))
    # The server closes this tab's run socket (4401); the page finds out why
    # and says so, instead of reconnecting.
    ended = page.get_by_role("dialog", name="Your session has ended")
    expect(ended).to_be_visible()
    expect(page.locator("#conn-banner")).to_be_hidden()
    ended.get_by_role("button", name="Sign in again").click()
    page.wait_for_url(re.compile(r"/\?next=%2Fide$"))
    assert page.errors == []


def test_open_files_come_back_after_a_reload_and_the_keys_move_between_them(start_server, new_page):
    server = start_server(processes=1, **LIMITS)
    page, user, password = student_ide(new_page, server)
    write_program(page, "first.py", 'print("first")\n')
    write_program(page, "second.py", 'print("second")\n')
    tabs = page.locator(".tab")
    expect(tabs).to_have_count(3)  # hello.py, opened at the first visit, too

    page.reload()
    wait_ready(page)
    expect(tabs).to_have_count(3)
    expect(page.locator(".tab.selected")).to_contain_text("second.py")
    page.keyboard.press("Alt+PageUp")
    expect(page.locator(".tab.selected")).to_contain_text("first.py")
    expect(editor(page)).to_contain_text('print("first")')
    page.keyboard.press("Alt+PageDown")
    expect(page.locator(".tab.selected")).to_contain_text("second.py")
    expect(editor(page)).to_contain_text('print("second")')

    # A closed tab stays closed; the tab shown last is shown again.
    page.get_by_title("Close second.py (Delete)").click()  # the tab's cross, for the mouse
    expect(tabs).to_have_count(2)
    page.get_by_role("tab", name="hello.py").click()
    page.reload()
    wait_ready(page)
    expect(tabs).to_have_count(2)
    expect(page.locator(".tab", has_text="second.py")).to_have_count(0)
    expect(page.locator(".tab.selected")).to_contain_text("hello.py")
    assert page.errors == []


def test_text_kept_offline_meets_a_newer_version_at_the_next_visit(start_server, new_page):
    server = start_server(processes=1, **LIMITS)
    page, user, password = student_ide(new_page, server)
    write_program(page, "essay.py", 'print("first draft")\n')

    context = page.context
    context.set_offline(True)
    replace_text(page, 'print("mine, typed offline")\n')
    expect(save_status(page)).to_have_attribute("data-status", "offline")
    # Meanwhile the file changes on another computer; then this tab is closed.
    client = server.client()
    client.login_ok(user, password)
    etag = client.get("/api/files/home/essay.py").json()["etag"]
    changed = client.request("PUT", "/api/files/home/essay.py", data=b'print("theirs")\n',
                             headers={"If-Match": f'"{etag}"'})
    assert changed.status_code == 200, changed.text
    page.close()
    context.set_offline(False)

    page = context.new_page()
    page.goto("/ide")
    wait_ready(page)
    dialog = page.get_by_role("dialog", name=re.compile("Conflict"))
    expect(dialog.locator(".cm-mergeView")).to_contain_text("mine, typed offline")
    expect(dialog.locator(".cm-mergeView")).to_contain_text("theirs")
    dialog.get_by_role("button", name="Keep mine").click()
    expect_saved(page)
    assert editor_text(page).strip() == 'print("mine, typed offline")'
    assert client.get("/api/files/home/essay.py").json()["content"] == 'print("mine, typed offline")\n'
    versions = client.get("/api/history/home/essay.py").json()["versions"]
    texts = [client.get("/api/history/home/essay.py", params={"version": v["version"]}).json()["content"]
             for v in versions]
    assert 'print("theirs")\n' in texts  # what it replaced is kept
