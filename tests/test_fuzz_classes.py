"""The classes, roster, push, passwords and live-view endpoints under generated
hostile input (as test_fuzz_api.py does for the rest): sent by an
anonymous client, a student, a teacher of one class and an admin to one
real server, every answer is below 500 and JSON, and a refusal leaves the
accounts, the classes, their members, the push records and the files as
they were."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.live_support import a_class
from tests.test_fuzz_api import World, bodies, content_types, dumps, fuzz, fuzzed_server, queries, text, url_text

TABLES = ("SELECT id, name, is_default FROM classes ORDER BY id",
          "SELECT class_id, user_id FROM class_members ORDER BY 1, 2",
          "SELECT user_id, path, etag FROM pushed_files ORDER BY 1, 2")


class ClassWorld(World):
    def snapshot(self):
        with self.db.cursor() as cur:
            rows = []
            for query in TABLES:
                cur.execute(query)
                rows.append(cur.fetchall())
        return super().snapshot(), rows


@pytest.fixture(scope="module")
def world(postgres_url):
    with fuzzed_server(postgres_url, ClassWorld, editing_help=False) as w:
        w.number = a_class(w.server, "vic", "tess", name="7A")
        # Each course folder written once (so its lock file exists, as test_fuzz_api's course/).
        for who, area in (("teacher", f"class/{w.number}"), ("admin", "course")):
            r = w.clients[who].request("PUT", f"/api/files/{area}/starter.py", data=b"# start\n")
            assert r.status_code == 200, r.text
        yield w


roles = st.sampled_from(["anonymous", "student", "teacher", "admin"])
numbers = st.one_of(st.sampled_from(["1", "2", "999", "0", "9" * 18]), text.map(url_text))
names = st.one_of(text, st.sampled_from(["7A", "sam", "tess", "admin", "nobody", "vic"]))


@fuzz
@given(role=roles, body=bodies("name"), ctype=content_types)
def test_classes(world, role, body, ctype):
    world.send(role, "GET", "/api/classes")
    world.send(role, "POST", "/api/classes", body, ctype)


@fuzz
@given(role=roles, number=numbers, body=bodies("name"), ctype=content_types)
def test_rename(world, role, number, body, ctype):
    world.send(role, "POST", f"/api/classes/{number}", body, ctype)


@fuzz
@given(role=roles, number=numbers, add=st.one_of(st.lists(names, max_size=4), text), remove=st.lists(names, max_size=3),
       raw=bodies("add", "remove"), ctype=content_types, aimed=st.booleans())
def test_members(world, role, number, add, remove, raw, ctype, aimed):
    world.send(role, "GET", f"/api/classes/{number}/members")
    body = dumps({"add": add, "remove": remove}) if aimed else raw
    world.send(role, "POST", f"/api/classes/{number}/members", body, ctype)


@fuzz
@given(role=roles, query=st.one_of(queries, numbers.map(lambda n: "class=" + n)))
def test_roster(world, role, query):
    world.send(role, "GET", f"/api/roster?{query}")


@fuzz
@given(role=roles, body=bodies("path", "area", "students"), ctype=content_types,
       area=st.one_of(st.sampled_from(["course", "class/1", "class/2", "class/999", "class/", "class/a", "home"]), text),
       path=st.one_of(st.sampled_from(["starter.py", "", "../x", "nothing.py"]), text),
       students=st.one_of(st.none(), st.lists(names, max_size=3)), aimed=st.booleans())
def test_push(world, role, body, ctype, area, path, students, aimed):
    if aimed:
        body, ctype = dumps({"area": area, "path": path, "students": students}), "application/json"
    world.send(role, "POST", "/api/course/push", body, ctype)


@fuzz
@given(role=roles, number=numbers, students=st.one_of(st.none(), st.lists(names, max_size=3), text),
       raw=bodies("students"), ctype=content_types, aimed=st.booleans())
def test_class_passwords(world, role, number, students, raw, ctype, aimed):
    body = dumps({} if students is None else {"students": students}) if aimed else raw
    r = world.send(role, "POST", f"/api/classes/{number}/passwords", body, ctype)
    if r.status_code == 200:  # sam, the world's student, may have been given a new password: sign in with it
        for row in r.json()["rows"]:
            if row["username"] == "sam":
                world.clients["student"].login_ok("sam", row["password"])


@fuzz
@given(role=roles, number=numbers, method=st.sampled_from(["GET", "POST"]), query=queries)
def test_live_socket_without_a_websocket(world, role, number, method, query):
    world.send(role, method, f"/ws/class/{number}?{query}", b"" if method == "POST" else None)


@fuzz
@given(role=roles, number=st.sampled_from(["1", "2", "999"]), path=st.sampled_from(["starter.py", "", "x/../y"]),
       method=st.sampled_from(["GET", "PUT", "DELETE"]))
def test_class_course_folders(world, role, number, path, method):
    world.send(role, method, f"/api/files/class/{number}/{path}", b"# mine\n" if method == "PUT" else None)


def test_zz_the_server_logged_no_traceback(world):
    out = world.server.output()
    assert "Traceback" not in out and " ERROR " not in out, out[-5000:]
