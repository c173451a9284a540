"""Signing in with a school account, against a real OpenID provider
(tests/oidc_provider, built once): who is who, and every attack refused
with a sentence that says what happened, the password form still there.

The browser here is a requests.Session (cookies, redirects) going through
the provider's own sign-in form; tests/test_browser_signin.py does it in
Chromium."""
import json
import re
import threading

import pytest
import requests

from loadtest.harness import ADMIN_PASSWORD
from tests.conftest import PASSWORD, People, running_server
from server.signin.service import FLOWS_PER_ADDRESS
from tests.helpers import sql
from tests.oidc_support import (HTTP_TIMEOUT, TokenProxy, back_from_provider, dead_ends, expired, issuer_setting,
                                notice, other_audience, other_key, signed_in_as, to_provider, unknown_key)

TIMEOUT = 2  # OIDC_TIMEOUT of the server: the deadline a provider that does not answer meets


@pytest.fixture(scope="module")
def proxy(oidc_provider):
    proxy = TokenProxy(oidc_provider)
    yield proxy
    proxy.close()


@pytest.fixture(scope="module")
def rotating(oidc_provider):
    proxy = TokenProxy(oidc_provider)
    yield proxy
    proxy.close()


@pytest.fixture(scope="module")
def signin_server(postgres_url, oidc_provider, oidc_provider2, proxy, rotating):
    with dead_ends() as (down, silent):
        issuers = [issuer_setting("School", oidc_provider.issuer, "existing"),
                   issuer_setting("District", oidc_provider2.issuer, "create_students"),
                   issuer_setting("Proxy", proxy.issuer, "create_students"),
                   issuer_setting("Rotating", rotating.issuer, "create_students"),
                   issuer_setting("Down", down), issuer_setting("Silent", silent)]
        with running_server(postgres_url, OIDC_ISSUERS=json.dumps(issuers), OIDC_TIMEOUT=TIMEOUT) as server:
            yield server


def account(server, role="student", email=None):
    """An account made by the school's admin, with its school address: its username."""
    user = People(server).make("pupil" if role == "student" else role, role, log_in=False)
    if email:
        sql(server.env["DATABASE_URL"], "UPDATE users SET email = %s WHERE username = %s", email, user.username)
    return user.username


def sign_in(server, issuer_id, login, **kw):
    browser, callback = to_provider(server, issuer_id, login, **kw)
    return browser, back_from_provider(browser, callback)


def refused(server, issuer_id, login, status=403):
    """Sign in, expecting a refusal: its sentence; no session came of it."""
    browser, answer = sign_in(server, issuer_id, login)
    assert answer.status_code == status, answer.text[:300]
    assert 'id="login"' in answer.text  # the password form is still there
    assert signed_in_as(server, browser) is None
    return notice(answer)


def test_a_new_student_is_made_and_keeps_their_account_by_subject(signin_server, oidc_provider2):
    login = oidc_provider2.person("newcomer")
    browser, answer = sign_in(signin_server, "district", login)
    assert answer.status_code == 302 and answer.headers["Location"] == "/ide"
    me = signed_in_as(signin_server, browser)
    assert me["role"] == "student" and me["username"] == login and me["display_name"] == "Newcomer Tester"

    # Again, in another browser, with another address: the same account.
    oidc_provider2.change(login, email=f"renamed-{login}@school.test")
    again, answer = sign_in(signin_server, "district", login)
    assert signed_in_as(signin_server, again)["username"] == login
    # The sessions are today's: signing out ends this one only.
    assert again.post(f"{signin_server.url}/api/logout", headers={"X-XSRFToken": again.cookies["_xsrf"]},
                      timeout=HTTP_TIMEOUT).status_code == 200
    assert signed_in_as(signin_server, again) is None and signed_in_as(signin_server, browser)["username"] == login


