"""Open IDEs follow the files (issue 21): whatever changes a file a student
can see (another tab or computer of theirs, the teacher's push, the course
folder, their program) is told on every IDE socket of theirs, on every
worker, with the new version and who did it; never on another student's;
and a burst of saves costs a bounded number of messages."""
import asyncio
import uuid

from loadtest.run_client import RunClient
from tests.conftest import People
from server import db, notify
from server.files.changes import PENDING_MAX, FileChanges

TIMEOUT = 30  # a generous bound that only catches a hang


def put(client, path, text, area="home", etag=None):
    headers = {"If-Match": f'"{etag}"'} if etag else {}
    r = client.request("PUT", f"/api/files/{area}/{path}", data=text.encode(), headers=headers)
    assert r.status_code == 200, r.text
    return r.json()["etag"]


async def watching(rc):
    """Ask `rc`'s socket to watch its files, and wait until it does: a socket's
    messages are handled in turn, so the answer to the next one (a kill with
    nothing running) comes after the watch began."""
    await rc.send(type="watch")
    await rc.send(type="kill")
    message = await rc.until("error", TIMEOUT)
    assert message["error"] == "not_running", message


async def changes_heard(rc, until, timeout=TIMEOUT):
    """The "files" changes `rc` hears until `until(changes)` holds."""
    changes = []
    while not until(changes):
        message = await rc.receive(timeout)
        if message["type"] == "files":
            changes += [dict(c, area=message["area"])
                        for c in message.get("changes", [{"reload": message.get("reload")}])]
    return changes


async def file_news(server, client, act, until, sockets=2, quiet=None, probe=None):
    """Open `sockets` IDE sockets of `client` (and one of `quiet`), do
    `act()` (in a thread: it makes HTTP requests), and collect the "files"
    messages of each until `until(changes)` holds for all. `probe`, (an
    action, what hearing it is): done again and again first, until every
    socket hears it (the course folders are watched once the database says
    which, a moment after the home)."""
    clients = [RunClient(server.url, client.http.cookies.get_dict()) for _ in range(sockets)]
    others = [RunClient(server.url, quiet.http.cookies.get_dict())] if quiet else []
    for rc in clients + others:
        await rc.open()
        await watching(rc)
    try:
        if probe:
            probe_act, probe_heard = probe
            for rc in clients:
                for attempt in range(TIMEOUT):
                    await asyncio.to_thread(probe_act)
                    try:
                        await changes_heard(rc, probe_heard, timeout=1.0)
                        break
                    except asyncio.TimeoutError:
                        assert attempt < TIMEOUT - 1, "the socket never heard the probe"
        await asyncio.to_thread(act)
        heard = []
        for rc in clients:
            heard.append(await changes_heard(rc, until))
        overheard = []
        for rc in others:
            try:
                while True:
                    message = await rc.receive(1.0)
                    if message["type"] == "files":
                        overheard.append(message)
            except asyncio.TimeoutError:
                pass
        return heard, overheard
    finally:
        for rc in clients + others:
            await rc.close()


def test_a_save_reaches_every_ide_of_the_student_on_every_worker_and_no_one_else(server2):
    people = People(server2)
    ada, bob = people.student("ada"), people.student("bob")
    first = put(ada, "lesson.py", 'print("version A")\n')
    saved = {}

    def act():
        saved["etag"] = put(ada, "lesson.py", 'print("version B")\n', etag=first)

    def told(changes):
        return any(c.get("path") == "lesson.py" and c.get("etag") == saved.get("etag") for c in changes)

    heard, overheard = asyncio.run(file_news(server2, ada, act, told, sockets=4, quiet=bob))
    for changes in heard:
        [change] = [c for c in changes if c.get("path") == "lesson.py" and c.get("etag") == saved["etag"]]
        assert change["kind"] == "save" and change["by"] == "you" and change["area"] == "home"
    assert overheard == []  # bob hears nothing of ada's files


def test_moves_deletes_folders_and_a_programs_run_are_told(server2):
    people = People(server2)
    ada = people.student("ada")
    put(ada, "old.py", "x = 1\n")
    put(ada, "gone.py", "y = 2\n")

    def act():
        assert ada.post("/api/files/home/old.py", json={"action": "move", "to": "new.py"}).status_code == 200
        assert ada.request("DELETE", "/api/files/home/gone.py").status_code == 200
        assert ada.post("/api/files/home/week2", json={"action": "mkdir"}).status_code == 201

    def told(changes):
        return {c.get("kind") for c in changes} >= {"move", "delete", "mkdir"}

    [changes], _ = asyncio.run(file_news(server2, ada, act, told, sockets=1))
    assert {"kind": "move", "path": "old.py", "to": "new.py", "by": "you", "area": "home"} in changes
    assert {"kind": "delete", "path": "gone.py", "by": "you", "area": "home"} in changes

    async def run_writer():
        put(ada, "writer.py", 'open("scores.txt", "w").write("10")\n')
        async with RunClient(server2.url, ada.http.cookies.get_dict()) as rc, \
                RunClient(server2.url, ada.http.cookies.get_dict()) as other_tab:
            await watching(other_tab)
            exit_ = await rc.run("writer.py")
            assert exit_["reason"] == "ok"
            while True:
                message = await other_tab.until("files", TIMEOUT)
                if any(c["kind"] == "program" for c in message.get("changes", [])):
                    return message

    message = asyncio.run(run_writer())
    assert message["area"] == "home" and {"kind": "program", "path": "", "by": "program"} in message["changes"]


