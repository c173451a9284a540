"""One student must not lock out the class (issue 20): failed logins from
the school's one address, with OWASP's device cookies, against the real
server. A browser that has signed in as a user before is not slowed by
anyone else's failures; every other attempt still is, per account and per
address, and a forged or borrowed device cookie changes nothing."""
from concurrent.futures import ThreadPoolExecutor

import psycopg2
import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.accounts.devices import COOKIE, MAX_TOKENS, Devices
from server.accounts.passwords import hash_password
from tests.helpers import sql

PASSWORD = "class-password-1"
fuzz = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def make_class(dsn, names):
    """Accounts for `names`, all with PASSWORD (hashed once)."""
    password_hash = hash_password(PASSWORD)
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO users (username, display_name, role, password_hash) "
                        "VALUES (%s, %s, 'student', %s)", [(n, n.title(), password_hash) for n in names])
    conn.close()


def signed_in_before(server, username):
    """A browser that has signed in as `username` and signed out again:
    it keeps its device cookie, as the student's own computer does."""
    browser = server.client()
    browser.login_ok(username, PASSWORD)
    assert browser.post("/api/logout").status_code == 200
    assert browser.get("/api/me").status_code == 401 and COOKIE in browser.http.cookies
    return browser


def device_cookie(browser):
    return browser.http.cookies.get(COOKIE, path="/api/login")


def login_with_cookie(server, username, password, cookie):
    """A login from a new browser whose only cookie (besides _xsrf) is `cookie`."""
    browser = server.client()
    browser.xsrf()
    browser.http.cookies.set(COOKIE, cookie, path="/api/login")
    return browser.login(username, password)


def test_two_hundred_made_up_names_from_the_school_address_leave_the_class_signing_in(start_server, fresh_db):
    server = start_server(processes=2)  # the defaults a school runs with
    class_size = 60
    names = [f"pupil{n}" for n in range(class_size)]
    make_class(fresh_db, names)
    known = {name: signed_in_before(server, name) for name in names[:30]}  # the other 30 never signed in

    def guess(i):
        return server.client().login(f"nobody{i}", f"guess-{i}").status_code

    def sign_in(name):  # on the student's own browser, or a new one for the never-signed-in
        r = (known.get(name) or server.client()).login(name, PASSWORD)
        return r.status_code

    # One student sprays 200 made-up names from the class's one address;
    # the class signs in during the second half of it, and again after.
    with ThreadPoolExecutor(8) as pool:
        spray = list(pool.map(guess, range(100)))
    with ThreadPoolExecutor(8 + class_size) as pool:
        rest = pool.map(guess, range(100, 200))
        during = dict(zip(names, pool.map(sign_in, names)))
        spray += list(rest)
    assert spray == [401] * 200
    with ThreadPoolExecutor(class_size) as pool:
        after = dict(zip(names, pool.map(sign_in, names)))
    for when, answers in (("during", during), ("after", after)):
        print(f"{when} 200 failed made-up names from one address: "
              f"{sum(s == 200 for s in answers.values())} of {class_size} signed in "
              f"({len(known)} on known browsers, {class_size - len(known)} on new ones)")
    assert during == after == {name: 200 for name in names}


def test_a_guesser_is_slowed_while_the_owner_signs_in_on_her_own_browser(start_server, fresh_db):
    server = start_server(processes=2, LOGIN_FAILURES_PER_USER=5)
    make_class(fresh_db, ["ada", "bob"])
    adas_laptop = signed_in_before(server, "ada")
    guesser = server.client()
    codes = [guesser.login("ada", f"guess-{i}").status_code for i in range(12)]
    assert codes[:5] == [401] * 5 and set(codes[5:]) == {429}
    refused = guesser.login("ada", PASSWORD)  # even the right password, from the guesser's browser
    assert refused.status_code == 429 and refused.json()["throttled"] == "account"
    message = refused.json()["message"]
    assert message.startswith("Too many failed sign-ins for this account. Try again in ")
    assert "computer you have signed in on before" in message and "ask your teacher" in message
    # Ada's own browser is not slowed by the guesser, from the same address...
    for _ in range(3):
        assert adas_laptop.login("ada", PASSWORD).status_code == 200
    # ...and signing in there does not give the guesser a fresh start.
    assert guesser.login("ada", PASSWORD).status_code == 429
    assert server.client().login("ada", PASSWORD).status_code == 429  # ada on a browser new to her
    assert server.client().login("bob", PASSWORD).status_code == 200  # a classmate, first time


def test_a_known_browser_guessing_is_slowed_on_its_own(start_server, fresh_db):
    # A device cookie is no key: a stolen laptop gets the same few free guesses.
    server = start_server(LOGIN_FAILURES_PER_USER=3)
    make_class(fresh_db, ["ada"])
    laptop = signed_in_before(server, "ada")
    codes = [laptop.login("ada", f"guess-{i}").status_code for i in range(6)]
    assert codes[:3] == [401] * 3 and set(codes[3:]) == {429}
    r = laptop.login("ada", PASSWORD)
    assert r.status_code == 429 and r.json()["throttled"] == "device"
    assert r.json()["message"].startswith("Too many failed sign-ins on this browser. Try again in ")
    # The laptop's failures are its own: ada elsewhere is not locked out.
    assert server.client().login("ada", PASSWORD).status_code == 200