def test_an_existing_account_is_matched_once_by_its_address_then_by_subject(signin_server, oidc_provider):
    login = oidc_provider.person("ada")
    username = account(signin_server, "student", f"{login}@school.test")
    browser, answer = sign_in(signin_server, "school", login, next_page="/ide")
    assert answer.headers["Location"] == "/ide"
    assert signed_in_as(signin_server, browser)["username"] == username

    # The school changes her address: the binding, not the address, decides.
    oidc_provider.change(login, email=f"ada.lovelace-{login}@school.test")
    browser, _ = sign_in(signin_server, "school", login)
    assert signed_in_as(signin_server, browser)["username"] == username
    bound = sql(signin_server.env["DATABASE_URL"], "SELECT b.email FROM signin_bindings b JOIN users u "
                "ON u.id = b.user_id WHERE u.username = %s", username)
    assert bound == [(f"ada.lovelace-{login}@school.test",)]


def test_an_admin_sees_a_binding_and_unbinds_it(signin_server, oidc_provider):
    """A student given a new school account: the admin unbinds the old one
    (a student may not), and her next sign-in binds again as a first one does."""
    login = oidc_provider.person("ada")
    username = account(signin_server, "student", f"{login}@school.test")
    sign_in(signin_server, "school", login)
    admin = signin_server.client()
    admin.login_ok("admin", ADMIN_PASSWORD)
    [listed] = admin.get("/api/admin/users", params={"q": username}).json()["users"]
    assert (listed["school_accounts"], listed["email"]) == (["school"], f"{login}@school.test"), listed
    nosy = People(signin_server).student("nosy")
    assert nosy.request("DELETE", f"/api/admin/users/{username}/school/school").status_code == 403
    assert admin.request("DELETE", f"/api/admin/users/{username}/school/school").status_code == 200
    bound = "SELECT count(*) FROM signin_bindings b JOIN users u ON u.id = b.user_id WHERE u.username = %s"
    assert sql(signin_server.env["DATABASE_URL"], bound, username) == [(0,)]
    again = admin.request("DELETE", f"/api/admin/users/{username}/school/school")
    assert (again.status_code, again.json()["error"]) == (404, "not_bound")
    browser, _ = sign_in(signin_server, "school", login)
    assert signed_in_as(signin_server, browser)["username"] == username
    assert sql(signin_server.env["DATABASE_URL"], bound, username) == [(1,)]


def test_no_account_yet_and_a_domain_not_allowed_are_each_told(signin_server, oidc_provider):
    said = refused(signin_server, "school", oidc_provider.person("stranger"))
    assert said.startswith("There is no PyClassroom account for stranger-") and "Ask your teacher" in said
    elsewhere = oidc_provider.person("visitor", domain="elsewhere.test")
    account(signin_server, "student", f"{elsewhere}@elsewhere.test")
    said = refused(signin_server, "school", elsewhere)
    assert said == ("Accounts of elsewhere.test may not sign in here. Sign in with your school account "
                    "(an address ending in @school.test).")


def test_an_address_the_provider_did_not_verify_matches_no_account(signin_server, oidc_provider):
    login = oidc_provider.person("unverified", verified=False)
    username = account(signin_server, "teacher", f"{login}@school.test")
    said = refused(signin_server, "school", login)
    assert said.startswith("School did not confirm your e-mail address")
    assert sql(signin_server.env["DATABASE_URL"], "SELECT count(*) FROM signin_bindings b JOIN users u "
               "ON u.id = b.user_id WHERE u.username = %s", username) == [(0,)]


def test_a_second_issuer_claiming_the_same_address_takes_no_account_over(signin_server, oidc_provider,
                                                                         oidc_provider2):
    login = oidc_provider.person("grace")
    email = f"{login}@school.test"
    username = account(signin_server, "teacher", email)
    sign_in(signin_server, "school", login)  # bound to School

    intruder = oidc_provider2.person("intruder", email=email)  # another issuer, the same verified address
    said = refused(signin_server, "district", intruder)
    assert said == (f"The account of {email} signs in with another school account. Use that one; if you "
                    "cannot, ask your school's admin.")
    browser, _ = sign_in(signin_server, "school", login)
    assert signed_in_as(signin_server, browser)["username"] == username


