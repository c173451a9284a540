"""Process modes as an operator meets them: the start-up line, restarts of
dead workers, graceful SIGTERM under load, migrations with many workers,
several instances on one database, and the embedded PostgreSQL."""
import os
import re
import signal
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import requests

from tests.helpers import on_each_worker, sql
from loadtest.harness import ADMIN_PASSWORD, ServerProcess


def test_startup_line_states_the_mode(start_server):
    one = start_server(processes=1)
    assert re.search(r"serving http://127\.0\.0\.1:\d+ with 1 process \(pid \d+\)", one.output())
    assert one.pids == [one.proc.pid]
    two = start_server(processes=2, database_url=one.env["DATABASE_URL"])
    line = two.wait_for_line(r"serving .* with 2 worker processes")
    assert len(two.pids) == 2 and two.proc.pid not in two.pids, line


def test_dead_worker_is_restarted_and_service_continues(start_server):
    server = start_server(processes=2)
    victim = server.pids[0]
    os.kill(victim, signal.SIGKILL)
    line = server.wait_for_line(rf"pid {victim}\) died with signal 9; restarted as pid \d+")
    new_pid = int(re.search(r"restarted as pid (\d+)", line).group(1))
    deadline = time.monotonic() + 30
    seen = set()
    with ThreadPoolExecutor(8) as pool:  # at once, so the kernel hands requests to both workers
        while time.monotonic() < deadline and new_pid not in seen:
            for r in pool.map(lambda _: requests.get(server.url + "/healthz", timeout=10), range(8)):
                assert r.status_code == 200
                seen.add(int(r.headers["X-Worker-Pid"]))
    assert new_pid in seen and victim not in seen


def test_sigterm_during_a_burst_completes_or_refuses_every_request_and_exits_0(start_server):
    server = start_server(processes=2, SHUTDOWN_TIMEOUT=5)
    client = server.client()
    client.login_ok("admin", ADMIN_PASSWORD)
    cookies = client.http.cookies.get_dict()
    outcomes, bad = [], []
    stop = threading.Event()

    def hammer():
        while not stop.is_set():
            try:
                r = requests.get(server.url + "/api/me", cookies=cookies, timeout=15)
            except requests.ConnectionError:
                outcomes.append("refused")  # connection refused or reset before an answer
                continue
            if r.status_code == 200 and r.json()["user"]["username"] == "admin":
                outcomes.append("ok")
            else:
                bad.append((r.status_code, r.text[:200]))

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    ok_before = outcomes.count("ok")
    server.signal(signal.SIGTERM)
    code = server.proc.wait(timeout=60)  # a hang guard: the drain itself is bounded by SHUTDOWN_TIMEOUT
    stop.set()
    for t in threads:
        t.join(20)
    assert code == 0, server.output()
    assert ok_before > 10
    assert not bad, bad[:5]
    assert "Traceback" not in server.output()


def test_sigint_also_stops_gracefully(start_server):
    server = start_server(processes=1)
    server.signal(signal.SIGINT)
    assert server.proc.wait(timeout=30) == 0
    assert "stopped" in server.output()


def test_four_workers_starting_together_apply_migrations_once(start_server, fresh_db):
    server = start_server(processes=4)
    assert len(server.pids) == 4
    applied = [line for line in server.lines if "applied migration" in line]
    assert len(applied) == len(sql(fresh_db, "SELECT version FROM schema_migrations")) > 0
    assert len({re.search(r"\[(\d+)\]", line).group(1) for line in applied}) == 1
    assert sql(fresh_db, "SELECT count(*) FROM users WHERE username = 'admin'") == [(1,)]
    assert server.output().count("Accounts created on this empty database") == 1


def test_two_instances_on_one_database_and_storage_act_as_one_service(start_server, fresh_db, data_dir):
    storage = os.path.join(data_dir, "shared-storage")
    a = start_server(processes=2, STORAGE_ROOT=storage, data_dir=os.path.join(data_dir, "a"))
    b = start_server(processes=2, STORAGE_ROOT=storage, data_dir=os.path.join(data_dir, "b"))
    assert a.url != b.url
    client = a.client()
    client.login_ok("admin", ADMIN_PASSWORD)
    cookies = client.http.cookies.get_dict()
    for r in on_each_worker(b, "/api/me", cookies=cookies).values():
        assert r.status_code == 200 and r.json()["user"]["username"] == "admin"
    other = b.client()
    other.http.cookies.update(cookies)
    assert other.post("/api/logout").status_code == 200
    for r in on_each_worker(a, "/api/me", cookies=cookies).values():
        assert r.status_code == 401


def test_embedded_postgres_is_created_reused_and_stopped(tmp_path):
    data_dir = tempfile.mkdtemp(prefix="pyclassroom-embedded-")
    os.chmod(data_dir, 0o755)  # PostgreSQL runs as 'postgres' when the tests run as root
    pidfile = os.path.join(data_dir, "postgres", "cluster", "postmaster.pid")
    try:
        first = ServerProcess(processes=2, database_url="", data_dir=data_dir,
                              env={"ADMIN_PASSWORD": "", "DEMO": "1"}).start()
        out = first.output()
        admin_pw = re.search(r"^\s+admin\s+(\S+)\s+\(admin\)", out, re.M).group(1)
        assert re.search(r"^\s+student1\s+\S+\s+\(student\)", out, re.M)
        assert first.client().login("admin", admin_pw).status_code == 200
        assert os.path.exists(pidfile)
        assert first.stop() == 0
        assert not os.path.exists(pidfile), "PostgreSQL still running after the server stopped"

        second = ServerProcess(processes=1, database_url="", data_dir=data_dir,
                               env={"ADMIN_PASSWORD": ""}).start()
        assert "Accounts created" not in second.output()
        assert second.client().login("admin", admin_pw).status_code == 200
        assert second.stop() == 0
        assert not os.path.exists(pidfile)
    finally:
        for s in ("first", "second"):
            if s in locals():
                locals()[s].stop()
        import shutil
        shutil.rmtree(data_dir, ignore_errors=True)


def test_as_root_the_server_outranks_the_sandboxes_for_cpu(start_server):
    if os.geteuid() != 0:
        import pytest
        pytest.skip("needs root")
    server = start_server(processes=2)
    for pid in server.pids:
        try:
            with open(f"/proc/{pid}/autogroup") as f:
                group = f.read().strip()
        except FileNotFoundError:
            group = ""  # a kernel without autogroup scheduling
        if group:  # a session of its own: the group's weight is what counts
            assert group.endswith("nice -15"), group
        else:  # the default group (started by init, as CI runners do): task by task
            assert os.getpriority(os.PRIO_PROCESS, pid) == -15
