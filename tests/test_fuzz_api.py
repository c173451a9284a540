"""Every HTTP endpoint under generated hostile input (issue 11, finding 5):
JSON of any shape, strings with lone surrogates, NUL, control and bidi
characters, huge numbers and deep nesting, hostile paths, headers and
multipart bodies, sent by an anonymous client, a student, a teacher and an
admin to ONE real server. Every answer is below 500 and JSON; a refusal is
`{"error", "message"}` and leaves the accounts and the files as they were.

Examples are derandomized (the same ones every run) and bounded in number,
so the module takes seconds; raise FUZZ_EXAMPLES to search longer.
"""
import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from urllib.parse import quote

import psycopg2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import EDITING_HELP, new_database
from tests.helpers import create_user, wait_for_editing_help
from loadtest.harness import ADMIN_PASSWORD, ServerProcess

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "40"))
fuzz = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# -- what is thrown ---------------------------------------------------------

NASTY = ["", " ", "\x00", "a\x00b", "\n", "\r\n", "\x1b[31m", "\x7f", "\u202eexe.py", "\u2066x\u2069",
         "\ufeff", "\u200b", "\ud800", "a\udfffb", "\U0001f40d", "..", "../..", "/etc/passwd", "a/../../b",
         "%00", "%2e%2e", "x" * 300, "x/" * 40, ".~pyc-tmp", "CON", "hello.py", "lesson1", "sam",
         "vic", "admin", "1e999999", "-0", "NaN", "null", "[]", "{}", "\\", "'; DROP TABLE users; --"]
# Any character, surrogates included.
text = st.one_of(st.sampled_from(NASTY), st.text(st.characters(exclude_categories=()), max_size=40))
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), text)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(text, inner, max_size=4), max_leaves=12)
RAW_BODIES = [b"", b"{", b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
              b'{"username": ' + b"9" * 100_000 + b"}", b'{"username": 1e999999, "password": -1e999999}',
              b'{"username": "\\ud800", "password": "\\udfff"}', b'{"username": "a\\u0000", "password": "x"}',
              b"\xff\xfe\x00", b"\xef\xbb\xbf{}", b'{"a": NaN, "b": Infinity}', b"null", b'"text"',
              b'{"username": "sam", "username": ["sam"]}']
CONTENT_TYPES = ["application/json", "application/json; charset=utf-8", "text/plain", "",
                 "application/x-www-form-urlencoded", "multipart/form-data; boundary=zzz", "application/JSON"]


def dumps(value):
    return json.dumps(value, allow_nan=True).encode("utf-8", "surrogatepass")


def bodies(*fields):
    """JSON bodies aimed at an endpoint's fields, any JSON, or raw bytes."""
    aimed = st.fixed_dictionaries({}, optional={f: st.one_of(text, json_values) for f in fields})
    return st.one_of(aimed.map(dumps), aimed.map(dumps), json_values.map(dumps), st.sampled_from(RAW_BODIES),
                     st.binary(max_size=200))


def url_text(value):
    """`value` as it can stand in a URL: any code point, a lone surrogate as
    the (invalid) UTF-8 bytes it would be."""
    return quote(value.encode("utf-8", "surrogatepass"), safe="/")


paths = st.one_of(text, st.lists(text, max_size=4).map("/".join)).map(url_text)
# What a client can put in a header (requests sends latin-1); Tornado itself
# refuses control bytes before any handler runs.
header_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"),
                      max_size=60).map(str.strip)  # requests refuses leading white space
headers = st.dictionaries(st.sampled_from(["If-Match", "X-Forwarded-For", "X-Forwarded-Proto", "Accept-Encoding",
                                           "X-Real-Ip", "Origin", "Range", "If-None-Match"]),
                          header_text, max_size=3)
queries = st.dictionaries(st.sampled_from(["q", "role", "tree", "download", "version", "overwrite", "ms", "next"]),
                          text, max_size=3).map(lambda q: "&".join(f"{url_text(k)}={url_text(v)}" for k, v in q.items()))
