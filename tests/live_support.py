"""What the live class tests share: a class of a test's own, a student's
user record as the hooks take it, and the run manager's hooks called from
the test's own process as another worker of the server would."""
import contextlib
import time

import asyncpg

from server import db
from server.teaching.activity import Activity
from tests.helpers import sql
from loadtest.harness import ADMIN_PASSWORD


def a_class(server, *members, name=None):
    """A class of this test's own (the server may be shared): its number."""
    admin = server.client()
    admin.login_ok("admin", ADMIN_PASSWORD)
    r = admin.post("/api/classes", json={"name": name or f"live {time.time_ns()}"})
    assert r.status_code == 201, r.text
    number = r.json()["class"]["id"]
    r = admin.post(f"/api/classes/{number}/members", json={"add": [m if isinstance(m, str) else m.username
                                                                   for m in members]})
    assert r.status_code == 200, r.text
    return number


def user_of(server, username):
    """{id, username, role} of an account, as the hooks take a user."""
    [(user_id, role)] = sql(server.env["DATABASE_URL"], "SELECT id, role FROM users WHERE username = %s", username)
    return {"id": user_id, "username": username, "role": role}


@contextlib.asynccontextmanager
async def another_worker(server, name="test-worker"):
    """An Activity writing to the server's database: the hooks as a worker calls them."""
    pool = db.Pool(await asyncpg.create_pool(server.env["DATABASE_URL"], min_size=1, max_size=2,
                                             command_timeout=5), acquire_timeout=3, size=2)
    activity = Activity(pool, name)
    activity.start()
    try:
        yield activity
    finally:
        await activity.close()
        await pool.close()
