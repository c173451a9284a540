"""A teacher helps with passwords (issue 24): new passwords for the students
of a class they teach (one, some or all; their sessions end, the audit log
says who did it to whom), never for staff nor for other classes' students;
slips print PUBLIC_URL, the address students use, which the server shows
at start-up."""
import json

import pytest

from server import public_url
from tests.conftest import EDITING_HELP, PASSWORD, PUBLIC_URL as PUBLIC, People
from tests.helpers import sql
from tests.live_support import a_class
from loadtest.harness import ADMIN_PASSWORD


@pytest.fixture
def server(public_server):
    return public_server


@pytest.fixture
def room(server):
    """A class of the test's own: (class id, its teacher, two students, an
    outsider student, another class's teacher, an admin)."""
    people = People(server)
    teacher = people.teacher("mrs-t", display_name="Mrs T")
    ann, ben = people.student("ann", display_name="Ann Smith"), people.student("ben", display_name="Ben Jones")
    out, other = people.student("out"), people.teacher("mr-o")
    number = a_class(server, teacher, ann, ben)
    a_class(server, other, out)
    admin = server.client()
    admin.login_ok("admin", ADMIN_PASSWORD)
    return number, teacher, ann, ben, out, other, admin


def passwords(client, number, students=None):
    return client.post(f"/api/classes/{number}/passwords", json={} if students is None else {"students": students})


def audit_rows(server, actor, subject):
    return [(action, detail) for action, detail in sql(
        server.env["DATABASE_URL"], "SELECT action, detail FROM audit_log WHERE actor = %s AND subject = %s "
                                    "ORDER BY id", actor, subject)]


def test_a_teacher_resets_a_students_password(server, room):
    number, teacher, ann, ben, *_ = room
    r = passwords(teacher, number, [ann.username])
    assert r.status_code == 200, r.text
    body = r.json()
    [row] = body["rows"]
    assert row["username"] == ann.username and row["display_name"] == "Ann Smith" and row["class"] == body["class"]["name"]
    assert body["sessions_ended"] == 1
    # Her session ended; the old password no longer works, the new one does.
    assert ann.get("/api/me").json()["error"] == "session_invalid"
    assert server.client().login(ann.username, PASSWORD).status_code == 401
    assert server.client().login(ann.username, row["password"]).status_code == 200
    assert ben.get("/api/me").status_code == 200  # nobody else's changed
    [(action, detail)] = [a for a in audit_rows(server, teacher.username, ann.username) if a[0] == "reset_password"]
    detail = detail if isinstance(detail, dict) else json.loads(detail)
    assert detail["class_id"] == number and detail["by"] == "teacher" and detail["sessions_ended"] == 1


def test_new_passwords_and_slips_for_the_whole_class(server, room):
    number, teacher, ann, ben, out, *_ = room
    r = passwords(teacher, number)
    assert r.status_code == 200, r.text
    body = r.json()
    assert sorted(row["username"] for row in body["rows"]) == sorted([ann.username, ben.username])
    # The slips print the address students use, never the one this request came to.
    assert body["sign_in_at"] == {"url": PUBLIC, "guessed": False, "loopback": False}
    assert "127.0.0.1" not in r.text
    for row in body["rows"]:
        assert server.client().login(row["username"], row["password"]).status_code == 200
        assert server.client().login(row["username"], PASSWORD).status_code == 401
    assert server.client().login(out.username, PASSWORD).status_code == 200  # another class's: untouched


def test_staff_and_other_classes_students_are_refused_and_nothing_changes(server, room):
    number, teacher, ann, ben, out, other, admin = room
    hashes = lambda: sql(server.env["DATABASE_URL"], "SELECT username, password_hash FROM users ORDER BY username")
    before = hashes()
    refusals = [
        (teacher, [other.username], "staff_password"),  # a teacher (of another class)
        (teacher, [teacher.username], "staff_password"),  # oneself: the account's own page does that
        (teacher, ["admin"], "staff_password"),
        (teacher, [out.username], "not_your_student"),  # another class's student
        (teacher, [ann.username, out.username], "not_your_student"),  # all or nothing
        (teacher, ["nobody-at-all"], "not_your_student"),
        (admin, [teacher.username], "staff_password"),  # admins reset staff in Accounts, one at a time
    ]
    for client, names, code in refusals:
        r = passwords(client, number, names)
        assert r.status_code == 403 and r.json()["error"] == code, (names, r.text)
        assert r.json()["message"].endswith(".")
    for client in (other, ann):
        r = passwords(client, number, [ann.username])
        assert r.status_code == 403 and r.json()["message"], r.text
    r = passwords(other, number)  # the whole class, by a teacher of another one
    assert r.status_code == 403 and r.json()["error"] == "not_your_class"
    assert hashes() == before
    assert ann.get("/api/me").status_code == 200 and teacher.get("/api/me").status_code == 200
    assert server.client().post(f"/api/classes/{number}/passwords", json={}).status_code in (401, 403)


def test_an_admin_may_do_it_for_any_class(server, room):
    number, teacher, ann, ben, out, other, admin = room
    r = passwords(admin, number, [ben.username])
    assert r.status_code == 200, r.text
    assert server.client().login(ben.username, r.json()["rows"][0]["password"]).status_code == 200
    assert audit_rows(server, "admin", ben.username)[-1][0] == "reset_password"


@pytest.mark.parametrize("body, code", [
    (b"not json", "malformed_json"),
    (b"[1, 2]", "malformed_json"),
    (b'{"students": "ann"}', "wrong_type"),
    (b'{"students": [1, 2]}', "wrong_type"),
    (b'{"students": ["' + b"x" * 65 + b'"]}', "wrong_type"),
    (b'{"students": []}', "no_students"),
])
def test_bad_bodies_get_a_json_400(server, room, body, code):
    number, teacher, ann, *_ = room
    r = teacher.post(f"/api/classes/{number}/passwords", data=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"] == code, r.text
    assert teacher.post("/api/classes/99999999/passwords", json={}).json()["error"] == "no_such_class"
    assert server.client().login(ann.username, PASSWORD).status_code == 200


def test_the_server_says_at_start_up_where_students_sign_in(server, shared_servers):
    server.wait_for_line(f"students sign in at {PUBLIC} \\(PUBLIC_URL")
    # The tests' other servers listen on 127.0.0.1: a guess no student can use, and said so.
    plain = shared_servers.get(**EDITING_HELP)  # the shared `server` of the other tests
    said = plain.wait_for_line("students sign in at http://127.0.0.1:")
    assert "works only on this computer" in said and "set PUBLIC_URL" in said


def test_public_url_is_validated_and_guessed():
    assert public_url.parse(" https://py.school.org/ ") == "https://py.school.org"
    assert public_url.parse("") == ""
    for bad in ("ftp://x", "http://", "http://u:p@host", "http://host:99999", "http://host/?q=1",
                "javascript:alert(1)", "http://a b", "http://h#x"):
        with pytest.raises(ValueError):
            public_url.parse(bad)
    assert public_url.guess("10.1.2.3", 8888) == "http://10.1.2.3:8888"
    assert public_url.guess("::1", 80) == "http://[::1]"
    guess = public_url.guess("0.0.0.0", 8888)  # this host's network address, if it has one
    assert guess.endswith(":8888") and "0.0.0.0" not in guess
    assert public_url.is_loopback("http://127.0.0.1:8888") and public_url.is_loopback("http://localhost")
    assert not public_url.is_loopback(PUBLIC)
