"""Talking to the class (issue 24): a teacher's message reaches the open
IDEs of the class (or of a group of it) on every worker, and an IDE opened
a little later still shows it; students raise a hand, the teacher's live
socket sees the queue in order, and answering it lowers it in the
student's IDE. Only the class's teachers talk to it and see its hands;
students raise only their own, in their own class; everything is bounded."""
import asyncio
import contextlib
import json
import os
import time

import aiohttp

from loadtest.run_client import RunClient
from server import inbox, notify
from server.teaching import talk
from tests.conftest import PASSWORD, People
from tests.live_support import a_class
from tests.test_live_class import watching

TIMEOUT = 30  # seconds: only catches a hang


async def ide(server, client):
    """An open IDE of `client` that watches (so it is told what is said):
    (RunClient, the worker's pid)."""
    rc = RunClient(server.url, client.http.cookies.get_dict())
    await rc.open()
    await rc.send(type="watch")
    await rc.send(type="kill")  # answered after the watch began: messages are handled in turn
    assert (await rc.until("error", TIMEOUT))["error"] == "not_running"
    return rc, int(rc.ws._response.headers["X-Worker-Pid"])


async def ides_on_both_workers(server, students, stack):
    """One IDE per student, the last one reopened until the IDEs are on
    both workers: {username: RunClient}."""
    opened = {}
    for student in students:
        opened[student.username] = await ide(server, student)
    last = students[-1].username
    for _ in range(40):
        if len({pid for _, pid in opened.values()}) == 2:
            break
        await opened[last][0].close()
        opened[last] = await ide(server, students[-1])
    for rc, _ in opened.values():
        stack.push_async_callback(rc.close)
    assert len({pid for _, pid in opened.values()}) == 2, "the IDEs never reached both workers"
    return {username: rc for username, (rc, _) in opened.items()}


async def next_of(rc, kind, timeout=TIMEOUT):
    """The next message of type `kind` on an IDE socket."""
    return await rc.until(kind, timeout)


async def hears_nothing(rc, kind, seconds=1.5):
    with contextlib.suppress(asyncio.TimeoutError):
        while True:
            message = await rc.receive(seconds)
            assert message["type"] != kind, message


async def hands_until(ws, wanted, timeout=TIMEOUT):
    """Read the class socket until a `hands` message satisfies `wanted(hands)`."""
    deadline = time.monotonic() + timeout
    while True:
        msg = await ws.receive(timeout=max(0.1, deadline - time.monotonic()))
        assert msg.type == aiohttp.WSMsgType.TEXT, (msg.type, msg.data)
        message = json.loads(msg.data)
        if "hands" in message and wanted(message["hands"]):
            return message["hands"]


def broadcast(teacher, number, text, students=None):
    body = {"text": text} if students is None else {"text": text, "students": students}
    return teacher.post(f"/api/classes/{number}/messages", json=body)


def test_a_broadcast_reaches_every_open_ide_of_the_class_on_both_workers_and_a_group_only_the_group(server2):
    people = People(server2)
    teacher = people.teacher("mrs-t", display_name="Mrs Teach")
    students = [people.student(f"s{n}") for n in range(5)]
    outsider = people.student("out")
    number = a_class(server2, teacher, *students)

    async def story():
        async with contextlib.AsyncExitStack() as stack:
            ides = await ides_on_both_workers(server2, students, stack)
            other, _ = await ide(server2, outsider)
            stack.push_async_callback(other.close)

            r = broadcast(teacher, number, "Save your work, we stop in 5 minutes.")
            assert r.status_code == 201, r.text
            assert r.json()["sent_to"] == 5
            for rc in ides.values():
                message = await next_of(rc, "class_message")
                assert message["text"] == "Save your work, we stop in 5 minutes."
                assert message["from"] == "Mrs Teach" and message["class"] == number
            await hears_nothing(other, "class_message")

            group = [students[0].username, students[3].username]
            r = broadcast(teacher, number, "Look at line 4: lenght is not len.", group)
            assert r.status_code == 201 and r.json()["sent_to"] == 2, r.text
            for username, rc in ides.items():
                if username in group:
                    assert (await next_of(rc, "class_message"))["text"] == "Look at line 4: lenght is not len."
                else:
                    await hears_nothing(rc, "class_message")

    asyncio.run(story())

    # An IDE opened a little later shows the latest message for its student.
    latest = students[0].get("/api/talk").json()["messages"]
    assert [m["text"] for m in latest] == ["Look at line 4: lenght is not len."]
    assert [m["text"] for m in students[1].get("/api/talk").json()["messages"]] == \
        ["Save your work, we stop in 5 minutes."]
    assert outsider.get("/api/talk").json() == {"messages": [], "hands": [], "starters": []}


