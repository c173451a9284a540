"""Issue 11, finding 5, attack by attack: each of these answered 500 (or
Tornado's bare-text 400) and must answer a JSON 4xx that changes nothing.
tests/test_fuzz_api.py throws generated input of the same kinds at every
endpoint; these are the cases the issue names, so they are sure to be tried."""
import json
import os
import socket
from urllib.parse import urlsplit

import pytest

from loadtest.harness import ADMIN_PASSWORD
from tests.conftest import PASSWORD, People
from tests.helpers import sql


@pytest.fixture
def srv(module_server):
    return module_server  # they compare the whole users table


@pytest.fixture
def dsn(srv):
    return srv.env["DATABASE_URL"]


def users(dsn):
    return sql(dsn, "SELECT username, display_name, role, active, password_hash FROM users ORDER BY username")


def refused(r, status=400, code=None):
    assert r.status_code == status, (r.status_code, r.text[:300])
    body = r.json()
    assert body["message"] and (code is None or body["error"] == code), body
    return body


def raw_post(client, path, body, content_type="application/json"):
    return client.post(path, data=body, headers={"Content-Type": content_type})


@pytest.mark.parametrize("body", [
    b"[" * 100_000 + b"]" * 100_000,
    b'{"username": ' + b"[" * 100_000 + b"]" * 100_000 + b', "password": "x"}',
], ids=["array", "in-a-field"])  # short ids: pytest puts them in the environment of every child
def test_json_nested_a_hundred_thousand_deep_is_malformed(srv, dsn, body):
    before = users(dsn)
    refused(raw_post(srv.client(), "/api/login", body), 400, "malformed_json")
    assert users(dsn) == before


@pytest.mark.parametrize("field", ["username", "password"])
def test_lone_surrogates_in_login_fields(srv, dsn, field):
    body = {"username": "admin", "password": "x" * 10}
    body[field] = "ad\ud800min"
    raw = json.dumps(body).encode()  # JSON spells it "\ud800"
    before = sql(dsn, "SELECT count(*) FROM login_attempts")
    refused(raw_post(srv.client(), "/api/login", raw), 400, "malformed_json")
    assert sql(dsn, "SELECT count(*) FROM login_attempts") == before


@pytest.fixture
def admin(srv):
    client = srv.client()
    client.login_ok("admin", ADMIN_PASSWORD)
    return client


@pytest.mark.parametrize("name", ["Ada\x00Lovelace", "Ada\x1b[2J", "Ada\nLovelace", "\u202eecalevoL adA",
                                  "Ada\ud800"])
def test_nul_control_bidi_and_surrogates_in_a_display_name(admin, dsn, name):
    before = users(dsn)
    raw = json.dumps({"username": "ada", "display_name": name, "role": "student"}).encode()
    body = refused(raw_post(admin, "/api/admin/users", raw), 400)
    assert body["error"] in ("invalid_account", "malformed_json")
    assert users(dsn) == before


def test_nul_and_control_characters_in_csv_rows_name_the_row(admin, dsn):
    before = users(dsn)
    csv_text = ("username,display_name,role\n"
                "ada,Ada Lovelace,student\n"
                "alan,Alan\x00Turing,student\n"
                "grace,Grace\x07Hopper,student\n"
                "edsger," + "x" * 200_000 + ",student\n")
    r = admin.post("/api/admin/users/import", json={"csv": csv_text})
    body = refused(r, 400, "invalid_rows")
    assert [row["line"] for row in body["rows"]] == [3, 4, 5]
    assert "U+0000" in body["rows"][0]["problem"] and "U+0007" in body["rows"][1]["problem"]
    assert users(dsn) == before  # all rows or none: ada was not created either


@pytest.mark.parametrize("owner", ["bob%00", "bob%00x", "%00", "Bob", "bob%0A", "..%2Fadmin"])
def test_a_teachers_user_path_that_is_no_username_is_not_found(srv, owner):
    people = People(srv)
    bob, teacher = people.student("bob"), people.teacher("tess")
    r = teacher.get(f"/api/files/user/{owner.replace('bob', bob.username)}/")
    assert r.status_code in (400, 404), r.text
    refused(r, r.status_code)


