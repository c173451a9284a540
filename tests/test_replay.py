"""Replay (server/replay/): what a student types is recorded over /ws/run
(`edits`) and replays for whoever may read the file: the student and
their teachers. Attacks: recording into another student's files, a course
folder or another's exam; reading another class's replay; edits out of
step or malformed (refused whole, nothing recorded, the socket goes on);
and the bound on what is kept. A real server, real PostgreSQL."""
import asyncio
import contextlib
import time

import asyncpg
from hypothesis import HealthCheck, given, settings, strategies as st

from loadtest.run_client import RunClient
from loadtest.typist import Typist, apply
from server import db
from server.errors import Refused
from server.files.area import Area
from server.replay.service import HOLD_SECONDS, Replays
from tests.live_support import a_class, user_of
from tests.test_exams import exam, room

TIMEOUT = 15  # seconds: only catches a hang


def replay(client, spec, path, wanted=1):
    """The file's replay once it has `wanted` rows (written when the socket
    closes, or HOLD_SECONDS after the edits)."""
    deadline = time.monotonic() + TIMEOUT + HOLD_SECONDS  # hang guard
    while True:
        r = client.request("GET", f"/api/replay/{spec}/{path}")
        assert r.status_code == 200, r.text
        chunks = r.json()["chunks"]
        if len(chunks) >= wanted or time.monotonic() > deadline:
            return chunks
        time.sleep(0.2)


def rebuilt(chunks):
    """Each stream's text at its end, as the replay makes it."""
    texts = {}
    for chunk in chunks:
        text = chunk["base"] if chunk["base"] is not None else texts[chunk["stream"]]
        assert len(text) == chunk["length"]
        for _, changes, _ in chunk["edits"]:
            text = apply(text, changes)
        texts[chunk["stream"]] = text
    return texts


async def sending(server, client, *messages):
    """Send `edits` messages on a socket of the client's, then close it:
    the refusals' codes, in order (the messages taken have none)."""
    async with RunClient(server.url, client.http.cookies.get_dict()) as rc:
        for fields in messages:
            await rc.send(type="edits", **fields)
        last = await rc.send(type="step")  # refused (nothing is debugged): every message before it was read
        while (await rc.until("error", timeout=TIMEOUT)).get("re") != last:
            pass
        return [m["error"] for m in rc.messages if m["type"] == "error" and m.get("re") != last]


def test_what_a_student_types_replays_for_her_and_her_teacher_only(server, people):
    teacher, ann, bob = people.teacher("mr-r"), people.student("ann"), people.student("bob")
    stranger = people.teacher("ms-x")
    a_class(server, teacher, ann, bob)
    a_class(server, stranger)
    typist = Typist()
    typist.type("print(1)\n")
    first = typist.message("home", "main.py")
    typist.paste("x = 2\n")
    typist.delete(2)
    typist.type("3\n")
    assert asyncio.run(sending(server, ann, first, typist.message("home", "main.py"))) == []

    chunks = replay(teacher, f"user/{ann.username}", "main.py")
    assert list(rebuilt(chunks).values()) == ["print(1)\nx = 3\n"] == [typist.text]
    edits = [e for c in chunks for e in c["edits"]]
    assert [e[2] for e in edits].count("p") == 1 and len(edits) == 9 + 1 + 2 + 2
    assert all(c["stream"] == chunks[0]["stream"] for c in chunks)  # one socket, one stream
    listed = teacher.request("GET", f"/api/replay/user/{ann.username}").json()["files"]
    assert [(f["path"], f["typed"], f["pasted"]) for f in listed] == [("main.py", 9 + 6 + 2, 6)]
    assert ann.request("GET", "/api/replay/home/main.py").json()["chunks"] == chunks  # her own

    for who, status in ((bob, 403), (stranger, 403)):
        r = who.request("GET", f"/api/replay/user/{ann.username}/main.py")
        assert r.status_code == status and "error" in r.json(), r.text
    assert bob.request("GET", "/api/replay/home/main.py").json()["chunks"] == []  # his home: nothing


