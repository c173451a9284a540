"""A teacher helps with passwords in the browser (issue 24): resets a
student's password and prints slips for the class, which name the address
students use (PUBLIC_URL), never the one the teacher's browser happens to
use; the admin's Accounts show each account's classes and filter by class.
A student's display name that looks like markup shows as text everywhere."""
import time

import pytest

from tests.browser import expect, login, shot
from tests.conftest import EDITING_HELP, PASSWORD, PUBLIC_URL as PUBLIC, People
from tests.live_support import a_class
from loadtest.harness import ADMIN_PASSWORD

HOSTILE = '<img src=x onerror="window.pwned=1">'


@pytest.fixture
def server(public_server):
    return public_server


@pytest.fixture
def room(server):
    """A class of the test's own, its teacher (who has not signed in yet, so
    it is their only class) and two students, one with a hostile name."""
    people = People(server)
    teacher = people.teacher("grace", display_name="Grace Hopper", log_in=False)
    ada = people.student("ada", display_name=HOSTILE, log_in=False)
    bob = people.student("bob", display_name="Bob Marley", log_in=False)
    name = f"7B {time.time_ns()}"
    number = a_class(server, teacher, ada, bob, name=name)
    return number, name, teacher, ada, bob


def printed_slips(page):
    """Print slips with the printer stubbed out (a headless browser has none): the slips' text."""
    page.evaluate("() => { window.printed = 0; window.print = () => { window.printed += 1; }; }")
    page.locator(".passwords-dialog").get_by_role("button", name="Print slips").click()
    expect(page.locator(".passwords-dialog [role=status]")).to_have_text("Sent to the printer.")
    assert page.evaluate("window.printed") == 1
    return page.locator("#slips").inner_text()


def test_a_teacher_resets_a_password_and_prints_the_class_slips(server, room, new_page):
    number, name, teacher, ada, bob = room
    page = new_page(server)
    login(page, teacher.username, PASSWORD, lands_on="/teacher")
    panel = page.locator("#class-panel")
    expect(panel.locator(".class-name")).to_have_text(name)
    expect(panel.locator(".student")).to_have_count(2)

    # One student forgot her password: a new one, shown once, on a slip of its own.
    panel.locator(f'.student[data-username="{ada.username}"]').click()
    panel.get_by_role("button", name=f"Reset password of {HOSTILE}").click()
    page.get_by_role("button", name="Reset password").last.click()  # the confirmation
    dialog = page.locator(".passwords-dialog")
    row = dialog.locator(f'.passwords-table tr[data-username="{ada.username}"]')
    expect(row).to_contain_text(HOSTILE)  # her name, as text
    new_password = row.locator("td").nth(3).inner_text()
    assert server.client().login(ada.username, PASSWORD).status_code == 401
    assert server.client().login(ada.username, new_password).status_code == 200
    expect(dialog.locator(".slip-address")).to_have_text(f"The slips say to sign in at {PUBLIC}.")
    slips = printed_slips(page)
    assert PUBLIC in slips and "127.0.0.1" not in slips and HOSTILE in slips and new_password in slips
    assert page.locator("#slips img").count() == 0
    dialog.get_by_role("button", name="Done").click()
    expect(dialog).to_have_count(0)

    # New passwords and slips for the whole class, after a warning.
    panel.get_by_role("button", name="New passwords and slips").click()
    ask = page.get_by_role("dialog")
    expect(ask).to_contain_text("Their old passwords stop working at once")
    ask.get_by_role("button", name="Make new passwords").click()
    expect(dialog.locator(".passwords-table tbody tr")).to_have_count(2)
    expect(dialog.locator(f'tr[data-username="{bob.username}"]')).to_contain_text("Bob Marley")
    slips = printed_slips(page)
    assert slips.count(PUBLIC) == 2 and "127.0.0.1" not in slips and "Bob Marley" in slips
    shot(page, "60-teacher-class-passwords")
    dialog.get_by_role("button", name="Done").click()
    for who in (ada, bob):
        assert server.client().login(who.username, new_password).status_code == 401  # each has a new one now
    assert page.evaluate("window.pwned") is None
    assert page.errors == []


def test_the_admin_sees_classes_and_filters_accounts_by_class(server, room, new_page):
    number, name, teacher, ada, bob = room
    page = new_page(server)
    login(page, "admin", ADMIN_PASSWORD, lands_on="/admin")
    accounts = page.locator("#users")
    page.get_by_label("Class", exact=True).select_option(label=name)
    expect(accounts.locator("tbody tr")).to_have_count(3)
    for who in (teacher, ada, bob):
        expect(accounts.locator(f'tr[data-username="{who.username}"] .user-classes')).to_contain_text(name)
    expect(accounts.locator(f'tr[data-username="{ada.username}"] .user-name')).to_have_text(HOSTILE)
    page.get_by_label("Role").select_option("teacher")
    expect(accounts.locator("tbody tr")).to_have_count(1)
    page.get_by_label("Class", exact=True).select_option(label="All classes")
    page.get_by_label("Role").select_option("admin")
    expect(accounts.locator('tr[data-username="admin"] .user-classes')).to_have_text("all (admin)")
    shot(page, "61-admin-accounts-classes")
    assert page.evaluate("window.pwned") is None
    assert page.errors == []


def test_slips_warn_when_the_address_is_a_loopback_one(shared_servers, new_page):
    """The tests' plain servers listen on 127.0.0.1 without PUBLIC_URL: the
    slips would send students nowhere, and the page says so."""
    server = shared_servers.get(**EDITING_HELP)
    people = People(server)
    teacher = people.teacher("kate", log_in=False)
    student = people.student("sam", log_in=False)
    a_class(server, teacher, student)
    page = new_page(server)
    login(page, teacher.username, PASSWORD, lands_on="/teacher")
    page.locator("#class-panel").get_by_role("button", name="New passwords and slips").click()
    page.get_by_role("button", name="Make new passwords").click()
    warning = page.locator(".passwords-dialog .slip-address")
    expect(warning).to_have_attribute("role", "alert")
    expect(warning).to_contain_text("works only on the server's own computer")
    expect(warning).to_contain_text("PUBLIC_URL")
    assert page.errors == []
