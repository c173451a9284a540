"""ROLLBACK_PROCEDURE.md: every command block names the tests that run it
(which must exist) or says why none can; and the database rollback is run
here for real against PostgreSQL."""
import ast
import os
import re
import subprocess

import pytest

from tests.helpers import create_user, sql

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "ROLLBACK_PROCEDURE.md")
BLOCK = re.compile(r"(<!--(.*?)-->\s*)?```sh\n(.*?)```", re.S)


def blocks():
    with open(DOC, encoding="utf-8") as f:
        return [(m.group(2) or "").strip() for m in BLOCK.finditer(f.read())]


def test_every_command_block_is_tested_or_says_why_not():
    found = blocks()
    assert len(found) >= 8
    for note in found:
        assert note.startswith(("tested by:", "not run by the tests:")), f"a block without a note: {note!r}"
        if note.startswith("not run by the tests:"):
            assert len(note) > len("not run by the tests:") + 20, "say why"
            continue
        for ref in note[len("tested by:"):].split():
            path, name = ref.split("::")
            with open(os.path.join(ROOT, path), encoding="utf-8") as f:
                names = {n.name for n in ast.walk(ast.parse(f.read())) if isinstance(n, ast.FunctionDef)}
            assert name in names, f"{ref} named in ROLLBACK_PROCEDURE.md does not exist"


def test_verification_lines_match_what_the_server_prints():
    from loadtest.harness import SERVING_RE
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    for line in ("serving http://0.0.0.0:8888 with 1 process (pid 4299)",
                 "serving http://0.0.0.0:8888 with 2 worker processes (pids 4581, 4582)"):
        assert line in text and SERVING_RE.search(line)
    assert "X-Worker-Pid" in text and '"worker_pids"' in text


@pytest.fixture
def pg_tools():
    from server.embedded_postgres import find_bindir
    bindir = find_bindir()
    tools = {name: os.path.join(bindir, name) for name in ("pg_dump", "pg_restore")}
    if not all(os.path.exists(t) for t in tools.values()):
        pytest.fail("pg_dump/pg_restore missing: apt-get install postgresql-client")
    return tools


def test_database_snapshot_restores_the_accounts(start_server, fresh_db, pg_tools, tmp_path):
    server = start_server()  # applies the migrations
    create_user(fresh_db, "ada", "ada-password")
    dump = str(tmp_path / "before.dump")
    # The commands of section 4, as written there.
    env = dict(os.environ, DATABASE_URL=fresh_db)
    subprocess.run([pg_tools["pg_dump"], "--format=custom", f"--file={dump}", fresh_db],
                   check=True, env=env, timeout=60)
    create_user(fresh_db, "mistake", "mistake-password")
    sql(fresh_db, "DELETE FROM users WHERE username = 'ada'")
    server.stop()
    subprocess.run([pg_tools["pg_restore"], "--clean", "--if-exists", "--no-owner", f"--dbname={fresh_db}", dump],
                   check=True, env=env, timeout=60)
    names = {u for (u,) in sql(fresh_db, "SELECT username FROM users")}
    assert names == {"admin", "ada"}
    again = start_server(database_url=fresh_db)
    assert again.client().get("/readyz").json()["status"] == "ready"
    assert again.client().login("ada", "ada-password").status_code == 200