def test_the_teachers_push_and_course_edits_reach_open_ides(server2):
    people = People(server2)
    ada, teacher = people.student("ada"), people.teacher("mrs-t")
    put(teacher, "lesson2.py", 'print("the starter, fixed")\n', area="course")

    def push():
        r = teacher.post("/api/course/push", json={"path": "lesson2.py", "students": [ada.username]})
        assert r.status_code == 200, r.text

    def pushed(changes):
        return any(c.get("path") == "lesson2.py" and c.get("area") == "home" for c in changes)

    [changes], _ = asyncio.run(file_news(server2, ada, push, pushed, sockets=1))
    [change] = [c for c in changes if c.get("path") == "lesson2.py" and c.get("area") == "home"]
    assert change["by"] == "teacher" and change["kind"] == "save" and change["etag"]

    def edit_course():
        put(teacher, "notes.txt", "read chapter 2\n", area="course")

    def course_told(changes):
        return any(c.get("path") == "notes.txt" and c.get("area") == "course" for c in changes)

    def probe():
        put(teacher, f"probe-{uuid.uuid4().hex[:8]}.txt", "a file only to see the news arrive\n", area="course")

    def probe_heard(changes):
        return any(c.get("path", "").startswith("probe-") and c.get("area") == "course" for c in changes)

    [changes], _ = asyncio.run(file_news(server2, ada, edit_course, course_told, sockets=1,
                                         probe=(probe, probe_heard)))
    assert [c["by"] for c in changes if c.get("path") == "notes.txt"] == ["teacher"]


async def _on_postgres(dsn, story):
    """`story(changes, heard)` with a FileChanges on the test database (its
    own pool and LISTEN connection) and one watch on home/ada, whose
    messages go to `heard`."""
    pool = await db.create_pool(dsn, 2, 5, 5)
    listener = notify.Listener(dsn)
    changes = FileChanges(pool, listener)
    await listener.start()
    heard = []

    async def send(message):
        heard.append(message)

    changes.watch({"home/ada": "home"}, send)
    try:
        return await story(changes, heard)
    finally:
        await listener.close()
        await pool.close()


async def _until(heard, test):
    for _ in range(TIMEOUT * 20):
        if test():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not heard: {heard}")


def test_a_burst_of_saves_is_gathered_and_bounded(fresh_db):
    async def story(changes, heard):
        # The same file saved 5 times in a row: one change, the newest version.
        for n in range(5):
            changes.announce("home/ada", "save", "a.py", etag=f"{n:020d}")
        await _until(heard, lambda: heard)
        assert heard == [{"type": "files", "area": "home",
                          "changes": [{"kind": "save", "path": "a.py", "by": "you", "etag": f"{4:020d}"}]}]
        # 300 files at once: one "reload" of the area, not 300 changes.
        heard.clear()
        for n in range(300):
            changes.announce("home/ada", "save", f"f{n}.py", etag=f"{n:020d}")
        await _until(heard, lambda: heard)
        await asyncio.sleep(0.3)
        assert heard == [{"type": "files", "area": "home", "reload": True}]
        # Another student's area is not this watch's.
        heard.clear()
        changes.announce("home/bob", "save", "secret.py", etag="1" * 20)
        await asyncio.sleep(0.5)
        assert heard == []

    asyncio.run(_on_postgres(fresh_db, story))


def test_a_slow_browser_holds_a_bounded_queue(fresh_db):
    async def story(changes, heard):
        gate = asyncio.Event()
        got = []

        async def slow(message):
            got.append(message)
            await gate.wait()  # the browser reads nothing for now

        watch = changes.watch({"home/ada": "home"}, slow)
        changes.announce("home/ada", "save", "first.py", etag="0" * 20)
        await _until(got, lambda: got)
        for n in range(2000):  # every one a notification of its own
            changes.announce("home/ada", "save", f"f{n}.py", etag=f"{n:020d}")
            if n % 30 == 29:
                await asyncio.sleep(0.06)
        await asyncio.sleep(0.5)
        assert len(watch.pending) <= PENDING_MAX and watch.reload == {"home"}
        gate.set()
        await _until(got, lambda: {"type": "files", "area": "home", "reload": True} in got)
        assert len(got) <= 3  # the first message, then the reload (and what came after it)

    asyncio.run(_on_postgres(fresh_db, story))
