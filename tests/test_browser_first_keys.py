"""Text typed in the first moment after sign-in is never lost: keys typed
while the IDE opens (its file still on its way) are typed into the file
once it is shown, and saved (issue 30, item 11)."""
import re
import time

import pytest

from tests.browser import LIMITS, editor_text, expect, expect_saved, student

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def test_keys_typed_at_once_after_sign_in_are_kept_and_saved(start_server, new_page):
    server = start_server(**LIMITS)
    user, password = student(server)
    page = new_page(server)
    # The file's text comes late, as it does from a busy server: the moment in between is long.
    page.route(re.compile(r".*/api/files/home/hello\.py$"), lambda route: (time.sleep(1.5), route.continue_()))
    page.goto("/")
    page.get_by_label("Username").fill(user)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/ide$"), wait_until="commit")
    page.wait_for_selector("#editor .cm-content", state="attached")
    # A student starts typing as soon as the page is there, before the file is.
    page.keyboard.type("early = 1\n")
    expect(page.locator("#editor .cm-content")).to_contain_text("print", timeout=15_000)
    page.keyboard.type("late = 2\n")
    expect_saved(page)
    shown = editor_text(page)
    saved = server.client()
    saved.login_ok(user, password)
    on_server = saved.get("/api/files/home/hello.py").json()["content"]
    assert on_server.strip() == shown.strip(), (on_server, shown)
    assert "late = 2" in shown
    # What was typed before the file came is in it too, where the cursor was, and saved.
    assert shown.startswith("early = 1\nlate = 2\n"), shown
    assert page.errors == []
