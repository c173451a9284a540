"""Sessions remembered by the workers, attacked: every worker answers a
student's session from memory (SESSION_CACHE_SECONDS, long here, so that a
worker that was not told would keep serving it for a minute), then the
session is revoked on one worker, another instance or the command line, or
while a worker cannot hear about it. Every worker refuses it within a
second or so (a hang guard of several seconds, not a timing assert), and
renewal and expiry still hold."""
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest
import requests

from tests.conftest import PASSWORD, People
from tests.helpers import sql
from loadtest.harness import ADMIN_PASSWORD, ROOT

REMEMBER = 60  # SESSION_CACHE_SECONDS of these servers: far longer than any guard below
GUARD = 6.0  # seconds; a revoked session still served after this is a failure


def worker_connections(server, cookies, rounds=60):
    """{pid: requests.Session kept alive to that worker} for every worker of
    `server`, each having answered /api/me with `cookies` once (so that
    worker now remembers the session). The kernel need not spread new
    connections over idle workers (on a busy machine it may hand them all
    to one), so each try first holds every worker found so far busy
    (/sys_perf_check, PERF_CHECK=1, sent on its own kept-alive connection)
    until its loop is seen spinning: only a worker not found yet is free to
    take the next connection."""
    found = {}
    for _ in range(rounds):
        blockers = [Blocker(server.url, pid, s) for pid, s in found.items()]
        for b in blockers:
            b.wait_spinning()
        s = requests.Session()
        r = s.get(server.url + "/api/me", cookies=cookies, timeout=30)
        for b in blockers:
            b.join()
            if b.answered_by != b.pid:  # its connection was dropped and made anew elsewhere: find it again
                found.pop(b.pid).close()
        assert r.status_code == 200, r.text
        pid = int(r.headers["X-Worker-Pid"])
        if pid in found:
            s.close()
        else:
            found[pid] = s
        if len(found) == len(server.pids):
            return found
    raise AssertionError(f"answers came only from {sorted(found)}, workers {server.pids}")


class Blocker(threading.Thread):
    """Holds worker `pid`'s loop busy for 300 ms of CPU, through `session`,
    a connection that worker accepted."""

    def __init__(self, url, pid, session):
        super().__init__(daemon=True)
        self.url, self.pid, self.session, self.answered_by = url, pid, session, None
        self.cpu = psutil.Process(pid).cpu_times()
        self.start()

    def run(self):
        r = self.session.get(self.url + "/sys_perf_check?ms=300", timeout=30)
        assert r.status_code == 200, r.text
        self.answered_by = r.json()["pid"]

    def wait_spinning(self, guard=5.0):
        """Until the worker has spent 30 ms of CPU since (it is in the loop,
        or the call is over); a hang guard, then on anyway (a wasted try)."""
        before = sum(self.cpu[:2])
        deadline = time.monotonic() + guard
        while self.is_alive() and time.monotonic() < deadline:
            if sum(psutil.Process(self.pid).cpu_times()[:2]) - before >= 0.03:
                return
            time.sleep(0.005)


def refused_everywhere(connections, url, cookies, guard=GUARD):
    """Poll every worker until it refuses the session; {pid: seconds it
    took} (AssertionError naming a worker still serving it after `guard`)."""
    started = time.monotonic()
    took = {}
    while len(took) < len(connections):
        for pid, s in connections.items():
            if pid in took:
                continue
            r = s.get(url + "/api/me", cookies=cookies, timeout=30)
            assert int(r.headers["X-Worker-Pid"]) == pid
            if r.status_code == 401:
                assert r.json()["error"] == "session_invalid", r.text
                took[pid] = round(time.monotonic() - started, 3)
        elapsed = time.monotonic() - started
        assert elapsed < guard, f"still served by {set(connections) - set(took)} after {elapsed:.1f} s"  # hang guard
        time.sleep(0.02)
    print("refused after (s):", took)
    return took


@pytest.fixture
def remembering(shared_servers):
    """Two workers that remember sessions for a minute."""
    return shared_servers.get(processes=2, SESSION_CACHE_SECONDS=REMEMBER, PERF_CHECK="1")


def revoke_by_logout(server, student, admin):
    assert student.post("/api/logout").status_code == 200


def revoke_by_deactivation(server, student, admin):
    r = admin.post(f"/api/admin/users/{student.username}/active", json={"active": False})
    assert r.status_code == 200, r.text


def revoke_by_reset(server, student, admin):
    r = admin.post(f"/api/admin/users/{student.username}/password", json={})
    assert r.status_code == 200, r.text


def revoke_by_password_change_elsewhere(server, student, admin):
    laptop = server.client()
    laptop.login_ok(student.username, PASSWORD)
    r = laptop.post("/api/password", json={"old_password": PASSWORD, "new_password": "a-new-password-1"})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("revoke", [revoke_by_logout, revoke_by_deactivation, revoke_by_reset,
                                    revoke_by_password_change_elsewhere])
def test_a_revoked_session_is_refused_by_every_worker_at_once(remembering, revoke):
    people = People(remembering)
    student, admin = people.student("ada"), people.admin("boss")
    cookies = student.http.cookies.get_dict()
    connections = worker_connections(remembering, cookies)
    revoke(remembering, student, admin)
    refused_everywhere(connections, remembering.url, cookies)