# Valid places as often as hostile ones, so that bodies get past the path checks.
areas = st.one_of(st.sampled_from(["home", "course"]),
                  st.sampled_from(["user/sam", "user/vic", "user/admin", "user/tess", "user/sam%00", "user/%00"]),
                  text.map(lambda t: "user/" + url_text(t)))
folders = st.one_of(st.sampled_from(["", "lesson1", "lesson1/"]), paths)


# -- the server and what it holds -------------------------------------------

class World:
    """One server for the module, its clients by role, and a way to see
    everything a refused request must leave alone."""

    def __init__(self, server, dsn, storage):
        self.server, self.storage = server, storage
        self.db = psycopg2.connect(dsn)
        self.db.autocommit = True
        self.clients = {"anonymous": server.client()}
        for role, (username, password) in {"student": ("sam", "sam-password"), "teacher": ("tess", "tess-password"),
                                           "admin": ("admin", ADMIN_PASSWORD)}.items():
            self.clients[role] = server.client()
            self.clients[role].login_ok(username, password)
        self.clients["anonymous"].xsrf()

    def snapshot(self):
        with self.db.cursor() as cur:
            cur.execute("SELECT username, display_name, role, active, password_hash FROM users ORDER BY username")
            users = cur.fetchall()
            cur.execute("SELECT count(*) FROM sessions")
            sessions = cur.fetchone()
        files = []
        for folder, dirs, names in os.walk(self.storage):
            for name in dirs:
                files.append((os.path.relpath(os.path.join(folder, name), self.storage), "dir"))
            for name in names:
                path = os.path.join(folder, name)
                with open(path, "rb") as f:
                    files.append((os.path.relpath(path, self.storage), hashlib.sha256(f.read()).hexdigest()))
        return users, sessions, sorted(files)

    def send(self, role, method, path, body=None, content_type=None, extra_headers=None, xsrf=True):
        """The request, and the assertions every answer must pass."""
        before = self.snapshot()
        headers = dict(extra_headers or {})
        if content_type is not None:
            headers["Content-Type"] = content_type
        r = self.clients[role].request(method, path, data=body, headers=headers, xsrf=xsrf, timeout=60)
        assert r.status_code < 500, (method, path, r.status_code, r.text[:500])
        if r.status_code >= 400:
            answer = r.json()
            assert isinstance(answer.get("error"), str) and isinstance(answer.get("message"), str), answer
            assert self.snapshot() == before, (method, path, r.status_code, answer)
        elif r.headers.get("Content-Type", "").startswith("application/json"):
            r.json()
        return r


@contextlib.contextmanager
def fuzzed_server(postgres_url, world_class=World, editing_help=True):
    """A server of its own with sam and vic (students) and tess (teacher),
    and a `world_class` on it (with editing help, whose endpoints are
    fuzzed here, unless `editing_help` is False)."""
    data_dir = tempfile.mkdtemp(prefix="pyclassroom-test-fuzz-")
    os.chmod(data_dir, 0o755)
    with new_database(postgres_url) as dsn:
        # No new name is refused for the address before the fuzzing ends; the
        # generated X-Forwarded-For values are believed, so they reach the database.
        server = ServerProcess(processes=1, database_url=dsn, data_dir=data_dir,
                               env={"LOGIN_FAILURES_PER_ADDRESS": "100000", "TRUST_PROXY": "1",
                                    **(EDITING_HELP if editing_help else {})}).start()
        try:
            if editing_help:
                wait_for_editing_help(server)
            for username, role in (("sam", "student"), ("vic", "student"), ("tess", "teacher")):
                create_user(dsn, username, f"{username}-password", role=role)
            w = world_class(server, dsn, os.path.join(data_dir, "storage"))
            yield w
            w.db.close()
        finally:
            server.stop()
            print(f"--- server output ---\n{server.output()}")
    shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def world(postgres_url):
    with fuzzed_server(postgres_url) as w:
        student, teacher = w.clients["student"], w.clients["teacher"]
        for path, text_ in (("mine.py", "print(1)\n"), ("lesson1/a.py", "a = 1\n")):
            assert student.request("PUT", "/api/files/home/" + path, data=text_.encode()).status_code == 200
        assert teacher.request("PUT", "/api/files/course/starter.py", data=b"# start\n").status_code == 200
        yield w


