"""Signing in with a school account in Chromium, through the real OpenID
provider's own sign-in form (tests/oidc_provider): a student, a teacher
and an admin each land on their page; the sign-in page is accessible and
works from the keyboard; a refusal says what happened; signing out says
that the school account stays signed in."""
import json
import re

import pytest

from tests.browser import LIMITS, assert_accessible, expect, shot, wait_ready
from tests.conftest import People, running_server
from tests.helpers import sql
from tests.oidc_support import PASSWORD, dead_ends, issuer_setting


@pytest.fixture(scope="module")
def signin_server(postgres_url, oidc_provider, oidc_provider2):
    with dead_ends() as (down, _):
        issuers = [issuer_setting("School", oidc_provider.issuer, "existing", groups={"admins": "admin"}),
                   issuer_setting("District", oidc_provider2.issuer, "create_students"),
                   issuer_setting("Down", down)]
        with running_server(postgres_url, OIDC_ISSUERS=json.dumps(issuers), OIDC_TIMEOUT=2, **LIMITS) as server:
            yield server


def existing(server, role, email):
    """An account the admin made, with its school address: its username."""
    user = People(server).make(role, role, log_in=False)
    sql(server.env["DATABASE_URL"], "UPDATE users SET email = %s WHERE username = %s", email, user.username)
    return user.username


def at_provider(page, login):
    """Sign in on the provider's own form (it has come up)."""
    page.get_by_label("Username").fill(login)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Login").click()


def me(page):
    return page.evaluate("() => fetch('/api/me').then((r) => r.json()).then((b) => b.user)")


def test_a_student_a_teacher_and_an_admin_sign_in_with_their_school_accounts(
        signin_server, oidc_provider, oidc_provider2, new_page):
    student = oidc_provider2.person("ada")
    teacher = oidc_provider.person("grace")
    teacher_account = existing(signin_server, "teacher", f"{teacher}@school.test")
    # An account made as a student; the admin mapped the school's "admins" group to admin.
    admin = oidc_provider.person("alan", groups=["admins"])
    admin_account = existing(signin_server, "student", f"{admin}@school.test")

    for issuer, login, username, lands in (("District", student, student, "/ide"),
                                           ("School", teacher, teacher_account, "/teacher"),
                                           ("School", admin, admin_account, "/admin")):
        page = new_page(signin_server)
        page.goto("/")
        page.get_by_role("link", name=f"Sign in with {issuer}").click()
        at_provider(page, login)
        page.wait_for_url(re.compile(re.escape(lands) + "$"))
        wait_ready(page)
        assert me(page)["username"] == username and me(page)["role"] == lands.strip("/").replace("ide", "student")
        assert page.errors == []

    # On the admin page (where the admin landed): the teacher's school account, unbound with a confirmation.
    row = page.locator(f'tr[data-username="{teacher_account}"]')
    expect(row.locator(".user-school")).to_contain_text(f"{teacher}@school.test")
    assert_accessible(page, "the accounts with their school accounts")
    row.get_by_role("button", name=f"Unbind {teacher_account} from school").click()
    page.get_by_role("dialog").get_by_role("button", name="Unbind").click()
    expect(page.locator(".toast")).to_contain_text(f"{teacher_account} is no longer bound to school")
    expect(page.locator(f'tr[data-username="{teacher_account}"]').get_by_role("button", name="Unbind")).to_have_count(0)
    assert sql(signin_server.env["DATABASE_URL"], "SELECT count(*) FROM signin_bindings b JOIN users u "
               "ON u.id = b.user_id WHERE u.username = %s", teacher_account) == [(0,)]


def test_the_sign_in_page_offers_each_school_account_accessibly_and_by_keyboard(signin_server, oidc_provider2,
                                                                                 new_page):
    page = new_page(signin_server)
    page.goto("/?next=/ide")
    accounts = page.get_by_role("list", name="School accounts")
    expect(accounts.get_by_role("link")).to_have_text(["Sign in with School", "Sign in with District",
                                                      "Sign in with Down"])
    expect(page.get_by_label("Username")).to_be_visible()  # and the password form
    assert_accessible(page, "the sign-in page with school accounts")
    shot(page, "signin-school-accounts")

    # From the username field (focused first): back to a school account, Enter, the provider's form by keyboard.
    expect(page.get_by_label("Username")).to_be_focused()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Shift+Tab")
    expect(page.locator(":focus")).to_have_text("Sign in with District")
    page.keyboard.press("Enter")
    page.get_by_label("Username").focus()  # the provider's page (not ours) has no autofocus
    page.keyboard.type(oidc_provider2.person("keyboard"))
    page.keyboard.press("Tab")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/ide$"))
    wait_ready(page)


def test_a_refused_sign_in_is_told_on_an_accessible_page_with_the_password_form(signin_server, new_page):
    page = new_page(signin_server)
    page.goto("/signin/down")
    expect(page.locator("#notice")).to_have_text(
        "Down is not answering right now, so you cannot sign in with it. Try again in a few minutes, "
        "or sign in with your username and password.")
    page.wait_for_url(re.compile(r"/$"))  # the address bar no longer holds the sign-in's address
    expect(page.get_by_label("Username")).to_be_visible()
    assert_accessible(page, "a refused school sign-in")
    assert page.errors == []


def test_signing_out_says_that_the_school_account_stays_signed_in(signin_server, oidc_provider2, new_page):
    page = new_page(signin_server)
    page.goto("/")
    page.get_by_role("link", name="Sign in with District").click()
    at_provider(page, oidc_provider2.person("leaver"))
    page.wait_for_url(re.compile(r"/ide$"))
    wait_ready(page)
    page.locator("#user-btn").click()
    page.get_by_role("menuitem", name="Sign out").click()
    page.wait_for_url(re.compile(r"/$"))
    expect(page.get_by_role("status")).to_have_text(
        "You have signed out of PyClassroom. Your school account is still signed in on this browser: on a "
        "shared computer, sign out of it too, on your school account's own page.")
    assert_accessible(page, "the sign-in page after signing out")
    page.reload()  # said once, right after signing out
    expect(page.locator("#signed-out")).to_be_hidden()