def test_a_session_revoked_on_another_instance_or_by_the_cli_is_refused_here(start_server, fresh_db, data_dir):
    a = start_server(processes=2, SESSION_CACHE_SECONDS=REMEMBER, PERF_CHECK="1")
    b = start_server(processes=2, PERF_CHECK="1", data_dir=data_dir + "/b", STORAGE_ROOT=data_dir + "/storage",
                     SESSION_CACHE_SECONDS=REMEMBER)
    student = People(a).student("ada")
    cookies = student.http.cookies.get_dict()
    on_b = worker_connections(b, cookies)
    assert student.post("/api/logout").status_code == 200  # through a
    refused_everywhere(on_b, b.url, cookies)

    # An admin's command line, on no server at all.
    grace = People(b).student("grace")
    cookies = grace.http.cookies.get_dict()
    on_a, on_b = worker_connections(a, cookies), worker_connections(b, cookies)
    done = subprocess.run([sys.executable, "-m", "server.manage", "deactivate", grace.username],
                          cwd=ROOT, env=a.env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    refused_everywhere(on_a, a.url, cookies)
    refused_everywhere(on_b, b.url, cookies)


def listen_backends(dsn):
    """The LISTEN connections of the servers on this database."""
    return [pid for (pid,) in sql(dsn, "SELECT pid FROM pg_stat_activity WHERE application_name = %s "
                                       "AND datname = current_database()", "pyclassroom-listen")]


def wait_for(condition, what, guard=30):
    deadline = time.monotonic() + guard
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_revocation_sent_while_a_worker_cannot_hear_it_still_ends_the_session(start_server, fresh_db):
    """The workers' LISTEN connections freeze (their backends stopped, as a
    network that drops packets would): the logout's notification cannot
    reach them. They must notice, forget what they remember, and refuse."""
    server = start_server(processes=2, SESSION_CACHE_SECONDS=REMEMBER, PERF_CHECK="1")
    wait_for(lambda: len(listen_backends(fresh_db)) == 2, "each worker listens")
    student = People(server).student("ada")
    cookies = student.http.cookies.get_dict()
    connections = worker_connections(server, cookies)
    frozen = [psutil.Process(pid) for pid in listen_backends(fresh_db)]
    for p in frozen:
        p.send_signal(signal.SIGSTOP)
    try:
        assert student.post("/api/logout").status_code == 200
        refused_everywhere(connections, server.url, cookies)
    finally:
        for p in frozen:
            p.send_signal(signal.SIGCONT)
    # They listen again (new connections) and are told of the next revocation.
    wait_for(lambda: len(set(listen_backends(fresh_db)) - {p.pid for p in frozen}) == 2, "each listens again")
    grace = People(server).student("grace")
    cookies = grace.http.cookies.get_dict()
    connections = worker_connections(server, cookies)
    assert grace.post("/api/logout").status_code == 200
    refused_everywhere(connections, server.url, cookies)


def test_workers_listen_again_after_their_connection_is_killed(start_server, fresh_db):
    server = start_server(processes=2, SESSION_CACHE_SECONDS=REMEMBER, PERF_CHECK="1")
    wait_for(lambda: len(listen_backends(fresh_db)) == 2, "each worker listens")
    killed = set(listen_backends(fresh_db))
    for pid in killed:
        sql(fresh_db, "SELECT pg_terminate_backend(%s)", pid)
    wait_for(lambda: len(set(listen_backends(fresh_db)) - killed) == 2, "each worker listens again")
    student = People(server).student("ada")
    cookies = student.http.cookies.get_dict()
    connections = worker_connections(server, cookies)
    assert student.post("/api/logout").status_code == 200
    refused_everywhere(connections, server.url, cookies)
    assert server.output().count("notifications arrive again") == 2


def test_a_remembered_session_still_expires_and_a_used_one_slides(start_server, fresh_db):
    server = start_server(SESSION_TTL=6, SESSION_CACHE_SECONDS=REMEMBER)
    busy, idle = server.client(), server.client()
    busy.login_ok("admin", ADMIN_PASSWORD)
    idle.login_ok("admin", ADMIN_PASSWORD)
    assert idle.get("/api/me").status_code == 200  # remembered from here on
    # Sent as it was, as a browser whose clock is wrong would (the cookie has expired too).
    idle_cookies = idle.http.cookies.get_dict()
    deadline = time.monotonic() + 9  # half as long again as the session lives
    while time.monotonic() < deadline:
        r = busy.get("/api/me")
        assert r.status_code == 200, r.text
        time.sleep(0.3)
    r = requests.get(server.url + "/api/me", cookies=idle_cookies, timeout=30)
    assert r.status_code == 401 and r.json()["error"] == "session_expired"


def test_the_last_saves_and_renewals_are_written_when_the_server_stops(start_server, fresh_db):
    server = start_server(SESSION_TTL=600)
    ada = People(server).student("ada")
    sql(fresh_db, "UPDATE sessions SET expires_at = now() + interval '60 seconds'")
    r = ada.request("PUT", "/api/files/home/last.py", data=b"print('bye')\n", headers={"If-Match": "*"})
    assert r.status_code == 200 and "pyclassroom_session=" in r.headers.get("Set-Cookie", "")
    assert server.stop() == 0  # at once: before the worker's next flush, as often as not
    [(saved, left)] = sql(fresh_db, "SELECT u.last_save_at IS NOT NULL, extract(epoch FROM s.expires_at - now()) "
                                    "FROM users u JOIN sessions s ON s.user_id = u.id WHERE u.username = %s",
                          ada.username)
    assert saved and float(left) > 500
