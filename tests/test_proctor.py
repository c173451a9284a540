"""The proctor view (issue 33): the live class view in an exam's mode. A
teacher's /ws/class/<id>?exam=<exam> sends each student's row with their
exam fields (their end, their signals summed up as flags), and a signal a
student's page sends, their extra time and their saves in the exam folder
reach it live. Only a teacher of the exam's class may open it. A real
server (the shared one), real PostgreSQL."""
import asyncio
import json

import aiohttp
import asyncpg

from tests.live_support import a_class, user_of
from tests.test_exams import EXERCISE, exam, exam_run, room, save
from tests.test_live_class import TIMEOUT, until, watching

UPGRADE = {"Upgrade": "websocket", "Connection": "Upgrade"}  # a refusal comes before the handshake


async def snapshot(ws):
    """The socket's first snapshot: {username: row}."""
    while True:
        msg = json.loads((await ws.receive(timeout=TIMEOUT)).data)
        if msg["type"] == "snapshot":
            return {s["username"]: s for s in msg["students"]}


def test_a_students_signals_extra_time_and_saves_reach_the_proctor_view_live(server, people):
    number, teacher, ann, ben = room(server, people)
    made = exam(teacher, number, minutes=30)
    signals = f"/api/exams/{made['id']}/signals"

    async def story():
        async with watching(server, teacher, number, f"?exam={made['id']}") as (ws, _), \
                watching(server, teacher, number) as (plain, _):
            first = await snapshot(ws)
            assert set(first) == {ann.username, ben.username}
            assert first[ann.username]["exam"]["ends"] == made["ends"] == first[ben.username]["exam"]["ends"]
            assert first[ann.username]["exam"]["starts"] == made["starts"]
            assert first[ann.username]["exam"]["flags"] == {"paste_outside": 0, "focus_lost": 0, "offline": 0,
                                                            "second_session": 0}
            assert first[ann.username]["exam"]["latest"] is None
            assert "exam" not in next(iter((await snapshot(plain)).values()))  # the class view as it was

            r = ann.request("POST", signals, json={"kind": "paste", "chars": 300, "outside": True})
            assert r.status_code == 201, r.text
            seen = await until(ws, lambda s: s["username"] == ann.username and s["exam"]["flags"]["paste_outside"])
            assert seen["exam"]["flags"]["paste_outside"] == 1
            assert seen["exam"]["latest"] == {"kind": "paste", "at": seen["exam"]["latest"]["at"], "chars": 300,
                                              "outside": True}
            assert ann.request("POST", signals, json={"kind": "paste", "chars": 5, "outside": False}).status_code == 201
            assert ann.request("POST", signals, json={"kind": "focus_lost"}).status_code == 201
            seen = await until(ws, lambda s: s["username"] == ann.username and s["exam"]["flags"]["focus_lost"])
            assert seen["exam"]["flags"]["paste_outside"] == 1  # a paste from within the IDE is no flag
            assert seen["exam"]["latest"]["kind"] == "focus_lost"

            r = teacher.request("PUT", f"/api/exams/{made['id']}/students/{ben.username}/extra", json={"minutes": 10})
            assert r.status_code == 200, r.text
            seen = await until(ws, lambda s: s["username"] == ben.username and s["exam"]["ends"] != made["ends"])
            assert seen["exam"]["ends"] == r.json()["ends"]

            assert save(ben, f"exam/{made['id']}", "answer.py", "print(1)").status_code == 200
            seen = await until(ws, lambda s: s["username"] == ben.username and s["last_save_at"])
            assert seen["exam"]["ends"] == r.json()["ends"]  # every row of the mode has its fields
            assert seen["exam"]["last_run_at"] is None
            ended, output = await asyncio.to_thread(exam_run, server, ben, "answer.py", f"exam/{made['id']}")
            assert (ended["type"], output.strip()) == ("exit", "1"), ended
            seen = await until(ws, lambda s: s["username"] == ben.username and s["exam"]["last_run_at"])
            assert seen["exam"]["latest"]["kind"] == "run"
    asyncio.run(story())


def test_only_a_teacher_of_the_exams_class_may_open_its_proctor_view(server, people):
    number, teacher, ann, _ = room(server, people)
    other_teacher = people.teacher("mr-o")
    other_number = a_class(server, other_teacher, teacher, people.student("out"))  # Mr E teaches it too
    made = exam(teacher, number, minutes=30)
    r = teacher.request("PUT", f"/api/classes/{other_number}/exercises/average", json=EXERCISE)
    assert r.status_code == 200, r.text
    theirs = exam(teacher, other_number, minutes=30)

    def refusal(client, url):
        r = client.get(url, headers=UPGRADE)
        return r.status_code, r.json()["error"]
    assert refusal(other_teacher, f"/ws/class/{number}?exam={made['id']}") == (403, "not_your_class")
    # Their own class's socket does not open another class's exam.
    assert refusal(other_teacher, f"/ws/class/{other_number}?exam={made['id']}") == (403, "not_your_class")
    # Nor does a class's socket open an exam of another class of the same teacher's.
    assert refusal(teacher, f"/ws/class/{number}?exam={theirs['id']}") == (404, "not_this_class")
    assert refusal(ann, f"/ws/class/{number}?exam={made['id']}") == (403, "not_your_class")
    assert refusal(teacher, f"/ws/class/{number}?exam=999999999") == (404, "no_such_exam")
    assert refusal(teacher, f"/ws/class/{number}?exam=first") == (400, "bad_exam")

    async def refused():
        try:
            async with watching(server, other_teacher, other_number, f"?exam={made['id']}"):
                return None
        except aiohttp.WSServerHandshakeError as e:
            return e.status
    assert asyncio.run(refused()) == 403

    async def opened():  # the teacher of both, each exam in its own class
        async with watching(server, teacher, other_number, f"?exam={theirs['id']}") as (ws, _):
            return await snapshot(ws)
    rows = asyncio.run(opened())
    assert {row["exam"]["ends"] for row in rows.values()} == {theirs["ends"]}


def test_a_signal_and_a_change_of_extra_time_are_announced_at_once(server, people):
    """Announced on 'class_live' with the student's id, not left for the
    view's next resync (every 10 s)."""
    number, teacher, ann, ben = room(server, people)
    made = exam(teacher, number, minutes=30)
    ann_id, ben_id = (user_of(server, c.username)["id"] for c in (ann, ben))

    async def story():
        heard = asyncio.Queue()
        conn = await asyncpg.connect(server.env["DATABASE_URL"])
        try:
            await conn.add_listener("class_live", lambda *args: heard.put_nowait(int(args[3])))

            async def announced(who):
                while await asyncio.wait_for(heard.get(), TIMEOUT) != who:
                    pass
            r = await asyncio.to_thread(ann.request, "POST", f"/api/exams/{made['id']}/signals",
                                        json={"kind": "offline"})
            assert r.status_code == 201, r.text
            await announced(ann_id)
            r = await asyncio.to_thread(teacher.request, "PUT",
                                        f"/api/exams/{made['id']}/students/{ben.username}/extra", json={"minutes": 5})
            assert r.status_code == 200, r.text
            await announced(ben_id)
        finally:
            await conn.close()
    asyncio.run(story())