def test_a_return_to_another_browser_or_a_second_time_is_refused(signin_server, oidc_provider2):
    login = oidc_provider2.person("alan")
    browser, callback = to_provider(signin_server, "district", login)
    # An attacker's finished sign-in, opened in the victim's browser (login CSRF).
    victim = requests.Session()
    answer = back_from_provider(victim, callback)
    assert answer.status_code == 400 and signed_in_as(signin_server, victim) is None
    assert notice(answer) == ("This sign-in was not started in this browser (or another was started since), "
                              "so it cannot finish here. Start again from the sign-in page.")
    assert 'id="login"' in answer.text

    assert back_from_provider(browser, callback).status_code == 302  # its own browser: in
    # The same return again (its flow is used up), even with the flow's cookie.
    replay = requests.Session()
    replay.cookies.update(browser.cookies)
    replay.cookies.clear(domain="127.0.0.1", path="/", name="pyclassroom_session")
    answer = back_from_provider(replay, callback)
    assert answer.status_code == 400 and signed_in_as(signin_server, replay) is None


@pytest.mark.parametrize("next_page", ["https://evil.test/", "//evil.test/ide", "/\\evil.test", "/admin",
                                       "javascript:alert(1)"])
def test_the_return_address_never_leads_off_the_site_or_to_another_role(signin_server, oidc_provider2, next_page):
    browser, answer = sign_in(signin_server, "district", oidc_provider2.person("bob"), next_page=next_page)
    assert answer.status_code == 302 and answer.headers["Location"] == "/ide"


def test_sign_ins_started_and_never_finished_are_bounded_per_network(signin_server):
    """Each start writes a row: a script starting them in a loop from one
    address is told to wait once FLOWS_PER_ADDRESS are under way (made here
    in the database at once), and the others' sign-ins go on."""
    dsn = signin_server.env["DATABASE_URL"]
    sql(dsn, "INSERT INTO signin_flows (state_hash, issuer, nonce, verifier, redirect_uri, address) "
             "SELECT sha256(('flood ' || i)::bytea), 'school', 'flood', 'v', 'r', '127.0.0.1' "
             "FROM generate_series(1, %s) i", FLOWS_PER_ADDRESS)
    try:
        answer = requests.get(signin_server.url + "/signin/school", allow_redirects=False, timeout=30)
        assert answer.status_code == 429 and 'id="login"' in answer.text, answer.text[:300]
        assert notice(answer) == ("Too many sign-ins were started from your network and not finished in the last "
                                  "minutes: wait a minute, then try again.")
        assert sql(dsn, "SELECT count(*) FROM signin_flows WHERE address = '127.0.0.1'") == [(FLOWS_PER_ADDRESS,)]
        sql(dsn, "UPDATE signin_flows SET address = '203.0.113.9' WHERE nonce = 'flood'")  # another network's
        answer = requests.get(signin_server.url + "/signin/school", allow_redirects=False, timeout=30)
        assert answer.status_code == 302, answer.text[:300]  # off to the provider
    finally:
        sql(dsn, "DELETE FROM signin_flows WHERE nonce = 'flood'")


def test_the_token_proxy_itself_is_trusted(signin_server, oidc_provider):
    """The control for the attacks below: unaltered, the proxy's tokens sign in."""
    browser, answer = sign_in(signin_server, "proxy", oidc_provider.person("control"))
    assert answer.status_code == 302 and signed_in_as(signin_server, browser)["role"] == "student"


@pytest.mark.parametrize("alter", [other_key, unknown_key, other_audience, expired], ids=lambda f: f.__name__)
def test_an_id_token_that_is_not_for_us_is_refused(signin_server, oidc_provider, proxy, alter):
    """The token proxy (tests/oidc_support.py) spoils the real provider's
    token: signed by another key, by a key never published, for another
    audience, expired."""
    proxy.alter = alter
    said = refused(signin_server, "proxy", oidc_provider.person("victim"))
    assert said == ("The answer from Proxy could not be trusted, so you are not signed in. Start again from the "
                    "sign-in page; if it happens again, tell your teacher.")
    assert proxy.alter is None  # the spoiled token was the one the server got


