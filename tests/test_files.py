"""Files as students and teachers meet them, against the real server: saves
never silently lose an edit, paths never escape, roles hold, history
restores, teachers read and hand out files."""
import io
import os
import time
import zipfile

import pytest
import requests

from tests.conftest import People
from tests.helpers import put


@pytest.fixture
def storage(server):
    return os.path.join(server.env["DATA_DIR"], "storage")


@pytest.fixture
def ada(people):
    return people.student("ada", display_name="Ada Lovelace")


def home_of(storage, client):
    return os.path.join(storage, "home", client.username)


def test_first_login_creates_a_home_with_a_welcome_file(ada, storage):
    listing = ada.get("/api/files/home").json()
    assert [e["name"] for e in listing["entries"]] == ["hello.py"]
    hello = ada.get("/api/files/home/hello.py")
    assert hello.status_code == 200 and "input(" in hello.json()["content"]
    assert hello.headers["ETag"] == f'"{hello.json()["etag"]}"'
    assert os.path.isfile(os.path.join(home_of(storage, ada), "hello.py"))


def test_save_then_load_round_trip(ada):
    r = put(ada, "lesson1/sum.py", "a = int(input())\nprint(a + 1)\n")
    assert r.status_code == 200, r.text
    etag = r.json()["etag"]
    got = ada.get("/api/files/home/lesson1/sum.py").json()
    assert got["content"] == "a = int(input())\nprint(a + 1)\n" and got["etag"] == etag
    assert put(ada, "lesson1/sum.py", "print(2)\n", etag).status_code == 200


