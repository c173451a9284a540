"""The live class view (issue 13, item 6): a teacher's /ws/class/<id> is
told who is online, running, stuck on an error, and when each student
last saved, whichever worker (or instance) it happened on, through
PostgreSQL. Real runs over /ws/run call the hooks in the run manager; some
tests call the hooks from the test's own process, as another worker would."""
import asyncio
import contextlib
import json
import time

import aiohttp
import asyncpg
import psycopg2
import pytest

from server import config, db, notify
from server.accounts import sessions
from server.teaching.classes import Classes
from server.teaching import live
from loadtest.run_client import RunClient
from tests.conftest import RUN_LIMITS, People, _shared
from tests.helpers import sql
from tests.live_support import a_class, another_worker, user_of
from tests.runs_support import save
from loadtest.harness import ADMIN_PASSWORD

TIMEOUT = 10  # seconds: only catches a hang


@contextlib.asynccontextmanager
async def watching(server, client, number, query=""):
    """A teacher's live socket on a class (`query`: "?exam=<id>", the
    proctor view): (socket, worker pid that took it)."""
    cookie = "; ".join(f"{k}={v}" for k, v in client.http.cookies.get_dict().items())
    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as http:
        ws = await http.ws_connect(server.url.replace("http", "ws", 1) + f"/ws/class/{number}{query}",
                                   origin=server.url, headers={"Cookie": cookie})
        try:
            yield ws, int(ws._response.headers["X-Worker-Pid"])
        finally:
            await ws.close()


async def until(ws, wanted, timeout=TIMEOUT):
    """Read messages until one of them shows a student as `wanted(student)`
    says; the student."""
    deadline = time.monotonic() + timeout
    while True:
        msg = await ws.receive(timeout=max(0.1, deadline - time.monotonic()))
        assert msg.type == aiohttp.WSMsgType.TEXT, (msg.type, msg.data, msg.extra)
        for student in json.loads(msg.data)["students"]:
            if wanted(student):
                return student


@pytest.fixture
def runs_server2(shared_servers):
    """A shared 2-worker server that runs programs (the run tests' limits)."""
    yield from _shared(shared_servers, processes=2, SANDBOX="local", **RUN_LIMITS)


async def on_both_workers(server, teacher, number, stack):
    """The teacher's live sockets until each worker holds one: {pid: socket},
    each past its first snapshot."""
    sockets = {}
    for _ in range(40):
        ws, pid = await stack.enter_async_context(watching(server, teacher, number))
        if pid in sockets:
            await ws.close()
            continue
        # An update announced while the socket's snapshot was read may come first.
        while json.loads((await ws.receive(timeout=TIMEOUT)).data)["type"] != "snapshot":
            pass
        sockets[pid] = ws
        if len(sockets) == 2:
            return sockets
    raise AssertionError("the sockets never reached both workers")


async def all_see(sockets, wanted):
    """Every socket shows a student as `wanted` says: what the last one saw."""
    return [await until(ws, wanted) for ws in sockets.values()][-1]


def test_a_students_real_runs_reach_the_teacher_on_either_worker(runs_server2):
    """A student runs programs over the real /ws/run: the run manager's
    hooks tell the teacher's sockets on both workers (so across workers)
    that she is online, running, how each run ended and the error line of
    its traceback; then that she left. Saves show too; an outsider never."""
    server = runs_server2
    people = People(server)
    teacher, ada, bob = people.teacher("mrs-t"), people.student("ada"), people.student("bob")
    outsider = people.student("out")
    number = a_class(server, teacher, ada, bob)

    def me(s):
        return s["username"] == ada.username

    save(ada, "oops.py", "name = input()\nprint(name, 1 / 0)\n")
    save(ada, "loop.py", "while True:\n    pass\n")

    async def story():
        async with contextlib.AsyncExitStack() as stack:
            sockets = await on_both_workers(server, teacher, number, stack)
            rc = await stack.enter_async_context(RunClient(server.url, ada.http.cookies.get_dict()))
            await all_see(sockets, lambda s: me(s) and s["online"] and not s["running"])

            await rc.send(type="run", path="oops.py")
            await rc.until("started")
            running = await all_see(sockets, lambda s: me(s) and s["running"])
            assert running["run_started_at"] and running["last_run"] is None
            await rc.send(type="stdin", data="ada\r")
            assert (await rc.until("exit"))["reason"] == "error"
            assert "ZeroDivisionError" in rc.output("stderr")
            ended = await all_see(sockets, lambda s: me(s) and s["last_run"])
            assert not ended["running"] and ended["online"]
            assert ended["last_run"]["outcome"] == "error" and ended["last_run"]["reason"] == "error"
            assert ended["last_run"]["error"] == {"text": "ZeroDivisionError: division by zero", "line": 2,
                                                  "kind": "ZeroDivisionError", "message": "division by zero",
                                                  "file": "oops.py"}

            # A hang guard past RUN_WALL_SECONDS (60): at idle CPU priority, on a
            # busy machine, the loop's 2 s of CPU take long to come.
            assert (await rc.run("loop.py", timeout=90))["reason"] == "cpu_limit"
            limited = await all_see(sockets, lambda s: me(s) and (s["last_run"] or {}).get("outcome") == "limit")
            assert limited["last_run"]["error"] is None and not limited["running"]

            # A save, on whichever worker it lands.
            assert bob.request("PUT", "/api/files/home/a.py", data=b"x = 1\n").status_code == 200
            saved = await all_see(sockets, lambda s: s["username"] == bob.username and s["last_save_at"])
            assert not saved["online"]
            # Someone outside the class is never sent.
            assert outsider.request("PUT", "/api/files/home/a.py", data=b"x = 1\n").status_code == 200

            await rc.close()
            gone = await all_see(sockets, lambda s: me(s) and not s["online"])
            assert gone["last_run"]["reason"] == "cpu_limit"
            for ws in sockets.values():
                with pytest.raises(asyncio.TimeoutError):
                    await until(ws, lambda s: s["username"] == outsider.username, timeout=1)

    asyncio.run(story())
    # The HTTP roster says the same.
    roster = {s["username"]: s for s in teacher.get(f"/api/roster?class={number}").json()["students"]}
    assert roster[ada.username]["last_run"]["outcome"] == "limit" and roster[bob.username]["last_save_at"]


