"""Small helpers the server tests share."""
import collections
import functools
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg2
import requests

from server.accounts.passwords import hash_password

# A test's accounts reuse a few passwords: argon2 once for each (25-30 ms of CPU a hash).
password_hash = functools.lru_cache(maxsize=256)(hash_password)


def create_user(dsn, username, password, role="student", display_name=None, active=True):
    sql(dsn, "INSERT INTO users (username, display_name, role, password_hash, active) VALUES (%s, %s, %s, %s, %s)",
        username, display_name or username.title(), role, password_hash(password), active)


class _Connections:
    """One open connection per database, for the last few databases used:
    tests poll with `sql` many times a second, and a new connection is a
    new PostgreSQL process each time. A connection the database dropped
    (a test's database is dropped WITH (FORCE)) is made again."""

    KEPT = 8

    def __init__(self):
        self.open = collections.OrderedDict()
        self.lock = threading.Lock()

    def run(self, dsn, query, args):
        with self.lock:  # one statement at a time: tests call `sql` from threads too
            for attempt in (1, 2):
                conn = self._get(dsn)
                try:
                    with conn.cursor() as cur:
                        cur.execute(query, args)
                        return cur.fetchall() if cur.description else []
                except (psycopg2.OperationalError, psycopg2.InterfaceError):
                    broken = conn.closed != 0  # psycopg2 marks a connection it found broken
                    self._drop(dsn)
                    if attempt == 2 or not broken:
                        raise  # the statement failed, not the connection

    def _get(self, dsn):
        conn = self.open.pop(dsn, None)
        if conn is None or conn.closed:
            conn = psycopg2.connect(dsn)
            conn.autocommit = True  # each statement commits, as a connection of its own did
        self.open[dsn] = conn
        while len(self.open) > self.KEPT:
            self._drop(next(iter(self.open)))
        return conn

    def _drop(self, dsn):
        conn = self.open.pop(dsn, None)
        if conn is not None:
            conn.close()


_connections = _Connections()


def sql(dsn, query, *args):
    """Run one statement; return all rows (or [] when it returns none)."""
    return _connections.run(dsn, query, args)


def fresh_connection_get(url, path, cookies=None, headers=None):
    """A GET on a new TCP connection, so the kernel may hand it to any worker."""
    with requests.Session() as s:
        return s.get(url + path, cookies=cookies, headers=headers or {}, timeout=30)


def on_each_worker(server, path, cookies=None, rounds=25):
    """{pid: response} for one request answered by each worker of `server`.
    Requests go out 8 at a time: one after another, the kernel may hand
    every new connection to the same worker."""
    seen = {}
    with ThreadPoolExecutor(8) as pool:
        for _ in range(rounds):
            for r in pool.map(lambda _: fresh_connection_get(server.url, path, cookies=cookies), range(8)):
                seen.setdefault(int(r.headers["X-Worker-Pid"]), r)
            if len(seen) == len(server.pids):
                break
    assert set(seen) == set(server.pids), f"answers came only from {sorted(seen)}, workers {server.pids}"
    return seen


def put(client, path, content, etag=None):
    """Save `content` as `path` in the client's home (If-Match `etag` when given)."""
    headers = {"Content-Type": "text/plain; charset=utf-8"}
    if etag:
        headers["If-Match"] = f'"{etag}"'
    return client.request("PUT", "/api/files/home/" + path, data=content.encode(), headers=headers)


_admins = {}  # server -> its admin, signed in once


def wait_for_editing_help(server, guard=180):
    """Until `server`'s editing-help processes have all warmed up (the admin's
    /api/status says so), and `server` back. A fresh server's helpers warm up
    for seconds of CPU at the lowest priority; a request that waits past
    ASSIST_TIMEOUT meanwhile is answered 'busy', which on a busy machine
    made a test's first question fail. A hang guard, not a timing bound."""
    from loadtest.harness import ADMIN_PASSWORD
    admin = _admins.get(server)
    if admin is None:
        admin = _admins[server] = server.client()
        admin.login_ok("admin", ADMIN_PASSWORD)
    deadline = time.monotonic() + guard
    while True:
        helping = admin.get("/api/status", timeout=30).json()["editing_help"]
        if not helping.get("on") or helping["ready"] >= helping["processes"]:
            return server
        assert time.monotonic() < deadline, f"editing help never warmed up: {helping}"
        time.sleep(0.2)
