"""Small helpers the server tests share."""
import psycopg2
import requests

from server.auth.passwords import hash_password


def create_user(dsn, username, password, role="student", display_name=None, active=True):
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO users (username, display_name, role, password_hash, active) "
                    "VALUES (%s, %s, %s, %s, %s)",
                    (username, display_name or username.title(), role, hash_password(password), active))
    conn.close()


def sql(dsn, query, *args):
    """Run one statement; return all rows (or [] when it returns none)."""
    conn = psycopg2.connect(dsn)
    try:
        with conn, conn.cursor() as cur:
            cur.execute(query, args)
            return cur.fetchall() if cur.description else []
    finally:
        conn.close()


def fresh_connection_get(url, path, cookies=None, headers=None):
    """A GET on a new TCP connection, so the kernel may hand it to any worker."""
    with requests.Session() as s:
        return s.get(url + path, cookies=cookies, headers=headers or {}, timeout=30)


def on_each_worker(server, path, cookies=None, tries=200):
    """{pid: response} for one request answered by each worker of `server`."""
    seen = {}
    for _ in range(tries):
        r = fresh_connection_get(server.url, path, cookies=cookies)
        seen.setdefault(int(r.headers["X-Worker-Pid"]), r)
        if len(seen) == len(server.pids):
            break
    assert set(seen) == set(server.pids), f"answers came only from {sorted(seen)}, workers {server.pids}"
    return seen
