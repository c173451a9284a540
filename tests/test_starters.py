"""A starter sent again to a student who changed their copy: the push keeps
theirs (changed: keep) and tells them, on their open IDE at once and on the
IDE they open later; they take the new version as a new file beside theirs,
or put it aside. Over the real API and /ws/run."""
import asyncio

from loadtest.run_client import RunClient
from tests.conftest import People
from tests.live_support import a_class

TIMEOUT = 30  # only catches a hang


def put(client, area, path, text):
    r = client.request("PUT", f"/api/files/{area}/{path}", data=text.encode(), headers={"If-Match": "*"})
    assert r.status_code == 200, r.text


def read(client, path):
    return client.get(f"/api/files/home/{path}").json().get("content")


def test_a_student_who_kept_theirs_hears_of_the_new_version_and_takes_it_beside(server):
    people = People(server)
    teacher, ann, ben, out = (people.teacher("st-t"), people.student("st-ann"), people.student("st-ben"),
                              people.student("st-out"))
    number = a_class(server, teacher, ann, ben)
    area = f"class/{number}"
    put(teacher, area, "lesson2.py", "# v1\n")
    assert teacher.post("/api/course/push", json={"area": area, "path": "lesson2.py"}).status_code == 200
    put(ann, "home", "lesson2.py", "# v1\nprint('mine')\n")  # Ann changed hers; Ben did not

    async def push_while_ann_watches():
        async with RunClient(server.url, ann.http.cookies.get_dict()) as rc:
            await rc.send(type="watch")
            put(teacher, area, "lesson2.py", "# v2\n")
            r = teacher.post("/api/course/push", json={"area": area, "path": "lesson2.py", "changed": "keep"})
            assert r.status_code == 200, r.text
            return r.json(), await rc.until("starter", TIMEOUT)
    report, told = asyncio.run(push_while_ann_watches())
    assert report["skipped"][ann.username] == [{"path": "lesson2.py", "reason": "changed"}]
    assert told["class"] == number and told["area"] == area and told["path"] == "lesson2.py"
    assert read(ann, "lesson2.py") == "# v1\nprint('mine')\n" and read(ben, "lesson2.py") == "# v2\n"

    # An IDE opened later finds it too; Ben, whose copy was updated, has nothing waiting.
    [waiting] = ann.get("/api/talk").json()["starters"]
    assert waiting["path"] == "lesson2.py" and waiting["class"] == number
    assert ben.get("/api/talk").json()["starters"] == []

    # Nobody else can take it, nor Ben who has none waiting.
    assert out.post(f"/api/classes/{number}/starters/take", json={"path": "lesson2.py"}).json()["error"] == \
        "not_your_class"
    assert ben.post(f"/api/classes/{number}/starters/take", json={"path": "lesson2.py"}).json()["error"] == \
        "no_such_starter"
    for bad in ({"path": "../x.py"}, {"path": 3}, {}):
        r = ann.post(f"/api/classes/{number}/starters/take", json=bad)
        assert r.status_code == 400 and "error" in r.json(), (bad, r.text)

    r = ann.post(f"/api/classes/{number}/starters/take", json={"path": "lesson2.py"})
    assert r.status_code == 200, r.text
    assert r.json()["path"] == "lesson2 (teacher).py"
    assert read(ann, "lesson2 (teacher).py") == "# v2\n" and read(ann, "lesson2.py") == "# v1\nprint('mine')\n"
    assert ann.get("/api/talk").json()["starters"] == []
    assert ann.post(f"/api/classes/{number}/starters/take", json={"path": "lesson2.py"}).status_code == 404

    # Sent again: waiting again; put aside, it is gone and nothing changed.
    put(teacher, area, "lesson2.py", "# v3\n")
    teacher.post("/api/course/push", json={"area": area, "path": "lesson2.py", "changed": "keep"})
    assert [s["path"] for s in ann.get("/api/talk").json()["starters"]] == ["lesson2.py"]
    assert ann.post(f"/api/classes/{number}/starters/aside", json={"path": "lesson2.py"}).status_code == 200
    assert ann.get("/api/talk").json()["starters"] == []
    assert read(ann, "lesson2.py") == "# v1\nprint('mine')\n"
