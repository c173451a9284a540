"""A student's detail (issue 24): a teacher's /ws/class socket follows one
student's console (the text and figures of their current or last run, as
they saw it, bounded), whichever worker runs it; the IDE tells the server
which file the student has open (`viewing` on /ws/run), and the roster
carries it."""
import asyncio
import base64
import contextlib
import json
import time

import aiohttp
import pytest

from loadtest.run_client import RunClient
from server import notify
from server.teaching import consoles
from server.teaching.consoles import MAX_FIGURES, MAX_TEXT, Console, Consoles
from tests.conftest import RUN_LIMITS, People, _shared
from tests.helpers import sql
from tests.live_support import a_class, user_of
from tests.runs_support import save, wait_for
from tests.test_live_class import on_both_workers, watching

TIMEOUT = 20  # seconds: only catches a hang
PLOT = ("import matplotlib.pyplot as plt\nprint('before')\nname = input('name? ')\nprint('hello', name)\n"
        "plt.plot([1, 4, 9])\nplt.show()\nprint('after the plot')\n")


@pytest.fixture
def runs_server2(shared_servers):
    yield from _shared(shared_servers, processes=2, SANDBOX="local", **RUN_LIMITS)


async def next_of(ws, kind, timeout=TIMEOUT):
    """The next message of type `kind` on a teacher's socket (others skipped)."""
    deadline = time.monotonic() + timeout
    while True:
        msg = await ws.receive(timeout=max(0.1, deadline - time.monotonic()))
        assert msg.type == aiohttp.WSMsgType.TEXT, (msg.type, msg.data, msg.extra)
        message = json.loads(msg.data)
        if message["type"] == kind:
            return message


async def console_until(ws, wanted, seen=None, timeout=TIMEOUT):
    """Console messages until one is as `wanted(console, figures)` says
    (figures: those shown, kept when a message leaves them out)."""
    seen = seen if seen is not None else {"figures": []}
    deadline = time.monotonic() + timeout
    while True:
        console = await next_of(ws, "console", max(0.1, deadline - time.monotonic()))
        if "figures" in console:
            seen["figures"] = console["figures"]
        seen["last"] = console
        if wanted(console, seen["figures"]):
            return console


def text_of(console, stream=None):
    return "".join(t for s, t in console["output"] if stream is None or s == stream)


def worker_of(rc):
    return int(rc.ws._response.headers["X-Worker-Pid"])


async def ide_on_worker(server, client, pid, stack, other=True):
    """A student's IDE socket on a worker other than `pid` (or on it)."""
    for _ in range(40):
        rc = await stack.enter_async_context(RunClient(server.url, client.http.cookies.get_dict()))
        if (worker_of(rc) != pid) == other:
            return rc
        await rc.close()
    raise AssertionError("the IDE socket never reached the worker wanted")


def test_a_teacher_follows_a_students_console_run_on_the_other_worker(runs_server2):
    """The console comes live, during the run (before and while it waits for
    input), then what came after the input, the figure, and how it ended;
    a new run starts a new console."""
    server = runs_server2
    people = People(server)
    teacher, ada = people.teacher("mrs-t"), people.student("ada")
    number = a_class(server, teacher, ada)
    save(ada, "plot.py", PLOT)
    save(ada, "again.py", "print('second run')\n")

    async def story():
        async with contextlib.AsyncExitStack() as stack:
            sockets = await on_both_workers(server, teacher, number, stack)
            first_pid = next(iter(sockets))
            rc = await ide_on_worker(server, ada, first_pid, stack)
            ws = next(w for pid, w in sockets.items() if pid != worker_of(rc))  # the teacher on the other worker

            await ws.send_json({"type": "follow", "username": ada.username})
            empty = await next_of(ws, "console")
            assert empty["username"] == ada.username and empty["output"] == [] and not empty["running"]

            await rc.send(type="run", path="plot.py")
            seen = {"figures": []}
            waiting = await console_until(ws, lambda c, f: c["waiting"] and "name? " in text_of(c), seen)
            assert waiting["running"] and "before" in text_of(waiting) and waiting["exit"] is None
            await rc.send(type="stdin", data="Ada\r")
            ended = await console_until(ws, lambda c, f: c["exit"] is not None, seen)
            assert (await rc.until("exit"))["reason"] == "ok"
            assert text_of(ended) == rc.output("stdout")  # as she saw it
            assert "hello Ada" in text_of(ended) and not ended["running"] and ended["exit"]["reason"] == "ok"
            [figure] = seen["figures"]
            assert base64.b64decode(figure).startswith(b"\x89PNG\r\n\x1a\n")

            # A new run: a new console, without the last one's figure.
            assert (await rc.run("again.py"))["reason"] == "ok"
            again = await console_until(ws, lambda c, f: "second run" in text_of(c) and c["exit"], seen)
            assert "hello" not in text_of(again) and seen["figures"] == []

            # Following nobody: nothing more comes.
            await ws.send_json({"type": "follow", "username": None})
            assert (await rc.run("again.py"))["reason"] == "ok"
            with pytest.raises(asyncio.TimeoutError):
                await next_of(ws, "console", timeout=2)

    asyncio.run(story())