def test_a_small_file_comes_as_it_is_and_a_large_one_gzipped(ada):
    """Gzipping a few KB of JSON costs the worker more than it saves on a
    class's network; a large file's answer is still compressed."""
    for size, gzipped in ((3000, False), (40000, True)):
        assert put(ada, f"g{size}.py", "x = 1\n" * (size // 6)).status_code == 200
        r = ada.get(f"/api/files/home/g{size}.py", headers={"Accept-Encoding": "gzip"})
        assert r.status_code == 200 and r.json()["content"] == "x = 1\n" * (size // 6)
        assert (r.headers.get("Content-Encoding") == "gzip") is gzipped, (size, r.headers)


def test_two_tabs_editing_one_file_never_lose_an_edit_silently(server, ada):
    etag = put(ada, "essay.py", "# v1\n").json()["etag"]
    other_tab = server.client()
    other_tab.http.cookies.update(ada.http.cookies)
    # Both opened v1. The other tab saves first.
    r1 = put(other_tab, "essay.py", "# v2 from tab B\n", etag)
    assert r1.status_code == 200
    # Tab A still believes v1 is current: refused, and shown what is there now.
    r2 = put(ada, "essay.py", "# v2 from tab A\n", etag)
    assert r2.status_code == 409
    body = r2.json()
    assert body["error"] == "conflict" and body["current"]["etag"] == r1.json()["etag"]
    assert body["current"]["content"] == "# v2 from tab B\n"
    assert ada.get("/api/files/home/essay.py").json()["content"] == "# v2 from tab B\n"
    # Tab A resolves by saving its text over the version it has now seen.
    r3 = put(ada, "essay.py", "# merged\n", body["current"]["etag"])
    assert r3.status_code == 200
    versions = ada.get("/api/history/home/essay.py").json()["versions"]
    contents = {ada.get(f"/api/history/home/essay.py?version={v['version']}").json()["content"]
                for v in versions}
    assert contents == {"# v1\n", "# v2 from tab B\n"}  # every earlier text is still there


def test_create_without_if_match_refuses_to_overwrite(ada):
    assert put(ada, "new.py", "x = 1\n").status_code == 200
    r = put(ada, "new.py", "x = 2\n")
    assert r.status_code == 409 and r.json()["current"]["content"] == "x = 1\n"


def test_history_lists_and_restores_and_restore_is_a_save(ada):
    etag = put(ada, "h.py", "one\n").json()["etag"]
    etag = put(ada, "h.py", "two\n", etag).json()["etag"]
    put(ada, "h.py", "three\n", etag)
    versions = ada.get("/api/history/home/h.py").json()["versions"]
    assert [v["size"] for v in versions] == [4, 4]  # "two\n", "one\n", newest first
    oldest = versions[-1]["version"]
    r = ada.post("/api/files/home/h.py", json={"action": "restore", "version": oldest})
    assert r.status_code == 200
    assert ada.get("/api/files/home/h.py").json()["content"] == "one\n"
    after = ada.get("/api/history/home/h.py").json()["versions"]
    assert len(after) == 3 and ada.get(
        f"/api/history/home/h.py?version={after[0]['version']}").json()["content"] == "three\n"
    bad = ada.post("/api/files/home/h.py", json={"action": "restore", "version": "../../etc/passwd"})
    assert bad.status_code == 404


def test_history_keeps_only_the_last_n_versions(start_server):
    client = People(start_server(HISTORY_VERSIONS=3)).student("ada")
    etag = None
    for i in range(6):
        etag = put(client, "n.py", f"v{i}\n", etag).json()["etag"]
    versions = client.get("/api/history/home/n.py").json()["versions"]
    assert len(versions) == 3


def test_folders_move_delete_and_tree(ada):
    assert ada.post("/api/files/home/proj", json={"action": "mkdir"}).status_code == 201
    assert ada.post("/api/files/home/proj", json={"action": "mkdir"}).status_code == 409
    put(ada, "proj/a.py", "a\n")
    r = ada.post("/api/files/home/proj/a.py", json={"action": "move", "to": "proj/sub/b.py"})
    assert r.status_code == 200, r.text
    tree = ada.get("/api/files/home?tree=1").json()["entries"]
    assert {e["path"] for e in tree} >= {"proj", "proj/sub", "proj/sub/b.py"}
    assert "proj/a.py" not in {e["path"] for e in tree}
    assert ada.post("/api/files/home/proj", json={"action": "move", "to": "proj/inner"}).status_code == 400
    assert ada.request("DELETE", "/api/files/home/proj").status_code == 200
    assert ada.get("/api/files/home/proj/sub/b.py").status_code == 404
    assert ada.request("DELETE", "/api/files/home/").status_code == 400


def test_a_deleted_file_can_be_restored_from_history(ada):
    put(ada, "gone.py", "precious\n")
    ada.request("DELETE", "/api/files/home/gone.py")
    versions = ada.get("/api/history/home/gone.py").json()["versions"]
    r = ada.post("/api/files/home/gone.py", json={"action": "restore", "version": versions[0]["version"]})
    assert r.status_code == 200 and ada.get("/api/files/home/gone.py").json()["content"] == "precious\n"


def test_upload_and_download(ada):
    files = [("files", ("data.csv", b"a,b\n1,2\n", "text/csv")), ("files", ("pic.png", b"\x89PNG\x00\x01", "image/png"))]
    r = ada.post("/api/upload/home/inputs", files=files)
    assert r.status_code == 200, r.text
    assert {m["path"] for m in r.json()["saved"]} == {"inputs/data.csv", "inputs/pic.png"}
    binary = ada.get("/api/files/home/inputs/pic.png").json()
    assert binary["content"] is None and binary["encoding"] is None
    d = ada.get("/api/files/home/inputs/pic.png?download=1")
    assert d.content == b"\x89PNG\x00\x01" and "attachment" in d.headers["Content-Disposition"]
    again = ada.post("/api/upload/home/inputs", files=[("files", ("data.csv", b"new", "text/csv"))])
    assert again.status_code == 409 and again.json()["refused"][0]["error"] == "conflict"
    hostile = ada.post("/api/upload/home/inputs", files=[("files", ("../../evil.py", b"x", "text/plain"))])
    assert hostile.status_code == 400


def test_zip_download_of_a_folder(ada):
    put(ada, "z/one.py", "1\n")
    put(ada, "z/deep/two.py", "2\n")
    r = ada.get("/api/zip/home/z")
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(r.content))
    assert sorted(archive.namelist()) == ["deep/two.py", "one.py"]
    assert archive.read("deep/two.py") == b"2\n"


HOSTILE = [
    "../ada2/secret.py", "..", "a/../../x", "%2e%2e/x", "%2E%2E%2Fx", "..%2fx", "/etc/passwd",
    "%2Fetc%2Fpasswd", "a%00b", "a%0Ab", "a%1Bb", "x" * 300, "/".join(["d"] * 40), ".~pyc-tmp-123",
    "sub/.~pyc-lock", "%E2%80%AEyp.exe", "a%E2%80%8Bb", "%EF%BC%8E%EF%BC%8E", "a\\..\\b",
    ".%2e/x", " leading", "trailing ",
]


@pytest.mark.parametrize("path", HOSTILE)
def test_hostile_paths_are_refused_and_touch_nothing(server, ada, storage, path):
    before = sorted(os.walk(storage))
    url = server.url + "/api/files/home/" + path
    for method in ("GET", "PUT", "DELETE"):
        r = ada.http.request(method, url, data=b"pwned", headers={"X-XSRFToken": ada.xsrf()}, timeout=10)
        assert r.status_code in (400, 404), (method, path, r.status_code, r.text)
        assert r.json()["error"], r.text
    assert sorted(os.walk(storage)) == before


def test_symlinks_planted_in_a_home_are_not_followed(people, ada, storage):
    bob = people.student("bob")
    put(bob, "answers.py", "secret = 42\n")
    home = home_of(storage, ada)
    # As a program run by ada could do: links to bob's home, /etc and a file.
    os.symlink(home_of(storage, bob), os.path.join(home, "bobs"))
    os.symlink("/etc", os.path.join(home, "etc"))
    os.symlink("/etc/passwd", os.path.join(home, "passwd"))
    for path in ("bobs/answers.py", "bobs", "etc/passwd", "passwd"):
        r = ada.get("/api/files/home/" + path)
        assert r.status_code == 400 and "secret" not in r.text and "root:" not in r.text, (path, r.text)
        assert put(ada, path, "overwrite").status_code == 400
        assert ada.get("/api/zip/home/" + path).status_code == 400
    assert ada.request("DELETE", "/api/files/home/bobs/answers.py").status_code == 400
    moved = ada.post("/api/files/home/hello.py", json={"action": "move", "to": "bobs/hello.py"})
    assert moved.status_code == 400
    names = [e["name"] for e in ada.get("/api/files/home").json()["entries"]]
    assert "bobs" not in names and "passwd" not in names
    archive = zipfile.ZipFile(io.BytesIO(ada.get("/api/zip/home").content))
    assert not any("answers" in n or "passwd" in n for n in archive.namelist())
    assert open(os.path.join(home_of(storage, bob), "answers.py")).read() == "secret = 42\n"


def test_roles_students_stay_home_teachers_read_and_write_course(people, ada):
    bob = people.student("bob")
    put(ada, "mine.py", "ada's work\n")
    teacher = people.teacher("mrs-t")
    mine, intro = f"/user/{ada.username}/mine.py", f"/course/{teacher.username}/intro.py"

    r = bob.get("/api/files" + mine)
    assert r.status_code == 403 and "ada's work" not in r.text
    assert bob.get(f"/api/zip/user/{ada.username}").status_code == 403
    assert bob.get("/api/history" + mine).status_code == 403

    r = teacher.get("/api/files" + mine)
    assert r.status_code == 200 and r.json()["content"] == "ada's work\n"
    w = teacher.request("PUT", "/api/files" + mine, data=b"x", headers={"If-Match": "*"})
    assert w.status_code == 403
    assert teacher.get(f"/api/files/user/{teacher.username}").status_code == 404  # only students' homes

    assert teacher.request("PUT", "/api/files" + intro, data=b"print('hi')\n").status_code == 200
    assert ada.get("/api/files" + intro).json()["content"] == "print('hi')\n"
    r = ada.request("PUT", "/api/files" + intro, data=b"hacked", headers={"If-Match": "*"})
    assert r.status_code == 403 and r.json()["error"] == "read_only"
    assert ada.request("DELETE", "/api/files" + intro).status_code == 403
    assert teacher.get("/api/files" + intro).json()["content"] == "print('hi')\n"


def test_teacher_roster_and_push_never_overwrite_students_work(start_server):
    people = People(start_server())  # a class of its own: the push goes to every student
    ada, bob, cy = people.student("ada"), people.student("bob"), people.student("cy")
    teacher = people.teacher("mrs-t")
    put(ada, "week2/start.py", "ada already began\n")
    assert cy.post("/api/upload/home", files=[("files", ("data.csv", b"1,2\n", "text/csv"))]).status_code == 200

    # Save times (an upload's too) reach the roster with the worker's next batch, within a second.
    deadline = time.monotonic() + 10  # a hang guard
    while True:
        by_name = {s["username"]: s for s in teacher.get("/api/roster").json()["students"]}
        if (by_name[ada.username]["last_save_at"] and by_name[cy.username]["last_save_at"]) \
                or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert set(by_name) == {ada.username, bob.username, cy.username}
    assert by_name[ada.username]["last_save_at"] and by_name[cy.username]["last_save_at"]
    assert not by_name[bob.username]["last_save_at"]
    assert ada.get("/api/roster").status_code == 403

    teacher.request("PUT", "/api/files/course/week2/start.py", data=b"# starter\n")
    teacher.request("PUT", "/api/files/course/week2/data.txt", data=b"1 2 3\n")
    r = teacher.post("/api/course/push", json={"path": "week2"})
    assert r.status_code == 200, r.text
    report = r.json()
    assert sorted(report["copied"][bob.username]) == ["week2/data.txt", "week2/start.py"]
    assert report["copied"][ada.username] == ["week2/data.txt"]
    assert report["skipped"][ada.username] == [{"path": "week2/start.py", "reason": "changed"}]
    assert ada.get("/api/files/home/week2/start.py").json()["content"] == "ada already began\n"
    r = teacher.post("/api/course/push", json={"path": "week2/start.py", "students": ["nobody"]})
    assert r.status_code == 400 and r.json()["error"] == "unknown_students"
    assert ada.post("/api/course/push", json={"path": "week2"}).status_code == 403


def test_file_api_needs_a_session_and_xsrf(server, ada):
    anonymous = requests.get(server.url + "/api/files/home", timeout=10)
    assert anonymous.status_code == 401
    r = ada.request("PUT", "/api/files/home/x.py", xsrf=False, data=b"x")
    assert r.status_code == 403 and r.json()["error"] == "xsrf_missing"
    assert ada.get("/api/files/home/x.py").status_code == 404
    assert ada.get("/api/files/elsewhere/x.py").status_code == 404


def test_temporary_files_are_never_listed_and_stale_ones_are_removed(ada, storage):
    home = home_of(storage, ada)
    stale = os.path.join(home, ".~pyc-tmp-deadbeef")
    with open(stale, "w") as f:
        f.write("half a save")
    os.utime(stale, (1, 1))
    fresh = os.path.join(home, ".~pyc-tmp-cafe")
    open(fresh, "w").close()
    names = [e["name"] for e in ada.get("/api/files/home").json()["entries"]]
    assert not any(n.startswith(".~pyc") for n in names)
    assert not os.path.exists(stale) and os.path.exists(fresh)  # a fresh one may be a save in flight
