"""Logging in, sessions, throttling and XSRF against the real server:
whatever worker answers, the outcome is the same."""
import re
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import People
from tests.helpers import create_user, on_each_worker, sql
from loadtest.harness import ADMIN_PASSWORD


@pytest.fixture
def dsn(server):
    return server.env["DATABASE_URL"]


def sessions_of(dsn, username):
    return sql(dsn, "SELECT count(*) FROM sessions s JOIN users u ON u.id = s.user_id WHERE u.username = %s",
               username)[0][0]


def metric(client, line_start):
    """The value of the metric line that starts so, 0 when there is none yet."""
    found = re.search("^" + re.escape(line_start) + r" (\S+)$", client.get("/metrics").text, re.M)
    return float(found.group(1)) if found else 0.0


def test_every_response_names_the_worker_that_answered(server2):
    client = server2.client()
    for path in ("/healthz", "/api/me", "/no/such/page", "/metrics"):
        r = client.get(path)
        assert int(r.headers["X-Worker-Pid"]) in server2.pids


def test_login_sets_a_protected_cookie_and_me_answers(server):
    client = server.client()
    r = client.login("admin", ADMIN_PASSWORD)
    assert r.status_code == 200, r.text
    assert r.json()["user"] == {"username": "admin", "display_name": "Administrator", "role": "admin"}
    cookie = r.headers["Set-Cookie"]
    assert "pyclassroom_session=" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert "Secure" not in cookie  # plain HTTP here; HTTPS adds it
    assert client.get("/api/me").json()["user"]["username"] == "admin"