def test_only_a_teacher_of_the_class_may_watch_it(server):
    people = People(server)
    teacher, other, ada = people.teacher("mrs-t"), people.teacher("mr-o"), people.student("ada")
    number = a_class(server, teacher, ada)
    url = f"/ws/class/{number}"
    upgrade = {"Upgrade": "websocket", "Connection": "Upgrade"}  # the refusal comes before the handshake
    for client, status, code in ((server.client(), 401, "not_logged_in"), (ada, 403, "not_your_class"),
                                 (other, 403, "not_your_class")):
        r = client.get(url, headers=upgrade)
        assert r.status_code == status and r.json()["error"] == code, r.text
    r = teacher.get("/ws/class/999999999", headers=upgrade)
    assert r.status_code == 404 and r.json()["error"] == "no_such_class"
    assert teacher.get(url).json()["error"] == "not_a_websocket"

    async def refused():
        with pytest.raises(aiohttp.WSServerHandshakeError) as e:
            async with watching(server, ada, number):
                pass
        return e.value.status
    assert asyncio.run(refused()) == 403


def test_a_socket_ends_with_its_session_or_when_its_teacher_leaves_the_class(server):
    people = People(server)
    teacher, removed = people.teacher("mrs-t"), people.teacher("mr-r")
    number = a_class(server, teacher, removed)
    admin = server.client()
    admin.login_ok("admin", ADMIN_PASSWORD)

    async def story():
        async with watching(server, teacher, number) as (ws, _), watching(server, removed, number) as (ws2, _):
            await ws.receive(timeout=TIMEOUT)
            await ws2.receive(timeout=TIMEOUT)
            assert teacher.post("/api/logout", json={}).status_code == 200
            assert admin.post(f"/api/classes/{number}/members", json={"remove": [removed.username]}).status_code == 200
            for sock, code in ((ws, live.CLOSE_SESSION_ENDED), (ws2, live.CLOSE_NOT_YOUR_CLASS)):
                deadline = time.monotonic() + live.RESYNC_SECONDS + TIMEOUT
                while True:  # snapshots may come first
                    msg = await sock.receive(timeout=max(0.1, deadline - time.monotonic()))
                    if msg.type != aiohttp.WSMsgType.TEXT:
                        break
                assert sock.close_code == code, (msg.type, msg.data)

    asyncio.run(story())


def test_the_hooks_never_wait_for_a_database_that_hangs(server):
    """With run_activity locked by another transaction (a database that
    does not answer), the hooks return at once; what they recorded is
    written once it answers again, the newest event last."""
    people = People(server)
    ada = people.student("ada")
    user = user_of(server, ada.username)
    blocker = psycopg2.connect(server.env["DATABASE_URL"])

    async def story():
        async with another_worker(server) as worker:
            with blocker, blocker.cursor() as cur:
                cur.execute("LOCK TABLE run_activity IN ACCESS EXCLUSIVE MODE")
                for _ in range(50):  # the hooks are plain calls: nothing in them can wait for the lock
                    worker.run_started(user)
                    worker.run_ended(user, {"reason": "error"}, {"text": "ValueError: bad\nmore"})
                worker.run_started(user)
                worker.run_ended(user, {"reason": "ok"})
                await asyncio.sleep(0.5)  # the writer is stuck on the lock meanwhile
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                rows = sql(server.env["DATABASE_URL"],
                           "SELECT running, outcome, error_line FROM run_activity WHERE user_id = %s", user["id"])
                if rows == [(False, "ok", None)]:
                    return
                await asyncio.sleep(0.2)
            raise AssertionError(f"never written: {rows}")

    try:
        asyncio.run(story())
    finally:
        blocker.close()