def test_a_forged_or_borrowed_device_cookie_gives_no_exemption(start_server, fresh_db):
    server = start_server(LOGIN_FAILURES_PER_USER=2)
    make_class(fresh_db, ["ada", "bob"])
    adas = device_cookie(signed_in_before(server, "ada"))
    bobs = device_cookie(signed_in_before(server, "bob"))  # the guesser's own, honestly got
    guesser = server.client()
    while guesser.login("ada", "guess-guess").status_code != 429:
        pass
    _, nonce, mac = bobs.split(":")
    other_server = Devices("another-server-secret-" + "y" * 32).issue(None, "ada")
    forgeries = {
        "bob's cookie": bobs,
        "bob's token renamed to ada": f"ada:{nonce}:{mac}",
        "ada's name, a made-up mac": f"ada:{nonce}:{'A' * len(mac)}",
        "ada's token, mac cut short": adas[:-1],
        "signed by another server": other_server,
        "ada's token after eight valid ones of others": "~".join([bobs] * MAX_TOKENS + [adas]),
    }
    for what, cookie in forgeries.items():
        r = login_with_cookie(server, "ada", PASSWORD, cookie)
        assert r.status_code == 429 and r.json()["throttled"] == "account", (what, r.text)
    # Ada's own, among junk as a browser may keep it, is hers.
    assert login_with_cookie(server, "ada", PASSWORD, "~".join(["x:y:z"] * (MAX_TOKENS - 1) + [adas])).status_code == 200
    # Ada's cookie names ada only: it does not help bob's guesser either.
    bobs_guesser = server.client()
    while bobs_guesser.login("bob", "guess-guess").status_code != 429:
        pass
    assert login_with_cookie(server, "bob", PASSWORD, adas).status_code == 429


def test_one_browser_is_known_for_each_of_the_students_who_share_it(start_server, fresh_db):
    server = start_server(LOGIN_FAILURES_PER_USER=2)
    names = [f"pupil{n}" for n in range(MAX_TOKENS + 1)]
    make_class(fresh_db, names)
    shared = server.client()  # the classroom's computer
    for name in names:
        shared.login_ok(name, PASSWORD)
        shared.post("/api/logout")
    for name in names:  # every account attacked
        while server.client().login(name, "guess-guess").status_code != 429:
            pass
    # ... for long enough that no wait runs out while a busy machine gets through the names.
    sql(fresh_db, "UPDATE login_attempts SET blocked_until = now() + interval '10 minutes' WHERE username = ANY(%s)",
        names)
    answers = {name: shared.login(name, PASSWORD).status_code for name in names}
    # The last MAX_TOKENS to sign in there are known; the first has dropped out.
    assert answers == {names[0]: 429, **{name: 200 for name in names[1:]}}


# -- what a browser may send as its device cookie -----------------------------

def tokens(users):
    return st.builds(lambda user, nonce, mac: f"{user}:{nonce}:{mac}", st.sampled_from(users),
                     st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e), max_size=20),
                     st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e), max_size=50))


token_like = tokens(["ada", "bob", "", "ada\x00", "ADA", "ada "])
any_text = st.text(st.characters(exclude_categories=()), max_size=300)
cookies = st.one_of(any_text, st.lists(token_like, max_size=12).map("~".join),
                    st.just("~" * 5000), st.just("ada:" * 2000))


@given(cookie=cookies, username=st.sampled_from(["ada", "bob", "x"]))
@settings(max_examples=500, deadline=None, derandomize=True, database=None)
def test_no_cookie_a_browser_can_make_up_is_trusted_or_breaks_the_parser(cookie, username):
    devices = Devices("the-servers-secret-" + "z" * 32)
    assert devices.trusted(cookie, username) is None
    fresh = devices.issue(cookie, username)  # garbage is dropped, never kept
    assert fresh.count("~") == 0 and devices.trusted(fresh, username) is not None


# What a client can put in a Cookie header that reaches the handler: no
# control characters (Tornado refuses those itself, 400), and no ';', which
# would start another cookie (an _xsrf of its own, say).
header_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xff, blacklist_characters=";\x7f"),
                      max_size=200)


@pytest.fixture
def locked_out_ada(start_server, fresh_db):
    server = start_server(processes=2, LOGIN_FAILURES_PER_USER=2)
    make_class(fresh_db, ["ada"])
    sql(fresh_db, "INSERT INTO login_attempts (username, failures, last_at, blocked_until) "
                  "VALUES ('ada', 50, now(), now() + interval '1 hour')")
    session = requests.Session()
    session.get(server.url + "/api/me", timeout=10)
    return server, session.cookies["_xsrf"]


@given(value=st.one_of(header_text, st.lists(tokens(["ada", "bob", "", "ADA"]), max_size=10).map("~".join)))
@fuzz
def test_garbage_device_cookies_over_http_get_the_throttled_answer_never_a_500(locked_out_ada, value):
    server, xsrf = locked_out_ada
    r = requests.post(server.url + "/api/login", timeout=30, json={"username": "ada", "password": PASSWORD},
                      headers={"X-XSRFToken": xsrf, "Cookie": f"_xsrf={xsrf}; {COOKIE}={value}".encode("latin-1")})
    assert r.status_code == 429 and r.json()["error"] == "too_many_attempts", (value, r.status_code, r.text)