def test_session_from_one_worker_is_honoured_by_every_worker_and_logout_by_all(server2):
    client = People(server2).student("ada")
    cookies = client.http.cookies.get_dict()
    for pid, r in on_each_worker(server2, "/api/me", cookies=cookies).items():
        assert r.status_code == 200 and r.json()["user"]["username"] == client.username, pid
    assert client.post("/api/logout").status_code == 200
    # The other worker hears of the logout by NOTIFY, milliseconds later
    # (test_session_revocation holds it to a second); this only catches a hang.
    deadline = time.monotonic() + 10
    while True:
        answers = on_each_worker(server2, "/api/me", cookies=cookies)
        if all(r.status_code == 401 for r in answers.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for pid, r in answers.items():
        assert r.status_code == 401 and r.json()["error"] == "session_invalid", pid


def test_wrong_password_and_unknown_user_get_the_same_answer(server, people, dsn):
    ada = people.student("ada", log_in=False)
    client = server.client()
    wrong = client.login(ada.username, "not-her-password")
    unknown = client.login("nobody-here", "whatever-pass")
    assert wrong.status_code == unknown.status_code == 401
    assert wrong.json() == unknown.json() == {"error": "invalid_credentials",
                                              "message": "Wrong username or password."}
    assert sessions_of(dsn, ada.username) == 0


def test_deactivated_user_cannot_log_in_and_loses_open_sessions(server, people, dsn):
    from tests.conftest import PASSWORD
    grace = people.student("grace")
    sql(dsn, "UPDATE users SET active = false WHERE username = %s", grace.username)
    assert grace.get("/api/me").status_code == 401
    r = server.client().login(grace.username, PASSWORD)
    assert r.status_code == 403 and r.json()["error"] == "account_deactivated"
    # A wrong password still gets the answer that reveals nothing.
    assert server.client().login(grace.username, "wrong-password").json()["error"] == "invalid_credentials"


def test_failed_logins_are_throttled_across_workers(start_server, fresh_db):
    server = start_server(processes=2, LOGIN_FAILURES_PER_USER=3, LOGIN_THROTTLE_WINDOW=60)
    create_user(fresh_db, "alan", "alan-password-1")
    answered_by = set()
    for _ in range(40):  # new connections land on either worker
        c = server.client()
        r = c.login("alan", "bad-guess")
        answered_by.add(int(r.headers["X-Worker-Pid"]))
        if r.status_code == 429:
            break
        assert r.status_code == 401
    assert r.status_code == 429, r.text
    assert r.json()["error"] == "too_many_attempts"
    assert 1 <= int(r.headers["Retry-After"]) <= 60
    # While alan's account waits, every worker refuses it, even with the right password.
    sql(fresh_db, "UPDATE login_attempts SET blocked_until = now() + interval '1 minute' WHERE username = 'alan'")
    statuses = {}
    with ThreadPoolExecutor(8) as pool:  # requests at once: the kernel hands them to both workers
        for _ in range(20):
            for r in pool.map(lambda _: server.client().login("alan", "alan-password-1"), range(8)):
                statuses.setdefault(int(r.headers["X-Worker-Pid"]), set()).add(r.status_code)
            if len(statuses) == 2:
                break
    assert len(statuses) == 2 and all(codes == {429} for codes in statuses.values()), statuses
    # Another user from the same address is not locked out by alan's failures.
    create_user(fresh_db, "ada", "ada-password-1")
    assert server.client().login("ada", "ada-password-1").status_code == 200


def test_throttle_per_address_covers_many_usernames(start_server, fresh_db):
    server = start_server(LOGIN_FAILURES_PER_ADDRESS=4, LOGIN_FAILURES_PER_USER=100)
    for i in range(6):
        create_user(fresh_db, f"user{i}", f"user-password-{i}")
    codes = [server.client().login(f"user{i}", "guess-guess").status_code for i in range(6)]
    assert codes[:4] == [401] * 4 and codes[4:] == [429, 429]


def test_state_changes_need_the_xsrf_header(server):
    client = server.client()
    r = client.post("/api/login", xsrf=False, json={"username": "admin", "password": ADMIN_PASSWORD})
    assert r.status_code == 403 and r.json()["error"] == "xsrf_missing"
    client.xsrf()
    r = client.post("/api/login", headers={"X-XSRFToken": "2|00000000|" + "0" * 32 + "|1700000000"},
                    json={"username": "admin", "password": ADMIN_PASSWORD})
    assert r.status_code == 403 and r.json()["error"] == "xsrf_invalid"
    assert "pyclassroom_session" not in client.http.cookies


def test_any_api_get_sets_the_xsrf_cookie(server):
    client = server.client()
    r = client.get("/api/me")
    assert r.status_code == 401 and "_xsrf" in client.http.cookies
    assert "SameSite=Lax" in r.headers["Set-Cookie"]


def test_expired_session_is_refused_with_its_own_code(people, dsn):
    client = people.student("ada")
    sql(dsn, "UPDATE sessions SET expires_at = now() - interval '1 second' "
             "WHERE user_id = (SELECT id FROM users WHERE username = %s)", client.username)
    r = client.get("/api/me")
    assert r.status_code == 401 and r.json()["error"] == "session_expired"
    assert client.get("/api/me").json()["error"] in ("not_logged_in", "session_invalid")


def test_session_slides_forward_while_used(start_server, fresh_db):
    server = start_server(SESSION_TTL=600)
    client = server.client()
    client.login_ok("admin", ADMIN_PASSWORD)
    # Pretend the session is nearly over: the next request renews it.
    sql(fresh_db, "UPDATE sessions SET expires_at = now() + interval '60 seconds'")
    r = client.get("/api/me")
    assert r.status_code == 200 and "pyclassroom_session=" in r.headers.get("Set-Cookie", "")
    # The database learns it with the worker's next batch, within a second.
    deadline = time.monotonic() + 10  # a hang guard
    while True:
        (left,) = sql(fresh_db, "SELECT extract(epoch FROM expires_at - clock_timestamp()) FROM sessions")[0]
        if float(left) > 590 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert 590 < float(left) <= 600


def test_forged_session_cookie_is_refused(server):
    client = server.client()
    client.http.cookies.set("pyclassroom_session", "forged-token")
    r = client.get("/api/me")
    assert r.status_code == 401 and r.json()["error"] == "not_logged_in"


@pytest.mark.parametrize("body,headers,status,code", [
    (b"{not json", {"Content-Type": "application/json"}, 400, "malformed_json"),
    (b"[1, 2]", {"Content-Type": "application/json"}, 400, "malformed_json"),
    (b"\xff\xfe", {"Content-Type": "application/json"}, 400, "malformed_json"),
    (b'{"username": "admin"}', {"Content-Type": "application/json"}, 400, "missing_field"),
    (b'{"username": "admin", "password": 12}', {"Content-Type": "application/json"}, 400, "wrong_type"),
    (b'{"username": ["admin"], "password": "x"}', {"Content-Type": "application/json"}, 400, "wrong_type"),
    (b"username=admin", {"Content-Type": "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"),
    (b'{"username": "admin", "password": "' + b"x" * 5000 + b'"}', {"Content-Type": "application/json"},
     413, "body_too_large"),
])
def test_bad_bodies_get_a_clear_error_and_change_nothing(shared_servers, body, headers, status, code):
    server = shared_servers.get(MAX_BODY_BYTES=4096)  # only these tests use it: nothing else logs in
    r = server.client().post("/api/login", data=body, headers=headers)
    assert r.status_code == status, r.text
    assert r.json()["error"] == code and r.json()["message"]
    assert "Traceback" not in r.text
    assert sql(server.env["DATABASE_URL"], "SELECT count(*) FROM sessions") == [(0,)]
    assert sql(server.env["DATABASE_URL"], "SELECT count(*) FROM login_attempts") == [(0,)]


def test_change_password_needs_the_old_one_and_ends_other_sessions(server, dsn):
    create_user(dsn, "ada-pw", "first-password")
    laptop, phone = server.client(), server.client()
    laptop.login_ok("ada-pw", "first-password")
    phone.login_ok("ada-pw", "first-password")
    r = laptop.post("/api/password", json={"old_password": "wrong-one!", "new_password": "second-password"})
    assert r.status_code == 403 and r.json()["error"] == "wrong_password"
    r = laptop.post("/api/password", json={"old_password": "first-password", "new_password": "short"})
    assert r.status_code == 400 and r.json()["error"] == "weak_password"
    r = laptop.post("/api/password", json={"old_password": "first-password", "new_password": "second-password"})
    assert r.status_code == 200
    assert laptop.get("/api/me").status_code == 200
    assert phone.get("/api/me").status_code == 401
    assert server.client().login("ada-pw", "first-password").status_code == 401
    assert server.client().login("ada-pw", "second-password").status_code == 200


def test_health_readiness_and_metrics(server):
    client = server.client()
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    counted = ('pyclassroom_http_requests_total{method="POST",route="/api/login",status="401"}',
               'pyclassroom_logins_total{outcome="invalid_credentials"}')
    before = [metric(client, line) for line in counted]
    client.login("admin", "wrong-password")
    assert [metric(client, line) for line in counted] == [b + 1 for b in before]
    text = client.get("/metrics").text
    assert f"pyclassroom_workers {float(len(server.pids))}" in text
    assert "pyclassroom_db_pool_size" in text


def test_status_is_for_admins_only(server, people):
    teacher = people.teacher("teach")
    assert teacher.get("/api/status").status_code == 403
    assert server.client().get("/api/status").status_code == 401
    admin = server.client()
    admin.login_ok("admin", ADMIN_PASSWORD)
    status = admin.get("/api/status").json()
    assert sorted(status["worker_pids"]) == sorted(server.pids)
    assert status["processes"] == len(server.pids)
    assert status["mode"] == ("single process" if len(server.pids) == 1 else "multi-process")
    assert status["counts"]["accounts"] >= 2
    assert status["settings"]["COOKIE_SECRET"] == "********"
    assert status["sandbox"] in ("local", "docker", "process")
    assert status["runs"] == {"active_runs": 0, "queued_runs": 0, "connected_ides": 0}
    assert status["requests"]["count"] >= 4
    p = status["requests"]["latency_ms"]
    assert 0 < p["p50"] <= p["p95"] <= p["p99"]


def test_sign_in_page_is_served_fresh(server):
    r = server.client().get("/")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
    assert r.headers["Cache-Control"] == "no-cache"
    assert 'id="login"' in r.text and "/api/login" in r.text


def test_cookie_is_secure_behind_an_https_proxy(start_server):
    server = start_server(TRUST_PROXY=1)
    client = server.client()
    r = client.post("/api/login", headers={"X-Forwarded-Proto": "https"},
                    json={"username": "admin", "password": ADMIN_PASSWORD})
    assert r.status_code == 200 and "Secure" in r.headers["Set-Cookie"]


def test_server_timing_names_where_a_login_spent_its_time(server):
    r = server.client().login("admin", ADMIN_PASSWORD)
    parts = dict(p.split(";dur=") for p in r.headers["Server-Timing"].split(", "))
    assert {"hash_wait", "hash", "db", "app", "total"} <= set(parts)
    assert float(parts["hash"]) > 1  # argon2id takes milliseconds
    assert float(parts["total"]) >= float(parts["hash"]) + float(parts["db"])


def test_perf_check_is_off_unless_enabled(start_server):
    off = start_server()
    assert off.client().get("/sys_perf_check?ms=5").status_code == 404
    on = start_server(database_url=off.env["DATABASE_URL"], PERF_CHECK=1)
    r = on.client().get("/sys_perf_check?ms=20")
    assert r.status_code == 200 and r.json()["ms"] == 20 and r.json()["spins"] > 0
    assert on.client().get("/sys_perf_check?ms=5000").status_code == 400
    assert on.client().get("/sys_perf_check?ms=x").status_code == 400


def test_behind_a_proxy_only_the_last_forwarded_address_counts(start_server, fresh_db):
    server = start_server(TRUST_PROXY=1, LOGIN_FAILURES_PER_ADDRESS=2, LOGIN_FAILURES_PER_USER=100)
    for i in (0, 1, 2, 3, 9):  # real accounts: names that do not exist bar no address
        create_user(fresh_db, f"u{i}", f"u{i}-password-x")
    # A client rotating spoofed X-Real-Ip / leading X-Forwarded-For values is
    # still counted under the address the proxy appended.
    codes = []
    for i in range(4):
        r = server.client().post("/api/login", headers={
            "X-Real-Ip": f"10.9.9.{i}", "X-Forwarded-For": f"10.8.8.{i}, 192.0.2.7"},
            json={"username": f"u{i}", "password": "wrong-password"})
        codes.append(r.status_code)
    assert codes == [401, 401, 429, 429]
    other = server.client().post("/api/login", headers={"X-Forwarded-For": "192.0.2.8"},
                                 json={"username": "u9", "password": "wrong-password"})
    assert other.status_code == 401