def test_hands_queue_in_order_and_an_answer_lowers_the_students_hand(server2):
    people = People(server2)
    teacher = people.teacher("mr-h", display_name="Mr Helper")
    ada, bob, cy = (people.student(n) for n in ("ada", "bob", "cy"))
    number = a_class(server2, teacher, ada, bob, cy)

    async def story():
        async with contextlib.AsyncExitStack() as stack:
            ws, _ = await stack.enter_async_context(watching(server2, teacher, number))
            assert await hands_until(ws, lambda hands: hands == []) == []
            rc, _ = await ide(server2, ada)
            stack.push_async_callback(rc.close)

            r = ada.post(f"/api/classes/{number}/hand", json={"note": "My loop never stops", "file": "loop.py",
                                                              "line": 7})
            assert r.status_code == 200, r.text
            assert (await next_of(rc, "hand"))["up"] is True  # her other tabs follow
            assert bob.post(f"/api/classes/{number}/hand", json={}).status_code == 200
            assert cy.post(f"/api/classes/{number}/hand", json={"note": "?"}).status_code == 200
            # Raising again keeps her turn and changes the note.
            assert ada.post(f"/api/classes/{number}/hand", json={"note": "Stuck on the loop"}).status_code == 200
            hands = await hands_until(ws, lambda h: len(h) == 3 and h[0]["note"] == "Stuck on the loop")
            assert [h["username"] for h in hands] == [ada.username, bob.username, cy.username]
            assert hands[0]["display_name"] == "Ada" and hands[0]["file"] is None and hands[0]["raised_at"]
            assert teacher.get(f"/api/classes/{number}/hands").json()["hands"] == hands

            r = teacher.request("DELETE", f"/api/classes/{number}/hands/{ada.username}")
            assert r.status_code == 200, r.text
            told = await next_of(rc, "hand")
            while told["up"]:  # her raises, told first
                told = await next_of(rc, "hand")
            assert told["up"] is False and told["answered_by"] == "Mr Helper" and told["class"] == number
            hands = await hands_until(ws, lambda h: len(h) == 2)
            assert [h["username"] for h in hands] == [bob.username, cy.username]
            # Answered twice (two teachers at once): the second is told.
            r = teacher.request("DELETE", f"/api/classes/{number}/hands/{ada.username}")
            assert r.status_code == 404 and r.json()["error"] == "no_such_hand"
            # Bob lowers his own.
            assert bob.request("DELETE", f"/api/classes/{number}/hand").status_code == 200
            hands = await hands_until(ws, lambda h: len(h) == 1)
            assert hands[0]["username"] == cy.username

    asyncio.run(story())
    assert cy.get("/api/talk").json()["hands"][0]["class"] == number
    assert ada.get("/api/talk").json()["hands"] == []