# -- the endpoints ------------------------------------------------------------

roles = st.sampled_from(["anonymous", "student", "teacher", "admin"])
content_types = st.one_of(st.just("application/json"), st.sampled_from(CONTENT_TYPES))


@fuzz
@given(body=bodies("username", "password"), ctype=content_types, hdrs=headers, xsrf=st.booleans())
def test_login(world, body, ctype, hdrs, xsrf):
    # Anonymous only: a login that worked would replace a fuzzing session.
    world.send("anonymous", "POST", "/api/login", body, ctype, hdrs, xsrf)


@fuzz
@given(body=bodies("old_password", "new_password"), ctype=content_types, role=roles)
def test_password_and_logout(world, body, ctype, role):
    world.send(role, "POST", "/api/password", body, ctype)
    world.send("anonymous", "POST", "/api/logout", body, ctype)


@fuzz
@given(role=roles, method=st.sampled_from(["GET", "PUT", "POST", "DELETE", "PATCH"]), area=areas, path=folders,
       body=st.one_of(bodies("action", "to", "version"), st.binary(max_size=300)), ctype=content_types,
       hdrs=headers, query=queries)
def test_files(world, role, method, area, path, body, ctype, hdrs, query):
    world.send(role, method, f"/api/files/{area}/{path}?{query}", body if method != "GET" else None, ctype, hdrs)


@fuzz
@given(role=roles, area=areas, path=folders, query=queries, hdrs=headers,
       kind=st.sampled_from(["history", "zip"]))
def test_history_and_zip(world, role, area, path, query, hdrs, kind):
    world.send(role, "GET", f"/api/{kind}/{area}/{path}?{query}", extra_headers=hdrs)


def multipart(boundary, parts, ending):
    """A multipart/form-data body, well formed or not, from raw parts."""
    out = b""
    for disposition, content in parts:
        out += b"--" + boundary + b"\r\nContent-Disposition: " + disposition + b"\r\n\r\n" + content + b"\r\n"
    return out + ending


names = st.one_of(text, st.sampled_from(["a.py", "x\x00.py", "x\n.py", "../x.py", ""]))
dispositions = st.one_of(
    names.map(lambda n: b'form-data; name="f"; filename="' + n.encode("utf-8", "surrogatepass") + b'"'),
    names.map(lambda n: b"form-data; name=\"f\"; filename*=UTF-8''" + url_text(n).encode()),
    st.binary(max_size=60))


@fuzz
@given(role=roles, area=areas, folder=folders, boundary=st.sampled_from([b"zzz", b"", b"a" * 80, b"\xff"]),
       parts=st.lists(st.tuples(dispositions, st.binary(max_size=100)), max_size=3),
       ending=st.sampled_from([b"--zzz--\r\n", b"", b"--zzz", b"garbage"]), query=queries)
def test_upload(world, role, area, folder, boundary, parts, ending, query):
    ctype = "multipart/form-data; boundary=" + boundary.decode("latin-1")
    world.send(role, "POST", f"/api/upload/{area}/{folder}?{query}", multipart(boundary, parts, ending), ctype)


@fuzz
@given(role=roles, body=bodies("path", "students"), ctype=content_types)
def test_course_push(world, role, body, ctype):
    world.send(role, "POST", "/api/course/push", body, ctype)


@fuzz
@given(role=roles, body=bodies("username", "display_name", "role", "password"), ctype=content_types,
       query=queries)
def test_admin_users(world, role, body, ctype, query):
    world.send(role, "GET", "/api/admin/users?" + query)
    world.send(role, "POST", "/api/admin/users", body, ctype)


unicode_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=80)  # no lone surrogates
SOURCES = ["import random\nrandom.ra", "print(", "def f(:", "x = 'é🐍'; y", "\x00", "import mine\nmine.",
           "import sys\nsys.path.append('/')\nimport os\nos.", "f'{", "\\", "\t\tx\n\r\ny", "(" * 200]