def test_following_goes_on_after_the_workers_lose_their_notifications(runs_server2):
    """Every worker's listening connection is cut (a database restart, a
    failover): once they listen again, the teacher still follows her."""
    server = runs_server2
    people = People(server)
    teacher, ada = people.teacher("mrs-t"), people.student("ada")
    number = a_class(server, teacher, ada)
    save(ada, "one.py", "print('first program')\n")
    save(ada, "two.py", "print('second program')\n")
    dsn = server.env["DATABASE_URL"]
    listening = ("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                 f"AND application_name = '{notify.APPLICATION_NAME}'")

    async def story():
        async with watching(server, teacher, number) as (ws, _pid), \
                RunClient(server.url, ada.http.cookies.get_dict()) as rc:
            await ws.send_json({"type": "follow", "username": ada.username})
            assert (await rc.run("one.py"))["reason"] == "ok"
            await console_until(ws, lambda c, f: "first program" in text_of(c) and c["exit"])
            before = {pid for (pid,) in sql(dsn, listening)}
            sql(dsn, "SELECT pg_terminate_backend(pid) FROM (" + listening + ") AS l")
            assert wait_for(lambda: len({pid for (pid,) in sql(dsn, listening)} - before) >= len(before)), \
                "the workers never listened again"
            assert (await rc.run("two.py"))["reason"] == "ok"
            await console_until(ws, lambda c, f: "second program" in text_of(c) and c["exit"])

    asyncio.run(story())


def test_following_is_for_students_of_the_class_and_bad_messages_get_errors(runs_server2):
    """A student of another class, a teacher, a name that is no one: an
    error, and nothing of theirs ever comes; the follow before stays. A
    student's /ws/class is refused, as before."""
    server = runs_server2
    people = People(server)
    teacher, other_teacher = people.teacher("mrs-t"), people.teacher("mr-o")
    ada, outsider = people.student("ada"), people.student("out")
    number = a_class(server, teacher, other_teacher, ada)
    save(outsider, "secret.py", "print('my secret answer')\n")
    save(ada, "mine.py", "print('ada here')\n")

    async def story():
        async with watching(server, teacher, number) as (ws, _pid):
            await ws.send_json({"type": "follow", "username": ada.username})
            assert (await next_of(ws, "console"))["username"] == ada.username
            for username in (outsider.username, other_teacher.username, "nobody-at-all"):
                await ws.send_json({"type": "follow", "username": username})
                refused = await next_of(ws, "error")
                assert refused["error"] == "not_in_class" and refused["message"].endswith(".")
            for bad, code in (("not json", "bad_message"), ("[1]", "bad_message"), ('{"type": 5}', "bad_message"),
                              ('{"type": "shout"}', "unknown_type"), ('{"type": "follow", "username": 5}', "bad_field"),
                              ('{"type": "follow", "username": "' + "x" * 100 + '"}', "bad_field"),
                              ('{"type": "follow"}', None)):
                await ws.send_str(bad)
                if code:
                    assert (await next_of(ws, "error"))["error"] == code
            # `{"type": "follow"}` without a username follows nobody: runs of anyone send nothing.
            async with RunClient(server.url, outsider.http.cookies.get_dict()) as rc:
                assert (await rc.run("secret.py"))["reason"] == "ok"
            async with RunClient(server.url, ada.http.cookies.get_dict()) as rc:
                assert (await rc.run("mine.py"))["reason"] == "ok"
            with pytest.raises(asyncio.TimeoutError):
                await next_of(ws, "console", timeout=2)
            # Following her again works after all that: her last run, written by its worker once asked.
            # (A row written while her worker still counted her followed, before the exit, may come first.)
            await ws.send_json({"type": "follow", "username": ada.username})
            last = await console_until(ws, lambda c, f: "ada here" in text_of(c) and c.get("exit"))
            assert last["exit"]["reason"] == "ok"

        # The socket closed: its follow is over.
        ada_id = user_of(server, ada.username)["id"]
        assert wait_for(lambda: sql(server.env["DATABASE_URL"],
                                    "SELECT count(*) FROM console_follow WHERE user_id = %s", ada_id) == [(0,)])
        # The outsider's console was never written: nobody followed them.
        assert sql(server.env["DATABASE_URL"], "SELECT count(*) FROM run_console WHERE user_id = %s",
                   user_of(server, outsider.username)["id"]) == [(0,)]
        r = ada.get(f"/ws/class/{number}", headers={"Upgrade": "websocket", "Connection": "Upgrade"})
        assert r.status_code == 403 and r.json()["error"] == "not_your_class"

    asyncio.run(story())


def test_a_program_printing_10_mb_leaves_the_teacher_the_tail(start_server):
    server = start_server(SANDBOX="local", **{**RUN_LIMITS, "RUN_OUTPUT_KB": 20 << 10})
    people = People(server)
    teacher, ada = people.teacher("mrs-t"), people.student("ada")
    number = a_class(server, teacher, ada)
    # stdout and stderr are two streams: under load the launcher may read the
    # last of the flood after "the end" unless it has been drained by then.
    save(ada, "flood.py", "import sys, time\nfor i in range(100_000):\n    print(f'{i:08d}', 'x' * 90)\n"
                          "sys.stdout.flush()\ntime.sleep(1)\nprint('the end', file=sys.stderr)\n")

    async def story():
        async with watching(server, teacher, number) as (ws, _pid):
            await ws.send_json({"type": "follow", "username": ada.username})
            await next_of(ws, "console")
            async with RunClient(server.url, ada.http.cookies.get_dict(), timeout=120) as rc:
                rc.messages = None  # 10 MB: not kept
                await rc.send(type="run", path="flood.py")
                while (await rc.receive())["type"] != "exit":
                    pass
            ended = await console_until(ws, lambda c, f: c["exit"] is not None, timeout=60)
            text = text_of(ended)
            assert ended["exit"]["reason"] == "ok" and ended["cut"]
            assert len(text) <= MAX_TEXT and text.startswith("000")  # whole lines, the last ones
            assert "00099999 " + "x" * 90 in text_of(ended, "stdout")
            assert text_of(ended, "stderr") == "the end\n"  # marked as stderr
            row = sql(server.env["DATABASE_URL"], "SELECT length(output::text) FROM run_console")
            assert row[0][0] < 2 * MAX_TEXT

    asyncio.run(story())


def test_a_console_keeps_only_its_bounds():
    console = Console()
    for i in range(5000):
        console.text("stdout" if i % 3 else "stderr", f"line {i}\r\n")
    assert console.size == sum(len(t) for _, t in console.segments) <= MAX_TEXT and console.cut
    assert console.segments[0][1].startswith("line ") and console.segments[-1] == ["stdout", "line 4999\r\n"]
    console.text("stdout", "y" * (3 * MAX_TEXT))
    assert console.size <= MAX_TEXT and len(console.segments) == 1
    for i in range(10):
        console.figure(str(i) * 1000)
    assert list(console.figures) == [str(i) * 1000 for i in range(10 - MAX_FIGURES, 10)]
    console.figure("z" * (consoles.MAX_FIGURE_BYTES + 1))  # too large: not kept
    assert len(console.figures) == MAX_FIGURES and "z" not in console.figures[-1]
    kept = Consoles(pool=None, worker="w")
    for user_id in range(consoles.MAX_CONSOLES + 50):
        kept.run_console({"id": user_id}, {"type": "started"})
    assert len(kept.kept) == consoles.MAX_CONSOLES and 0 not in kept.kept
    kept.run_console({"id": 0}, {"type": "output", "stream": "stdout", "data": "no run started here"})
    assert 0 not in kept.kept
    # Figures of every console together stay within the worker's bound: the oldest lose theirs.
    figure = "A" * (consoles.MAX_FIGURE_BYTES // MAX_FIGURES)
    for user_id in list(kept.kept):
        for _ in range(MAX_FIGURES + 1):
            kept.run_console({"id": user_id}, {"type": "image", "data": figure})
    assert kept.figure_bytes == sum(c.figure_bytes for c in kept.kept.values()) <= consoles.MAX_WORKER_FIGURE_BYTES
    newest = kept.kept[next(reversed(kept.kept))]
    assert len(newest.figures) == MAX_FIGURES


def test_the_open_file_is_checked_recorded_and_on_the_roster(runs_server2):
    """`viewing`: hostile paths, huge ones, wrong types get an error and
    record nothing; a file of her home reaches the teacher's roster, and
    null (no file open) too."""
    server = runs_server2
    people = People(server)
    teacher, ada = people.teacher("mrs-t"), people.student("ada")
    number = a_class(server, teacher, ada)
    dsn = server.env["DATABASE_URL"]
    ada_id = user_of(server, ada.username)["id"]

    def viewing():
        return sql(dsn, "SELECT path FROM viewing WHERE user_id = %s", ada_id)

    async def story():
        async with RunClient(server.url, ada.http.cookies.get_dict()) as rc, \
                watching(server, teacher, number) as (ws, _pid):
            for bad in ("../../etc/passwd", "/etc/passwd", "a/../../b.py", "a\x00b.py", "", "x" * 5000,
                        "a/" * 40 + "b.py", 5, ["a.py"], {"path": "a.py"}, True):
                await rc.send(type="viewing", path=bad)
                refused = await rc.until("error")
                assert refused["error"] and refused["message"], bad
            assert viewing() == []
            # What the teacher is told next is the file sent after them: none of them was recorded.
            await rc.send(type="viewing", path="lessons/<img src=x onerror=alert(1)>.py")
            seen = await until_student(ws, lambda s: s["username"] == ada.username and s["viewing"] is not None)
            assert seen["viewing"] == "lessons/<img src=x onerror=alert(1)>.py"
            await rc.send(type="viewing", path=None)
            await until_student(ws, lambda s: s["username"] == ada.username and s["viewing"] is None)
        assert viewing() == [(None,)]

    assert viewing() == []
    asyncio.run(story())


async def until_student(ws, wanted, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        message = await next_of(ws, "update", max(0.1, deadline - time.monotonic()))
        for student in message["students"]:
            if wanted(student):
                return student