def test_a_slow_teachers_socket_holds_at_most_a_class_of_rows():
    """While the browser does not read, updates for the same students
    replace each other; what is finally sent is the newest."""
    async def story():
        release, sent = asyncio.Event(), []

        async def send(message):
            await release.wait()
            sent.append(message)
        watcher = live.Watcher({"id": 1}, b"", 1, send, lambda *a: None)
        watcher.queue([], 1, whole=True)
        for n in range(1000):
            watcher.queue([{"username": f"s{n % 5}", "n": n}], 2 + n)
            await asyncio.sleep(0)
        assert len(watcher.pending) <= 5
        release.set()
        await asyncio.wait_for(watcher.sending, TIMEOUT)
        newest = {s["username"]: s["n"] for m in sent for s in m["students"]}
        assert newest == {f"s{k}": 995 + k for k in range(5)}

    asyncio.run(story())


def test_a_socket_hears_its_snapshot_first_and_nothing_older_after_it():
    """Rows read while a socket's snapshot was read (or a resync's) wait for
    it, and only those read after it began go after it; an older snapshot
    that finishes late is dropped."""
    async def story():
        sent = []

        async def send(message):
            sent.append((message["type"], [(s["username"], s["v"]) for s in message["students"]]))
        watcher = live.Watcher({"id": 1}, b"", 1, send, lambda *a: None)
        watcher.queue([{"username": "ada", "v": "read 1"}], 1)  # read before the snapshot's began
        watcher.queue([{"username": "bob", "v": "read 3"}], 3)  # after
        await asyncio.sleep(0.05)
        assert sent == []  # nothing before the snapshot
        watcher.queue([{"username": "ada", "v": "snap 2"}, {"username": "bob", "v": "snap 2"}], 2, whole=True)
        await asyncio.wait_for(watcher.sending, TIMEOUT)
        watcher.queue([{"username": "ada", "v": "resync 4"}], 5, whole=True)
        watcher.queue([{"username": "ada", "v": "old resync"}], 4, whole=True)  # began before, ended after
        watcher.queue([{"username": "bob", "v": "read 4"}], 4)
        await asyncio.wait_for(watcher.sending, TIMEOUT)
        assert sent == [("snapshot", [("ada", "snap 2"), ("bob", "snap 2")]), ("update", [("bob", "read 3")]),
                        ("snapshot", [("ada", "resync 4")])]

    asyncio.run(story())


def test_the_status_counts_people_signed_in_and_online_not_every_account(start_server):
    server = start_server()
    people = People(server)
    admin = server.client()
    admin.login_ok("admin", ADMIN_PASSWORD)
    ada = people.student("ada")
    people.student("bob", log_in=False)
    people.student("cy", active=False, log_in=False)

    async def online():
        async with another_worker(server) as worker:
            worker.student_online(user_of(server, ada.username), True)
            deadline = time.monotonic() + TIMEOUT
            while admin.get("/api/status").json()["counts"]["online"] != 1:
                assert time.monotonic() < deadline, "never counted online"
                await asyncio.sleep(0.1)

    counts = admin.get("/api/status").json()["counts"]
    assert counts == {"accounts": 4, "deactivated": 1, "signed_in": 2, "sessions": 2, "online": 0, "classes": 1}
    asyncio.run(online())


