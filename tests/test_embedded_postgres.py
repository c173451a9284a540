"""The embedded PostgreSQL after a crash: a postmaster.pid left behind whose
pid now names another live process (a reused pid) or a zombie is not
trusted, that process is never signalled, and the database starts."""
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time

import psutil
import psycopg2
import pytest

from server.embedded_postgres import EmbeddedPostgres


@pytest.fixture
def data_dir():
    # Not under tmp_path (0700): as root PostgreSQL runs as 'postgres' and must traverse it.
    path = tempfile.mkdtemp(prefix="pyclassroom-test-epg-")
    os.chmod(path, 0o755)
    yield path
    pg = EmbeddedPostgres(path)
    if os.path.exists(pg.pidfile):
        pg.start()  # whatever a failed test left running: adopt it, then stop it
        pg.stop()
    shutil.rmtree(path, ignore_errors=True)


def as_cluster_owner():
    """Popen arguments that run a process as the cluster's owner (the
    'postgres' user when we are root): then the pid passes every check
    pg_ctl makes (kill(pid, 0) succeeds), as a reused pid would."""
    if os.geteuid() != 0:
        return {}
    owner = pwd.getpwnam("postgres")
    return {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}


@pytest.fixture
def bystander():
    """An unrelated live process of the cluster's owner, as a reused pid would be."""
    proc = subprocess.Popen(["sleep", "600"], **as_cluster_owner())
    yield proc
    proc.kill()
    proc.wait()


def crash(pg):
    """Kill the postmaster as a power cut would: postmaster.pid stays behind."""
    pid = pg.postmaster()
    assert pid
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while pg.postmaster() and time.monotonic() < deadline:
        time.sleep(0.05)
    # Its backends notice the postmaster is gone and exit by themselves.
    while any(p.info["cwd"] == pg.pgdata for p in psutil.process_iter(["cwd"])) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.path.exists(pg.pidfile)


def point_pidfile_at(pg, pid):
    with open(pg.pidfile) as f:
        lines = f.read().splitlines(keepends=True)
    lines[0] = f"{pid}\n"
    with open(pg.pidfile, "w") as f:
        f.writelines(lines)


def answers(dsn):
    conn = psycopg2.connect(dsn, connect_timeout=10)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
            return cur.fetchone() == (1,)
    finally:
        conn.close()


def assert_untouched(proc):
    assert proc.poll() is None, f"the unrelated process was signalled (exit {proc.returncode})"
    assert psutil.Process(proc.pid).status() != psutil.STATUS_STOPPED


def test_a_pid_file_naming_another_live_process_is_neither_trusted_nor_signalled(data_dir, bystander):
    pg = EmbeddedPostgres(data_dir)
    pg.start()
    crash(pg)
    point_pidfile_at(pg, bystander.pid)
    assert pg.postmaster() is None
    pg.stop()  # pg_ctl stop would send SIGINT to the pid in the file
    assert_untouched(bystander)

    again = EmbeddedPostgres(data_dir)
    dsn = again.start()
    assert answers(dsn)
    assert again.postmaster() not in (None, bystander.pid)
    again.stop()
    assert not os.path.exists(again.pidfile)
    assert_untouched(bystander)


def test_a_pid_file_naming_a_zombie_is_not_trusted(data_dir):
    pg = EmbeddedPostgres(data_dir)
    pg.start()
    crash(pg)
    zombie = subprocess.Popen(["true"], **as_cluster_owner())  # exits; not reaped until wait(): a zombie
    try:
        while psutil.Process(zombie.pid).status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.02)
        point_pidfile_at(pg, zombie.pid)
        pg.stop()
        again = EmbeddedPostgres(data_dir)
        assert answers(again.start())
        again.stop()
        assert not os.path.exists(again.pidfile)
    finally:
        zombie.wait()


def test_a_running_cluster_of_ours_is_adopted_and_left_to_its_last_user(data_dir):
    first = EmbeddedPostgres(data_dir)
    dsn = first.start()
    pid = first.postmaster()
    second = EmbeddedPostgres(data_dir)
    assert second.start() == dsn
    assert second.postmaster() == pid  # adopted, not started twice
    second.stop()  # the first still uses it
    assert first.postmaster() == pid and answers(dsn)
    first.stop()
    assert first.postmaster() is None and not os.path.exists(first.pidfile)