@st.composite
def assist_bodies(draw, hostile=True):
    """Bodies whose position is a place in the text (so that they reach the
    assist processes); with `hostile`, any path, area and name too."""
    source = draw(st.one_of(st.sampled_from(SOURCES), text if hostile else unicode_text))
    lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")  # as the server splits
    line = draw(st.integers(1, len(lines)))
    path, area, name = (st.sampled_from(["main.py", "lesson1/a.py", "mine.py"]), st.just("home"),
                        st.sampled_from(["randint", "mine", "é"]))
    if hostile:
        path, area, name = (st.one_of(path, st.just("a.txt"), text),
                            st.one_of(area, st.sampled_from(["course", "user/sam", "user/vic"]), text),
                            st.one_of(name, text))
    return dumps({"path": draw(path), "area": draw(area), "source": source, "line": line,
                  "column": draw(st.integers(0, len(lines[line - 1]))), "name": draw(name)})


@fuzz
@given(role=roles, op=st.sampled_from(["complete", "signatures", "describe", "check", "explain"]),
       body=st.one_of(assist_bodies(), bodies("path", "source", "line", "column", "name", "area")),
       ctype=content_types)
def test_assist(world, role, op, body, ctype):
    world.send(role, "POST", f"/api/assist/{op}", body, ctype)


@fuzz
@given(op=st.sampled_from(["complete", "signatures", "describe", "check"]), body=assist_bodies(hostile=False))
def test_assist_on_any_text(world, op, body):
    """Any text, with a place in it, reaches jedi and pyflakes: an answer of the op's shape."""
    r = world.send("student", "POST", f"/api/assist/{op}", body, "application/json")
    assert r.status_code == 200, r.text
    assert set(r.json()) == {"complete": {"completions", "prefix"}, "signatures": {"signatures"},
                             "describe": {"name", "signature", "doc"}, "check": {"diagnostics"}}[op]


usernames = st.one_of(st.sampled_from(["ada", "alan", "sam"]), text)
cells = st.tuples(usernames, text, st.one_of(st.sampled_from(["student", "teacher"]), text),
                  st.one_of(st.just(""), text))
rows = st.lists(cells.map(lambda c: ",".join(c)), max_size=5).map("\n".join)


@fuzz
@given(role=roles, csv_text=st.one_of(rows, text), extra=bodies("csv"), ctype=content_types)
def test_admin_import(world, role, csv_text, extra, ctype):
    world.send(role, "POST", "/api/admin/users/import", dumps({"csv": csv_text}), "application/json")
    world.send(role, "POST", "/api/admin/users/import", extra, ctype)


@fuzz
@given(role=roles, who=st.one_of(st.sampled_from(["vic", "ghost", "admin"]), text.map(url_text)),
       action=st.sampled_from(["password", "active"]), body=bodies("active"), ctype=content_types)
def test_admin_user_actions(world, role, who, action, body, ctype):
    if role == "admin" and who == "admin":
        who = "ghost"  # the admin's own password reset would end the fuzzing session
    world.send(role, "POST", f"/api/admin/users/{who}/{action}", body, ctype)


@fuzz
@given(role=roles, path=st.one_of(st.sampled_from(["/api/me", "/api/status", "/api/roster", "/healthz", "/readyz",
                                                    "/metrics", "/", "/ide", "/teacher", "/admin", "/class/1",
                                                    "/class/999999999999999999", "/sys_perf_check"]),
                                   paths.map(lambda p: "/" + p), paths.map(lambda p: "/static/dist/" + p)),
       method=st.sampled_from(["GET", "GET", "POST", "DELETE", "OPTIONS"]), query=queries, hdrs=headers,
       body=st.binary(max_size=100))
def test_everything_else(world, role, path, method, query, hdrs, body):
    r = world.send(role, method, f"{path}?{query}", body if method != "GET" else None, None, hdrs)
    if r.status_code < 400 and r.headers.get("Content-Type", "").startswith("text/html"):
        assert "<html" in r.text.lower()


def test_zz_the_server_logged_no_traceback(world):
    out = world.server.output()
    assert "Traceback" not in out and " ERROR " not in out, out[-5000:]
