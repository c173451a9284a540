"""What a measurement or a test stands on: the real server as a subprocess,
a scratch PostgreSQL with a fresh database per server, and users with real
argon2id hashes. The tests (tests/conftest.py), the benchmarks and the load
test all start the server under test here.

Standard library, psycopg2 and the server's own code only: no HTTP client
(ServerProcess.client() loads it when asked).
"""
import asyncio
import collections
import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit, urlunsplit

import psycopg2

from server.accounts.passwords import hash_password
from server.embedded_postgres import EmbeddedPostgres

from .cli import SERVER_ROOT_VARIABLE, Aborted, say, uninterrupted
from .machine import tree_cpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ADMIN_PASSWORD = "admin-test-password"
COOKIE_SECRET = "test-cookie-secret-" + "x" * 32
SERVING_RE = re.compile(r"serving (http://\S+) with (\d+) (?:worker )?process(?:es)? \(pids? ([\d, ]+)\)")
START_TIMEOUT = 120.0  # the server prints its serving line within this (a hang guard)
STOP_TIMEOUT = 30.0
SETTLE_TIMEOUT = 60.0  # a fresh server goes quiet within this, or is measured anyway
SETTLE_STEP = 0.5


# -- the server under test -----------------------------------------------------------

def server_root():
    """The checkout the server under test runs from: LOADTEST_SERVER_ROOT
    (the tools' --server-root sets it), say a worktree of an older commit,
    to measure two versions with the same tools in one sitting; else this one."""
    return os.environ.get(SERVER_ROOT_VARIABLE) or ROOT