def test_only_the_class_may_talk_and_raise_hands(server):
    people = People(server)
    teacher, other = people.teacher("mrs-t"), people.teacher("mr-o")
    ada, out = people.student("ada"), people.student("out")
    number = a_class(server, teacher, ada)
    a_class(server, other, out)
    base = f"/api/classes/{number}"

    for client in (other, ada):
        r = broadcast(client, number, "hello")
        assert r.status_code == 403 and r.json()["error"] == "not_your_class", r.text
        r = client.get(f"{base}/hands")
        assert r.status_code == 403 and r.json()["message"], r.text
    r = other.request("DELETE", f"{base}/hands/{ada.username}")
    assert r.status_code == 403 and r.json()["error"] == "not_your_class"
    r = out.post(f"{base}/hand", json={"note": "let me in"})
    assert r.status_code == 403 and r.json()["message"] == "You are not in this class."
    r = teacher.post(f"{base}/hand", json={})
    assert r.status_code == 403 and r.json()["error"] == "students_only"
    r = ada.request("DELETE", f"{base}/hands/{ada.username}")  # a student answering hands
    assert r.status_code == 403
    r = server.client().post(f"{base}/hand", json={})
    assert r.status_code in (401, 403)
    assert broadcast(teacher, 999999999, "hi").status_code == 404
    assert teacher.get(f"{base}/hands").json()["hands"] == []  # nothing happened