def test_the_view_listens_again_after_its_database_connection_is_cut(server):
    """The worker's listening connection is killed (a database restart, a
    failover): it listens again by itself, and a save after that comes as
    an update (announced), not only with the next whole-class resync."""
    people = People(server)
    teacher, ada = people.teacher("mrs-t"), people.student("ada")
    number = a_class(server, teacher, ada)
    dsn = server.env["DATABASE_URL"]
    listening = ("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                 f"AND application_name = '{notify.APPLICATION_NAME}'")

    async def story():
        async with watching(server, teacher, number) as (ws, _):
            await ws.receive(timeout=TIMEOUT)
            before = {pid for (pid,) in sql(dsn, listening)}
            assert before
            sql(dsn, "SELECT pg_terminate_backend(pid) FROM (" + listening + ") AS l")
            deadline = time.monotonic() + 30
            while not ({pid for (pid,) in sql(dsn, listening)} - before):
                assert time.monotonic() < deadline, "never listened again"
                await asyncio.sleep(0.2)
            assert ada.request("PUT", "/api/files/home/a.py", data=b"x = 1\n").status_code == 200
            deadline = time.monotonic() + live.RESYNC_SECONDS + TIMEOUT
            while True:
                msg = json.loads((await ws.receive(timeout=max(0.1, deadline - time.monotonic()))).data)
                if msg["type"] == "update" and any(s["last_save_at"] for s in msg["students"]):
                    return

    asyncio.run(story())


def test_a_gap_in_the_notifications_sends_every_socket_its_class_again(server):
    """When the listening connection is lost, whatever was announced
    meanwhile is lost with it: the view (here without its periodic resync)
    sends each socket its whole class again, showing a save made while the
    connection was down."""
    people = People(server)
    teacher, ada = people.teacher("mrs-t"), people.student("ada")
    number = a_class(server, teacher, ada)
    dsn = server.env["DATABASE_URL"]
    teacher_user = user_of(server, teacher.username)

    async def story():
        pool = db.Pool(await asyncpg.create_pool(dsn, min_size=1, max_size=2), acquire_timeout=5, size=2)
        listener = notify.Listener(dsn)
        view = live.LiveView(pool, config.load({}), Classes(pool), listener)  # never start()ed: no resync
        await listener.start()
        sent, closed = asyncio.Queue(), []
        try:
            async with pool.transaction() as conn:
                token, _ = await sessions.create(conn, teacher_user["id"], 600, "127.0.0.1")
            await view.watch(teacher_user, sessions.token_hash(token), number, sent.put,
                             lambda *a: closed.append(a))
            first = await asyncio.wait_for(sent.get(), TIMEOUT)
            assert first["type"] == "snapshot" and first["students"][0]["last_save_at"] is None
            sql(dsn, "SELECT pg_terminate_backend(%s)", listener._conn.get_server_pid())
            sql(dsn, "UPDATE users SET last_save_at = now() WHERE username = %s", ada.username)
            while True:
                message = await asyncio.wait_for(sent.get(), TIMEOUT)
                if message["type"] == "snapshot" and message["students"][0]["last_save_at"]:
                    break
            # The class may be sent again as soon as the loss is seen, before the new connection is made.
            deadline = time.monotonic() + TIMEOUT
            while listener.connects < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert listener.connects >= 2 and closed == []
        finally:
            await view.close()
            await listener.close()
            await pool.close()

    asyncio.run(story())


def test_a_programs_own_words_cannot_disguise_its_error_to_the_teacher(server):
    """Every part of the error is one line, bounded, without control or bidi
    characters; a line that is not a number is dropped (run_error's own
    tests are in test_run_errors.py)."""
    people = People(server)
    ada = people.student("ada")
    user = user_of(server, ada.username)
    evil = "\x1b[2J\u202eEvil\u202c: " + "x" * 1000 + "\nmore"

    async def story():
        async with another_worker(server) as worker:
            worker.run_ended(user, {"reason": "error"}, {"text": evil, "kind": evil, "message": evil, "file": evil,
                                                         "line": "4"})
    asyncio.run(story())
    [row] = sql(server.env["DATABASE_URL"], "SELECT error_line, error_kind, error_message, error_file, error_lineno "
                "FROM run_activity WHERE user_id = %s", user["id"])
    shown = "[2JEvil: " + "x" * 291
    assert row == (shown, shown[:100], shown, shown, None)


def test_one_teacher_holds_a_bounded_number_of_live_sockets(server):
    """A teacher opening the view again and again (tabs left open, a
    script) holds at most SOCKETS_PER_USER on a worker: the oldest gives way."""
    people = People(server)
    teacher = people.teacher("mrs-t")
    number = a_class(server, teacher)

    async def story():
        async with contextlib.AsyncExitStack() as stack:
            sockets = []
            for _ in range(live.SOCKETS_PER_USER + 1):
                ws, _ = await stack.enter_async_context(watching(server, teacher, number))
                await ws.receive(timeout=TIMEOUT)  # its snapshot: it is registered
                sockets.append(ws)
            # What it was sent before it gave way (a snapshot may be sent again) does not matter.
            msg = await sockets[0].receive(timeout=TIMEOUT)
            while msg.type == aiohttp.WSMsgType.TEXT:
                msg = await sockets[0].receive(timeout=TIMEOUT)
            assert msg.type == aiohttp.WSMsgType.CLOSE and sockets[0].close_code == live.CLOSE_OTHER_TAB
            for ws in sockets[1:]:
                assert not ws.closed

    asyncio.run(story())