class Stoppable:
    """A subprocess in a session of its own (`proc`), stopped in order."""

    proc = None

    def until_serving(self, serving, timeout):
        """Whether `serving` (a threading.Event) was set within `timeout`; a
        process that exits before its serving line is told at once, not at
        the deadline."""
        deadline = time.monotonic() + timeout
        while not serving.wait(0.2) and self.proc.poll() is None and time.monotonic() < deadline:
            pass
        return serving.is_set()

    def stop(self, timeout=STOP_TIMEOUT):
        """SIGTERM and wait (then SIGKILL to it and its children); returns the exit code."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode if self.proc else None


class ServerProcess(Stoppable):
    """`python -m server` as a subprocess, on 127.0.0.1 and a free port,
    ready once it prints its serving line. `env` holds settings on top of
    this process's environment and the defaults below; `log` is where its
    output lines go (default: a list of them all; a tool that runs for
    long passes a bounded deque)."""

    def __init__(self, processes=1, database_url="", data_dir=None, env=None, log=None):
        self.processes = processes
        self.env = {**os.environ,
                    "TORNADO_PROCESSES": str(processes), "PORT": "0", "HOST": "127.0.0.1",
                    "DATABASE_URL": database_url, "DATA_DIR": data_dir, "ADMIN_PASSWORD": ADMIN_PASSWORD,
                    "COOKIE_SECRET": COOKIE_SECRET, "LOG_LEVEL": "INFO", "PYTHONUNBUFFERED": "1",
                    **{k: str(v) for k, v in (env or {}).items()}}
        self.lines = [] if log is None else log
        self.proc = None
        self.url = None
        self.pids = []
        self._lock = threading.Lock()  # the reader thread appends while others read
        self._serving = threading.Event()

    def start(self, timeout=START_TIMEOUT):
        # Its own session: a Ctrl-C on the terminal reaches only us, and we
        # stop the server in order (SIGTERM, then wait).
        self.proc = subprocess.Popen([sys.executable, "-m", "server"], cwd=server_root(), env=self.env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()
        if not self.until_serving(self._serving, timeout) or self.proc.poll() is not None:
            self.stop()
            raise Aborted("the server did not start:\n" + self.output())
        return self

    def _read(self):
        # Always drained, so a chatty server never blocks on a full pipe.
        for line in self.proc.stdout:
            with self._lock:
                self.lines.append(line)
            m = SERVING_RE.search(line)
            if m and not self._serving.is_set():
                self.url = m.group(1)
                self.pids = [int(p) for p in m.group(3).split(",")]
                self._serving.set()

    def output(self):
        with self._lock:
            return "".join(self.lines)

    def wait_for_line(self, pattern, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                found = next((line for line in self.lines if re.search(pattern, line)), None)
            if found:
                return found
            time.sleep(0.05)
        raise AssertionError(f"no line matching {pattern!r} in:\n{self.output()}")

    def ensure_running(self):
        """Aborted, with its output, if it has died: what was measured since is not a measurement."""
        if self.proc.poll() is not None:
            raise Aborted("the server died during the measurements:\n" + self.output())

    def signal(self, sig):
        self.proc.send_signal(sig)


    def client(self):
        from .client import Client
        return Client(self.url)


class RunnerProcess(Stoppable):
    """`python -m server.runner` as a subprocess on 127.0.0.1 and a free
    port, with an environment of its own: its id and key (made from
    `secret` as the server makes it), the sandbox settings in `env` and its
    DATA_DIR `folder` (its sandboxes' homes too); nothing of the server's.
    Ready once it prints its serving line (`url`)."""

    def __init__(self, runner_id, secret, folder, env=None, log=None, wrap=()):
        from server.runs.sandbox.tickets import runner_key
        self.id = runner_id
        self.wrap = list(wrap)  # a command it runs under (namespaces of its own: tests/test_runner_host.py)
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "RUNNER_ID": runner_id,
                    "RUNNER_KEY": runner_key(secret, runner_id).hex(), "RUNNER_HOST": "127.0.0.1",
                    "RUNNER_PORT": "0", "SANDBOX": "local", "DATA_DIR": folder,
                    **{k: os.environ[k] for k in ("SANDBOX_UID_BASE", "SANDBOX_CPU", "SANDBOX_PYTHON", "PYTHONPATH",
                                                  "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
                       if k in os.environ},
                    **{k: str(v) for k, v in (env or {}).items()}}
        self.lines = [] if log is None else log
        self.proc = None
        self.url = None

    def start(self, timeout=START_TIMEOUT):
        from server.runs.sandbox.remote import SERVING
        self.proc = subprocess.Popen(self.wrap + [sys.executable, "-m", "server.runner"], cwd=server_root(), env=self.env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        serving = threading.Event()

        def read():
            for line in self.proc.stdout:
                self.lines.append(line)
                m = SERVING.match(line)
                if m and not serving.is_set():
                    self.url = m.group(1)
                    serving.set()
        threading.Thread(target=read, daemon=True).start()
        if not self.until_serving(serving, timeout):
            self.stop()
            raise Aborted(f"runner {self.id} did not start:\n" + "".join(self.lines))
        return self

    def sandboxes(self):
        """How many sandboxes it holds now: its bubblewrap children (each in
        a session of its own, so not in the runner's process group)."""
        import psutil
        try:
            return sum(child.name() == "bwrap" for child in psutil.Process(self.proc.pid).children())
        except psutil.Error:
            return 0



def tail(lines=40):
    """A `log` for ServerProcess that keeps only the last lines."""
    return collections.deque(maxlen=lines)


# -- PostgreSQL and the servers' spaces ----------------------------------------------

def with_database(dsn, name):
    return urlunsplit(urlsplit(dsn)._replace(path="/" + name))


def admin_sql(dsn, statement):
    conn = psycopg2.connect(dsn, connect_timeout=30)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(statement)
    finally:
        conn.close()


@contextlib.contextmanager
def scratch(prefix):
    """(folder, its EmbeddedPostgres, not started) for one tool run. On
    the way out, however it goes, PostgreSQL stops and the folder goes,
    uninterrupted. The folder is 0755: PostgreSQL runs as 'postgres' when we
    are root, and students' uids walk through it to their homes."""
    base = tempfile.mkdtemp(prefix=prefix)
    os.chmod(base, 0o755)
    pg = EmbeddedPostgres(base)
    try:
        yield base, pg
    finally:
        with uninterrupted():
            pg.stop()
            shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def server_space(admin_dsn, base, name, label):
    """(dsn, DATA_DIR) for one server under test: a new database `name` and
    a new folder in `base`, both gone on the way out (uninterrupted). The
    folder is 0755: as root, the students' sandbox uids walk through it to
    their homes (the server refuses to start otherwise)."""
    dsn = with_database(admin_dsn, name)
    data_dir = tempfile.mkdtemp(prefix=f"data-{label}-", dir=base)
    os.chmod(data_dir, 0o755)
    admin_sql(admin_dsn, f'CREATE DATABASE "{name}"')
    try:
        yield dsn, data_dir
    finally:
        with uninterrupted():
            admin_sql(admin_dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            shutil.rmtree(data_dir, ignore_errors=True)


def server_env(processes, dsn, data_dir):
    """A tool's server under test: its own secrets, the operator's
    LOG_LEVEL, and no throttling of 127.0.0.1, where every virtual user
    comes from."""
    return {
        "TORNADO_PROCESSES": str(processes), "DATABASE_URL": dsn, "DATA_DIR": data_dir, "STORAGE_ROOT": "",
        "COOKIE_SECRET": secrets.token_urlsafe(48), "ADMIN_PASSWORD": secrets.token_urlsafe(16),
        "LOG_LEVEL": os.environ.get("LOG_LEVEL", "INFO"),
        "LOGIN_FAILURES_PER_ADDRESS": "100000",
    }


@contextlib.contextmanager
def fresh_server(admin_dsn, base, processes, credentials, label, log=None, **settings):
    """A server under test with `processes` workers on a new database and
    DATA_DIR in `base` (server_env plus `settings`), whose students are
    `credentials` (see make_credentials); stopped, its database dropped and
    its folder removed on the way out however it goes. Yields (server,
    [(username, password)] to log in with)."""
    name = f"{label}_{secrets.token_hex(4)}"
    with server_space(admin_dsn, base, name, label) as (dsn, data_dir):
        env = {**server_env(processes, dsn, data_dir), **settings}
        server = ServerProcess(processes, dsn, data_dir, env, tail() if log is None else log)
        try:
            server.start()  # it applies the migrations: the users table exists after
            logins = insert_users(dsn, credentials)
            settle(server)
            yield server, logins
        finally:
            with uninterrupted():
                server.stop()


def settle(server, timeout=SETTLE_TIMEOUT):
    """Wait until the server's processes and their children have gone quiet
    (under a tenth of a core): a fresh server's editing-help processes
    warm up for seconds, and a measurement started at once counted that as
    its load's."""
    deadline = time.monotonic() + timeout
    last = tree_cpu([server.proc.pid])
    while time.monotonic() < deadline:
        time.sleep(SETTLE_STEP)
        now = tree_cpu([server.proc.pid])
        if now - last < 0.1 * SETTLE_STEP:
            return
        last = now


# -- users ---------------------------------------------------------------------------

def make_credentials(count, prefix="bench"):
    """[(username, password, hash)]: distinct random passwords, real hashes,
    hashed in parallel (argon2 releases the GIL)."""
    pairs = [(f"{prefix}{i:04d}", secrets.token_urlsafe(12)) for i in range(count)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        hashes = list(pool.map(hash_password, [password for _, password in pairs]))
    return [(username, password, h) for (username, password), h in zip(pairs, hashes)]


def insert_users(dsn, credentials, role="student"):
    """Students (or users of `role`) with these (username, password, hash);
    returns the (username, password) pairs to log in with."""
    conn = psycopg2.connect(dsn, connect_timeout=30)
    try:
        with conn, conn.cursor() as cur:
            cur.executemany("INSERT INTO users (username, display_name, role, password_hash) "
                            "VALUES (%s, %s, %s, %s)",
                            [(username, f"{role.title()} {username}", role, h) for username, _, h in credentials])
    finally:
        conn.close()
    return [(username, password) for username, password, _ in credentials]


def students(dsn, count, prefix="student"):
    """`count` new students on the database `dsn`: [(username, password)]."""
    return insert_users(dsn, make_credentials(count, prefix))


# -- running a measurement -----------------------------------------------------------

def run_async(coro, deadline):
    """Run `coro`, giving up when the whole run's deadline passes."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        coro.close()
        raise Aborted("--max-seconds reached")
    try:
        return asyncio.run(asyncio.wait_for(coro, remaining))
    except asyncio.TimeoutError:
        raise Aborted("--max-seconds reached during a measurement") from None


def each_load(name, process_counts, loads, measure_one, **settings):
    """The grid a closed-loop benchmark walks: one scratch PostgreSQL, then
    per process count a fresh server (`settings` on top of server_env) with
    max(loads) users, and every load in turn on it. `measure_one(server,
    logins, processes, count)` measures one cell and returns its figures;
    returns [{"processes": ..., **figures}] in order."""
    results = []
    with scratch(f"pyclassroom-{name}-") as (base, pg):
        say("starting PostgreSQL and hashing passwords ...")
        admin_dsn = pg.start()
        credentials = make_credentials(max(loads))
        for processes in process_counts:
            with fresh_server(admin_dsn, base, processes, credentials, f"{name.replace('-', '_')}_{processes}p",
                              **settings) as (server, logins):
                for count in loads:
                    results.append({"processes": processes, **measure_one(server, logins[:count], processes, count)})
                    server.ensure_running()
    return results