@pytest.fixture
def student(srv):
    return People(srv).student("sam")


def home_tree(srv, student):
    root = os.path.join(srv.env["DATA_DIR"], "storage", "home", student.username)
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, dirs, files in os.walk(root) for n in dirs + files)


@pytest.mark.parametrize("body", [
    b"--zzz\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.py\"\r\n\r\nprint(1)\r\n",  # no end
    b"--zzz\r\nno headers at all\r\n--zzz--\r\n",
    b"--zzz\r\nContent-Disposition: form-data; filename=\"a.py\"\r\n\r\nx\r\n--zzz--\r\n",  # no name
    b"--zzz\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a\x00.py\"\r\n\r\nx\r\n--zzz--\r\n",
], ids=["no-end", "no-headers", "no-name", "nul-in-header"])
def test_a_broken_multipart_body_is_refused(srv, student, body):
    before = home_tree(srv, student)
    r = raw_post(student, "/api/upload/home/", body, "multipart/form-data; boundary=zzz")
    refused(r, 400)
    assert home_tree(srv, student) == before


@pytest.mark.parametrize("filename", ["a%00.py", "a%0A.py", "a%0D%0A.py", "%E2%80%AEyp.exe", "..%2F..%2Fx.py"])
def test_an_upload_file_name_with_nul_newline_or_bidi_is_refused(srv, student, filename):
    before = home_tree(srv, student)
    body = (b"--zzz\r\nContent-Disposition: form-data; name=\"f\"; filename*=UTF-8''" + filename.encode()
            + b"\r\n\r\nprint(1)\r\n--zzz--\r\n")
    refused(raw_post(student, "/api/upload/home/", body, "multipart/form-data; boundary=zzz"), 400)
    assert home_tree(srv, student) == before


def chunked_post(server, path, chunks):
    """A raw HTTP/1.1 POST with a chunked body (and the XSRF cookie and
    header); returns (status line, headers, body)."""
    parts = urlsplit(server.url)
    xsrf = server.client().xsrf()
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
                  f"Cookie: _xsrf={xsrf}\r\nX-XSRFToken: {xsrf}\r\n"
                  "Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
        try:
            for chunk in chunks:
                s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            s.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before the whole body was sent
        answer = b""
        while True:
            try:
                data = s.recv(65536)
            except ConnectionResetError:
                break
            if not data:
                break
            answer += data
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    return lines[0], lines[1:], body


@pytest.mark.parametrize("chunks", [
    [b"x" * 1000] * 10,  # over the limit by many small chunks
    [b"x" * 100_000],  # one chunk far over it
], ids=["small-chunks", "one-big-chunk"])
def test_an_oversized_chunked_body_gets_the_json_413(shared_servers, chunks):
    srv = shared_servers.get(MAX_BODY_BYTES=4096)
    status, headers, body = chunked_post(srv, "/api/login", chunks)
    assert status.startswith("HTTP/1.1 413"), (status, body[:200])
    assert any(h.lower().startswith("content-type: application/json") for h in headers), headers
    length = next(int(h.split(":")[1]) for h in headers if h.lower().startswith("content-length"))
    answer = json.loads(body[:length])
    assert answer["error"] == "body_too_large" and "4096" in answer["message"]
    # The server is fine afterwards.
    assert srv.client().get("/healthz").status_code == 200


def test_a_chunked_body_within_the_limit_is_read(srv):
    ada = People(srv).student("ada", log_in=False)
    body = json.dumps({"username": ada.username, "password": PASSWORD}).encode()
    status, _, answer = chunked_post(srv, "/api/login", [body[:10], body[10:]])
    assert status.startswith("HTTP/1.1 200") and f'"username": "{ada.username}"'.encode() in answer