def test_a_provider_that_rotates_its_key_is_still_trusted(signin_server, oidc_provider, rotating):
    """The server keeps the provider's keys, and fetches them again when a
    token names a key id it has not seen (a proxy of the tests' own rotates)."""
    first = oidc_provider.person("before")
    assert signed_in_as(signin_server, sign_in(signin_server, "rotating", first)[0])["username"] == first
    rotating.rotate()
    later = oidc_provider.person("after")
    assert signed_in_as(signin_server, sign_in(signin_server, "rotating", later)[0])["username"] == later


def test_an_id_token_replayed_from_an_earlier_sign_in_is_refused(signin_server, oidc_provider, proxy):
    """The proxy answers a new sign-in with the ID token of an earlier one
    (valid, signed, another nonce): someone who captured it cannot reuse it."""
    earlier = oidc_provider.person("earlier")
    sign_in(signin_server, "proxy", earlier)
    captured = proxy.given[-1]
    proxy.alter = lambda claims, key, kid: (captured, key, kid)
    said = refused(signin_server, "proxy", oidc_provider.person("later"))
    assert said.startswith("The answer from Proxy could not be trusted")


@pytest.mark.parametrize("issuer_id", ["down", "silent"])
def test_a_provider_down_or_not_answering_is_told_and_the_password_form_works(signin_server, issuer_id):
    people = People(signin_server)
    waiting = {}

    def start():
        waiting["answer"] = requests.get(f"{signin_server.url}/signin/{issuer_id}", timeout=HTTP_TIMEOUT)

    thread = threading.Thread(target=start)
    thread.start()
    # Meanwhile the server serves everyone else (nothing waits on the IOLoop).
    student = people.student()
    assert student.get("/api/me").status_code == 200
    thread.join(HTTP_TIMEOUT)
    answer = waiting["answer"]
    assert answer.status_code == 503
    name = issuer_id.title()
    assert notice(answer) == (f"{name} is not answering right now, so you cannot sign in with it. Try again in a "
                              "few minutes, or sign in with your username and password.")
    assert re.search(r'<form id="login"[^>]*novalidate\s*>', answer.text)  # the password form, shown
    late = people.student(log_in=False)
    late.login_ok(late.username, PASSWORD)


def test_a_class_list_names_the_school_address_instead_of_a_password(signin_server, oidc_provider):
    login = oidc_provider.person("mary")
    admin = People(signin_server).admin()
    username = f"mary-{login[-8:]}"
    report = admin.post("/api/admin/users/import", json={"csv": f"{username},Mary Somerville,student,"
                                                               f"{login.upper()}@School.test,Physics\n"})
    assert report.status_code == 200, report.text
    (row,) = report.json()["rows"]
    assert row["outcome"] == "created" and row["email"] == f"{login}@school.test" and "password" not in row
    # No password signs in to it; the school account does.
    assert signin_server.client().login(username, "!school-account").status_code == 401
    browser, answer = sign_in(signin_server, "school", login)
    assert signed_in_as(signin_server, browser)["username"] == username

    # The same address again is refused, naming the account that has it; nothing is made.
    again = admin.post("/api/admin/users/import", json={"csv": f"other-{username},Other,student,{login}@school.test\n"})
    assert again.status_code == 400
    assert again.json()["rows"][0]["problem"] == f"the address {login}@school.test is already the account {username}'s"


def test_with_the_password_form_turned_off_only_the_school_accounts_sign_in(start_server, oidc_provider2):
    server = start_server(PASSWORD_SIGN_IN=0, OIDC_ISSUERS=json.dumps(
        [issuer_setting("District", oidc_provider2.issuer, "create_students")]))
    page = requests.get(server.url + "/", timeout=HTTP_TIMEOUT).text
    assert re.search(r'<form id="login"[^>]*\shidden>', page) and "Sign in with District" in page
    refused = server.client().login("admin", ADMIN_PASSWORD)
    assert refused.status_code == 403 and refused.json()["message"] == (
        "Signing in with a password is turned off on this server. Sign in with your school account's button "
        "instead.")
    login = oidc_provider2.person("only")
    browser, _ = sign_in(server, "district", login)
    assert signed_in_as(server, browser)["username"] == login
