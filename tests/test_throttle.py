"""Login throttling as issue 11's finding 7 attacked it, against the real
server: concurrent guesses on one account, a class behind one school
address, a student guessing classmates' passwords, a sprayer. Device
cookies (issue 20) have their own tests: test_device_cookies.py."""
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from server.accounts.throttle import address_key
from tests.helpers import create_user, sql


def at_once(server, attempts):
    """Send every (username, password, headers) login at the same moment,
    each from a new client; returns the answers in order."""
    gate = threading.Barrier(len(attempts))

    def attempt(args):
        username, password, headers = args
        client = server.client()
        client.xsrf()
        gate.wait()
        return client.post("/api/login", headers=dict(headers), json={"username": username, "password": password})

    with ThreadPoolExecutor(len(attempts)) as pool:
        return list(pool.map(attempt, attempts))


def time_passes(dsn):
    """Every back-off ends now, as if its seconds had gone by."""
    sql(dsn, "UPDATE login_attempts SET blocked_until = now()")


def test_forty_concurrent_guesses_check_no_more_passwords_than_the_limit(start_server, fresh_db):
    server = start_server(processes=2)  # LOGIN_FAILURES_PER_USER=5
    create_user(fresh_db, "ada", "ada-password-1")
    answers = at_once(server, [("ada", f"guess-{i:04d}", {}) for i in range(40)])
    codes = Counter(r.status_code for r in answers)
    # A 401 is a password checked against the hash; a 429 was refused before that.
    assert codes == {401: 5, 429: 35}, codes
    assert all(r.json()["error"] == "too_many_attempts" and int(r.headers["Retry-After"]) >= 1
               for r in answers if r.status_code == 429)
    # Ada, who knows her password, gets in once the short back-off is over.
    time_passes(fresh_db)
    assert server.client().login("ada", "ada-password-1").status_code == 200


def test_each_failure_past_the_free_ones_doubles_the_wait_and_a_success_resets_it(start_server, fresh_db):
    server = start_server(LOGIN_FAILURES_PER_USER=2, LOGIN_THROTTLE_WINDOW=60)
    create_user(fresh_db, "ada", "ada-password-1")
    client = server.client()
    assert client.login("ada", "wrong-one-1").status_code == 401
    waits = []
    for _ in range(7):
        assert client.login("ada", "wrong-one-2").status_code == 401
        refused = client.login("ada", "ada-password-1")  # right, but too soon: not even checked
        assert refused.status_code == 429
        waits.append(int(refused.headers["Retry-After"]))
        time_passes(fresh_db)
    assert waits == [2, 4, 8, 16, 32, 60, 60], waits  # doubling, at most the window
    assert client.login("ada", "ada-password-1").status_code == 200
    # The success forgot the failures: two are free again.
    assert [client.login("ada", "wrong-one-3").status_code for _ in range(2)] == [401, 401]
    assert client.login("ada", "wrong-one-4").status_code == 429


def test_a_class_behind_one_address_logs_in_despite_everyones_typos(start_server, fresh_db):
    server = start_server(processes=2)  # the defaults a school runs with
    class_size = 60
    for n in range(class_size):
        create_user(fresh_db, f"pupil{n}", f"pupil-password-{n}")

    def arrive(n):
        client = server.client()
        typos = [client.login(f"pupil{n}", f"pupil-pasword-{n}").status_code for _ in range(2)]
        misspelt = client.login(f"pupl{n}", f"pupil-password-{n}").status_code
        return typos + [misspelt], client.login(f"pupil{n}", f"pupil-password-{n}").status_code

    with ThreadPoolExecutor(class_size) as pool:
        outcomes = list(pool.map(arrive, range(class_size)))
    # 180 failures from one address: every one told "wrong", every pupil then in.
    assert [wrong for wrong, _ in outcomes if wrong != [401, 401, 401]] == []
    assert [right for _, right in outcomes] == [200] * class_size


def test_one_students_failures_do_not_lock_out_her_classmates(start_server, fresh_db):
    # Scaled down: an address may fail on 10 names (a school runs with 100).
    server = start_server(LOGIN_FAILURES_PER_ADDRESS=10)
    for name in ("mallory", "ada", "alan", "grace", "edsger", "barbara"):
        create_user(fresh_db, name, f"{name}-password")
    mallory = server.client()
    codes = [mallory.login("mallory", f"forgot-it-{i}").status_code for i in range(20)]
    assert codes[:5] == [401] * 5 and set(codes[5:]) == {429}
    for victim in ("ada", "alan", "grace", "edsger"):  # three guesses at four classmates'
        assert [mallory.login(victim, f"guess-{i}").status_code for i in range(3)] == [401] * 3
    # 32 attempts and 17 failures from this address, on 5 names: the class carries on,
    # the four whose passwords were guessed at included.
    for name in ("barbara", "ada", "alan", "grace", "edsger"):
        r = server.client().login(name, f"{name}-password")
        assert r.status_code == 200, (name, r.text)


def test_spraying_made_up_names_locks_no_one_out_but_spraying_real_accounts_is_stopped(start_server, fresh_db):
    server = start_server(processes=2, LOGIN_FAILURES_PER_ADDRESS=10, TRUST_PROXY=1)
    for n in range(12):
        create_user(fresh_db, f"pupil{n}", f"pupil-password-{n}")
    sprayer = {"X-Forwarded-For": "203.0.113.9"}
    made_up = [(f"made-up-{i}", "password1", sprayer) for i in range(30)]
    assert Counter(r.status_code for r in at_once(server, made_up)) == {401: 30}
    # Names that do not exist bar no one: a first sign-in from that address works.
    r = server.client().post("/api/login", headers=dict(sprayer),
                             json={"username": "pupil11", "password": "pupil-password-11"})
    assert r.status_code == 200, r.text
    # A password sprayed over the class list is: 10 accounts, then no new name...
    real = [(f"pupil{n}", "password1", sprayer) for n in range(11)]
    codes = Counter(r.status_code for r in at_once(server, real))
    assert codes == {401: 10, 429: 1}, codes
    r = server.client().post("/api/login", headers=dict(sprayer), json={"username": "ada", "password": "password1"})
    assert r.status_code == 429 and r.json()["throttled"] == "network" and int(r.headers["Retry-After"]) >= 1
    # ...while another address is untouched.
    r = server.client().post("/api/login", headers={"X-Forwarded-For": "198.51.100.4"},
                             json={"username": "pupil10", "password": "pupil-password-10"})
    assert r.status_code == 200
    assert sql(fresh_db, "SELECT account_exists, count(*) FROM login_address_names "
                         "WHERE address = '203.0.113.9' GROUP BY 1 ORDER BY 1") == [(False, 10), (True, 10)]


def test_a_malformed_username_is_refused_without_a_check_or_a_count(start_server, fresh_db):
    server = start_server()
    for name in ("bob\x00", "ada lovelace", "../etc", "ada!", "\u202eada"):
        r = server.client().login(name, "whatever-password")
        assert r.status_code == 401 and r.json()["error"] == "invalid_credentials", name
    assert sql(fresh_db, "SELECT count(*) FROM login_attempts") == [(0,)]


@pytest.mark.parametrize("address,key", [
    ("192.0.2.7", "192.0.2.7"),
    ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
    ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
    ("::ffff:192.0.2.7", "192.0.2.7"),
    ("not an address", "not an address"),
])
def test_an_ipv6_client_is_counted_by_its_network(address, key):
    assert address_key(address) == key