def test_two_sockets_are_two_streams_each_replaying_from_its_own_text(server, people):
    teacher, ann = people.teacher("mr-s"), people.student("ann")
    a_class(server, teacher, ann)
    one = Typist("a = 1\n")
    one.type("b")
    two = Typist("other text\n")  # (a second device, its own version)
    two.type("!")
    assert asyncio.run(sending(server, ann, one.message("home", "f.py"))) == []
    assert asyncio.run(sending(server, ann, two.message("home", "f.py"))) == []
    chunks = replay(teacher, f"user/{ann.username}", "f.py", wanted=2)
    assert sorted(rebuilt(chunks).values()) == ["a = 1\nb", "other text\n!"]


def test_edits_that_do_not_follow_on_are_refused_whole_and_nothing_is_recorded(server, people):
    teacher, ann, bob = people.teacher("mr-t"), people.student("ann"), people.student("bob")
    number = a_class(server, teacher, ann, bob)
    good = Typist("x")
    good.type("y")
    fields = good.message("home", "good.py")
    no_base = {**fields, "path": "other.py"}
    no_base.pop("base")
    out_of_step = {"area": "home", "path": "good.py", "length": 99, "sent": 1, "edits": [[1, [99, [0, "z"]], ""]]}
    wrong = [
        no_base,                                                      # a stream that never started
        {**fields, "path": "b.py", "base": "abc", "length": 2},       # a base of another length
        {**fields, "path": "c.py", "edits": [[1, [5, [0, "z"]], ""]]},  # an edit of another text
        {**fields, "path": "d.py", "edits": [[1, [1, [0, "z"]], "evil"]]},  # no such kind
        {**fields, "path": "e.py", "edits": [[1, [1, [0, 5]], ""]]},  # a number as inserted text
        {**fields, "path": "f.py", "edits": [["1", [1], ""]]},
        {**fields, "area": f"user/{bob.username}"},                    # another student's files
        {**fields, "area": "course"},                                 # a course folder
        {**fields, "area": f"class/{number}"},
        {**fields, "area": "exam/999999"},                            # an exam that is not hers
        {**fields, "area": f"exams/1/{bob.username}"},
        {**fields, "path": "../../etc/passwd"},
        {**fields, "path": "a\x00b"},
    ]
    answers = asyncio.run(sending(server, ann, fields, *wrong, out_of_step))
    assert answers == ["edits_out_of_step", "bad_base", "bad_edits", "bad_edits", "bad_edits", "bad_edits",
                       "not_recorded", "not_recorded", "not_recorded", "no_such_exam", "not_recorded",
                       answers[11], answers[12], "edits_out_of_step"], answers
    assert answers[11] and answers[12]  # (the paths' own codes)
    chunks = replay(ann, "home", "good.py")
    assert list(rebuilt(chunks).values()) == ["xy"]  # the good one, which came first, alone
    for path in ("other.py", "b.py", "c.py", "d.py", "e.py", "f.py"):
        assert ann.request("GET", f"/api/replay/home/{path}").json()["chunks"] == []
    assert bob.request("GET", "/api/replay/home/good.py").json()["chunks"] == []


def test_an_exam_folders_edits_replay_under_the_exam_for_its_teacher(server, people):
    number, teacher, ann, ben = room(server, people)
    made = exam(teacher, number, minutes=30)
    typist = Typist()
    typist.type("def average(n):\n")
    typist.paste("    return sum(n) / len(n)\n")
    assert asyncio.run(sending(server, ann, typist.message(f"exam/{made['id']}", "average/average.py"))) == []
    chunks = replay(teacher, f"exams/{made['id']}/{ann.username}", "average/average.py")
    assert list(rebuilt(chunks).values()) == [typist.text]
    r = ann.request("GET", "/api/replay/home/average/average.py")
    assert (r.status_code, r.json()["error"]) == (403, "exam_running")  # (her home waits for the exam's end)
    r = ben.request("GET", f"/api/replay/exams/{made['id']}/{ann.username}/average/average.py")
    assert r.status_code == 403
    # Ben cannot write into her exam's replay: his exam/<id> is his own folder.
    theirs = Typist()
    theirs.type("forged")
    assert asyncio.run(sending(server, ben, theirs.message(f"exam/{made['id']}", "average/average.py"))) == []
    assert list(rebuilt(replay(teacher, f"exams/{made['id']}/{ann.username}", "average/average.py")).values()) \
        == [typist.text]


