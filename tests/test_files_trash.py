"""Finding 9 of issue 11: deleting a folder keeps every file's last text
(restorable from the trash, like a deleted file), a student pushed a
starter before their first sign-in still gets the welcome file, and every
home is 0700 however it was made. Against the real server."""
import os
import stat

import pytest

from tests.conftest import PASSWORD, People


@pytest.fixture
def ada(people):
    return people.student("ada")


def put(client, path, text, etag=None):
    headers = {"If-Match": f'"{etag}"'} if etag else {}
    r = client.request("PUT", "/api/files/home/" + path, data=text.encode(), headers=headers)
    assert r.status_code == 200, r.text
    return r.json()["etag"]


def content(client, path):
    r = client.get("/api/files/home/" + path)
    return r.json()["content"] if r.status_code == 200 else r.status_code


def test_deleting_a_folder_keeps_its_files_and_the_trash_brings_them_back(ada):
    etag = put(ada, "proj/main.py", "print('draft')\n")
    put(ada, "proj/main.py", "print('final')\n", etag)
    put(ada, "proj/lib/util.py", "def f(): pass\n")
    assert ada.post("/api/files/home/proj/empty", json={"action": "mkdir"}).status_code == 201
    put(ada, "alone.py", "x = 1\n")

    assert ada.request("DELETE", "/api/files/home/alone.py").status_code == 200
    r = ada.request("DELETE", "/api/files/home/proj")
    assert r.status_code == 200, r.text
    assert r.json()["kept"] == 2 and r.json()["not_kept"] == 0
    assert content(ada, "proj/main.py") == 404

    trash = ada.get("/api/trash/home").json()["entries"]
    assert [(e["path"], e["kind"]) for e in trash] == [("proj", "folder"), ("alone.py", "file")]  # newest first
    folder = trash[0]
    assert folder["deleted"] >= trash[1]["deleted"]
    assert sorted(f["path"] for f in folder["files"]) == ["proj/lib/util.py", "proj/main.py"]
    # The last text of each file is in its history, like a deleted file's.
    versions = ada.get("/api/history/home/proj/main.py").json()["versions"]
    texts = {ada.get(f"/api/history/home/proj/main.py?version={v['version']}").json()["content"] for v in versions}
    assert "print('final')\n" in texts

    # One file back, then the rest of the folder (empty folders too).
    r = ada.post("/api/trash/home", json={"id": folder["id"], "path": "proj/main.py"})
    assert r.status_code == 200 and r.json() == {"restored": ["proj/main.py"], "skipped": []}, r.text
    assert content(ada, "proj/main.py") == "print('final')\n"
    left = ada.get("/api/trash/home").json()["entries"][0]
    assert [f["path"] for f in left["files"]] == ["proj/lib/util.py"]
    put(ada, "proj/lib/util.py", "# written since\n")
    r = ada.post("/api/trash/home", json={"id": folder["id"]})
    assert r.status_code == 409, r.text  # nothing restored: never over what is there now
    assert r.json()["skipped"][0]["path"] == "proj/lib/util.py" and r.json()["skipped"][0]["error"] == "conflict"
    assert content(ada, "proj/lib/util.py") == "# written since\n"
    assert ada.get("/api/files/home/proj/empty").json()["kind"] == "folder"
    # What could not come back stays in the trash.
    still = ada.get("/api/trash/home").json()["entries"]
    assert [(e["path"], [f["path"] for f in e["files"]]) for e in still] == [
        ("proj", ["proj/lib/util.py"]), ("alone.py", ["alone.py"])]

    r = ada.post("/api/trash/home", json={"id": trash[1]["id"]})
    assert r.json()["restored"] == ["alone.py"] and content(ada, "alone.py") == "x = 1\n"
    assert [e["path"] for e in ada.get("/api/trash/home").json()["entries"]] == ["proj"]
    bad = ada.post("/api/trash/home", json={"id": "../../etc/passwd"})
    assert bad.status_code == 404 and bad.json()["error"] == "not_in_trash"


def test_a_teacher_sees_a_students_trash_but_cannot_restore_it(people, ada):
    teacher = people.teacher("mrs-t")
    put(ada, "gone/a.py", "a\n")
    ada.request("DELETE", "/api/files/home/gone")
    entries = teacher.get(f"/api/trash/user/{ada.username}").json()["entries"]
    assert [e["path"] for e in entries] == ["gone"]
    r = teacher.post(f"/api/trash/user/{ada.username}", json={"id": entries[0]["id"]})
    assert r.status_code == 403 and content(ada, "gone/a.py") == 404


def test_a_student_pushed_a_starter_before_signing_in_gets_the_welcome_file_and_a_0700_home(start_server):
    server = start_server()  # a class of its own: the push goes to every student
    people = People(server)
    teacher = people.teacher("mrs-t")
    name = people.student("newbie", log_in=False).username  # imported, never signed in
    teacher.request("PUT", "/api/files/course/week1/start.py", data=b"# start here\n")
    r = teacher.post("/api/course/push", json={"path": "week1"})
    assert r.status_code == 200 and r.json()["copied"] == {name: ["week1/start.py"]}, r.text
    home = os.path.join(server.env["DATA_DIR"], "storage", "home", name)
    assert stat.S_IMODE(os.stat(home).st_mode) == 0o700  # made by the push

    newbie = server.client()
    newbie.login_ok(name, PASSWORD)
    names = {e["path"] for e in newbie.get("/api/files/home?tree=1").json()["entries"]}
    assert names == {"hello.py", "week1", "week1/start.py"}
    assert stat.S_IMODE(os.stat(home).st_mode) == 0o700
    # Once: deleted, it does not come back at the next sign-in.
    newbie.request("DELETE", "/api/files/home/hello.py")
    again = server.client()
    again.login_ok(name, PASSWORD)
    assert content(again, "hello.py") == 404


def test_a_home_made_0755_by_an_older_push_is_closed_at_sign_in(server, people):
    name = people.student("old", log_in=False).username
    home = os.path.join(server.env["DATA_DIR"], "storage", "home", name)
    os.makedirs(home, mode=0o755)
    os.chmod(home, 0o755)
    server.client().login_ok(name, PASSWORD)
    assert stat.S_IMODE(os.stat(home).st_mode) == 0o700