def test_bad_bodies_and_groups_are_refused_and_change_nothing(server):
    people = People(server)
    teacher = people.teacher("mrs-t")
    ada, bob, out = people.student("ada"), people.student("bob"), people.student("out")
    staff = people.teacher("mr-x")
    number = a_class(server, teacher, ada, bob, staff)
    base = f"/api/classes/{number}"
    bad = [({"text": ""}, "empty_message"), ({"text": "   \n "}, "empty_message"), ({}, "missing_field"),
           ({"text": 5}, "wrong_type"), ({"text": "x" * 501}, "too_long"), ({"text": "x" * 6000}, "too_long"),
           ({"text": "hi", "students": "ada"}, "wrong_type"), ({"text": "hi", "students": [1]}, "wrong_type"),
           ({"text": "hi", "students": []}, "no_students")]
    for body, code in bad:
        r = teacher.post(f"{base}/messages", json=body)
        assert r.status_code == 400 and r.json()["error"] == code, (body, r.text)
    r = teacher.post(f"{base}/messages", data=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"] == "malformed_json"
    r = teacher.post(f"{base}/messages", json={"text": "hi", "students": [ada.username, out.username, staff.username,
                                                                             "nobody"]})
    assert r.status_code == 400 and r.json()["error"] == "not_in_class"
    assert out.username in r.json()["message"] and staff.username in r.json()["message"]
    assert "nobody" in r.json()["message"] and ada.username not in r.json()["message"]
    assert ada.get("/api/talk").json()["messages"] == []

    for body, code in [({"note": "n" * 201}, "too_long"), ({"note": 3}, "wrong_type"), ({"line": "7"}, "wrong_type"),
                       ({"line": 0}, "bad_line"), ({"line": True}, "wrong_type"), ({"file": "f" * 301}, "too_long"),
                       ({"line": 10 ** 30}, "bad_line")]:
        r = ada.post(f"{base}/hand", json=body)
        assert r.status_code == 400 and r.json()["error"] == code, (body, r.text)
    assert teacher.get(f"{base}/hands").json()["hands"] == []
    r = teacher.request("DELETE", f"{base}/hands/{ada.username}")
    assert r.status_code == 404 and "no hand up" in r.json()["message"]


def test_messages_and_raised_hands_are_rate_limited_per_class_and_per_student(server):
    people = People(server)
    teacher = people.teacher("mrs-t")
    ada, bob = people.student("ada"), people.student("bob")
    number = a_class(server, teacher, ada, bob)
    for n in range(talk.MESSAGES_PER_MINUTE):
        assert broadcast(teacher, number, f"message {n}").status_code == 201
    r = broadcast(teacher, number, "one too many")
    assert r.status_code == 429 and r.json()["error"] == "too_many_messages" and r.headers["Retry-After"]

    for n in range(talk.HAND_RAISES):
        assert ada.post(f"/api/classes/{number}/hand", json={"note": str(n)}).status_code == 200
        assert ada.request("DELETE", f"/api/classes/{number}/hand").status_code == 200
    r = ada.post(f"/api/classes/{number}/hand", json={})
    assert r.status_code == 429 and r.json()["error"] == "too_many_hands"
    # Her classmate, behind the same school address, is not held back.
    assert bob.post(f"/api/classes/{number}/hand", json={}).status_code == 200
    assert [h["username"] for h in teacher.get(f"/api/classes/{number}/hands").json()["hands"]] == [bob.username]


class FakeListener:
    def listen(self, channel, callback):
        self.heard = callback

    def on_gap(self, callback):
        self.gap = callback


class Notifications:
    """A connection that keeps what it is asked to notify."""

    def __init__(self):
        self.sent = []

    async def execute(self, _sql, channel, payload):
        self.sent.append((channel, payload))


def test_a_message_for_a_whole_school_fits_in_notifications_and_reaches_only_its_users():
    async def story():
        listener, conn = FakeListener(), Notifications()
        box = inbox.Inbox(None, listener)
        got = {}
        for user_id in (7, 2999, 5000):
            box.open(user_id, lambda m, u=user_id: got.setdefault(u, []).append(m) or asyncio.sleep(0))
        message = {"type": "class_message", "text": "é" * talk.MAX_TEXT, "from": '"\\' * 100}
        await box.send(conn, list(range(1, 3001)), message)
        assert len(conn.sent) > 1
        assert all(channel == inbox.CHANNEL and len(payload.encode()) <= notify.MAX_PAYLOAD
                   for channel, payload in conn.sent)
        for _, payload in conn.sent:
            listener.heard(payload)
        await asyncio.sleep(0.05)
        assert got == {7: [message], 2999: [message]}  # 5000 was not sent it

    asyncio.run(story())


def test_a_slow_ide_holds_a_bounded_queue_and_is_told_it_missed_some():
    async def story():
        listener = FakeListener()
        box = inbox.Inbox(None, listener)
        release, sent = asyncio.Event(), []

        async def send(message):
            await release.wait()
            sent.append(message)
        box.open(1, send)
        for n in range(1000):
            listener.heard(json.dumps({"u": [1], "m": {"type": "hand", "n": n}}))
        listener.heard("not json")  # ignored
        assert all(len(b.pending) <= inbox.PENDING_MAX for b in box.boxes[1])
        release.set()
        await asyncio.sleep(0.05)
        assert sent[0] == inbox.MISSED and sent[-1] == {"type": "hand", "n": 999}
        assert len(sent) <= inbox.PENDING_MAX + 2
        listener.gap()  # notifications may have been lost: the page asks again
        await asyncio.sleep(0.05)
        assert sent[-1] == inbox.MISSED

    asyncio.run(story())


def test_a_message_and_a_hand_cross_from_one_instance_to_another(start_server, fresh_db, data_dir):
    """Two server instances on one database: the teacher on one, the
    student's IDE on the other."""
    storage = os.path.join(data_dir, "shared-storage")
    a = start_server(data_dir=os.path.join(data_dir, "a"), STORAGE_ROOT=storage)
    b = start_server(data_dir=os.path.join(data_dir, "b"), STORAGE_ROOT=storage)
    teacher = People(a).teacher("mrs-a", display_name="Mrs A")
    student = People(a).student("ada", log_in=False)
    student_b = b.client()
    student_b.login_ok(student.username, PASSWORD)
    student_b.username = student.username
    number = a_class(a, teacher, student)

    async def story():
        async with contextlib.AsyncExitStack() as stack:
            ws, _ = await stack.enter_async_context(watching(a, teacher, number))
            rc, _ = await ide(b, student_b)
            stack.push_async_callback(rc.close)
            assert broadcast(teacher, number, "From the other instance").status_code == 201
            assert (await next_of(rc, "class_message"))["text"] == "From the other instance"
            assert student_b.post(f"/api/classes/{number}/hand", json={"note": "over here"}).status_code == 200
            hands = await hands_until(ws, lambda h: len(h) == 1)
            assert hands[0]["note"] == "over here"

    asyncio.run(story())