def test_malformed_edits_never_break_the_socket(server, people):
    """Hypothesis over what an `edits` message may hold: each is taken or
    refused with a code, never an internal error, and the socket answers on."""
    ann = people.student("fuzz")
    part = st.one_of(st.integers(-2, 50), st.lists(st.one_of(st.integers(-1, 9), st.text(max_size=3)), max_size=4),
                     st.text(max_size=3), st.none(), st.booleans())
    edit = st.one_of(st.lists(st.one_of(st.integers(-1, 10 ** 16), st.lists(part, max_size=5), st.text(max_size=2),
                                        st.none()), max_size=4),
                     st.just([1, [[0, "a"]], ""]), st.integers(), st.text(max_size=3))
    message = st.fixed_dictionaries({"area": st.sampled_from(["home", "exam/1", "user/x", ""]),
                                     "path": st.sampled_from(["a.py", "b/c.py", "", "/"]),
                                     "length": st.integers(0, 3), "sent": st.integers(0, 10),
                                     "edits": st.lists(edit, max_size=4)},
                                    optional={"base": st.sampled_from(["", "a", "ab", "abc"])})

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(message, min_size=1, max_size=6))
    def check(messages):
        answers = asyncio.run(sending(server, ann, *messages))
        assert "internal_error" not in answers and len(answers) <= len(messages)

    check()


@contextlib.asynccontextmanager
async def service(server, keep_bytes):
    """Replays in the test's process, on the server's database, recording
    into the home of whoever it is given."""
    pool = db.Pool(await asyncpg.create_pool(server.env["DATABASE_URL"], min_size=1, max_size=2, command_timeout=5),
                   acquire_timeout=3, size=2)

    class Homes:
        async def area(self, user, spec, write):
            if spec != "home":
                raise Refused(400, "not_recorded", "no")
            return Area.home(user["username"])

    try:
        yield Replays(pool, Homes(), keep_bytes, lambda: True)
    finally:
        await pool.close()


def test_what_is_kept_per_student_is_bounded_oldest_first(server, people):
    """Past REPLAY_KEEP_BYTES, a student's oldest rows go, down to four
    fifths of it; what the usage table says is what the rows hold."""
    ann = people.student("ann")
    user = user_of(server, ann.username)
    keep = 4000

    async def story():
        async with service(server, keep) as replays:
            for n in range(30):  # each stream one row, flushed at once (draining)
                stream = replays.stream(user)
                typist = Typist(f"file {n}\n")
                typist.paste("".join(chr(33 + (i * 7919 + n) % 90) for i in range(400)))  # (hardly compressible)
                await replays.add(stream, typist.message("home", f"f{n}.py"))
                replays.end(stream)
                await replays.flush()
            rows = await replays.pool.fetch(
                "SELECT path, bytes FROM edit_log WHERE user_id = $1 ORDER BY id", user["id"])
            usage = await replays.pool.fetchval("SELECT bytes FROM edit_log_usage WHERE user_id = $1", user["id"])
            return rows, usage

    rows, usage = asyncio.run(story())
    assert usage == sum(r["bytes"] for r in rows) <= keep
    paths = [r["path"] for r in rows]
    assert paths[-1] == "f29.py" and "f0.py" not in paths  # the newest kept, the oldest gone
    assert paths == [f"f{n}.py" for n in range(30 - len(paths), 30)]


def test_the_service_takes_only_edits_in_step(server, people):
    """Hypothesis over sequences of typing: whatever is taken keeps the
    stream's length in step with the text, and a refused message changes
    nothing of what the service holds."""
    ann = people.student("steps")
    user = user_of(server, ann.username)
    ops = st.lists(st.tuples(st.sampled_from(["type", "paste", "delete", "skip"]), st.text(min_size=1, max_size=5)),
                   max_size=12)

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(ops)
    def check(script):
        async def story():
            async with service(server, 1 << 20) as replays:
                stream = replays.stream(user)
                typist = Typist("start\n")
                for op, text in script:
                    if op == "delete":
                        typist.delete(len(text))
                    else:
                        getattr(typist, "type" if op == "skip" else op)(text)
                    fields = typist.message("home", "h.py")
                    if op == "skip":  # lost on the way: the next one is out of step
                        continue
                    held = replays.held
                    try:
                        await replays.add(stream, fields)
                    except Refused as e:
                        assert e.code == "edits_out_of_step" and replays.held == held
                        typist.based = False  # as the page does: from its text again
                        continue
                    assert stream.chains[("home", "h.py")].length == len(typist.text.encode("utf-16-le")) // 2
                replays.rows.clear()  # (nothing written: the test's own service)

        asyncio.run(story())

    check()
