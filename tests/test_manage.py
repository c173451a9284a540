"""The admin CLI `python -m server.manage`, run as a real subprocess against
a fresh database, with the results checked in the database itself."""
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

import psycopg2
import pytest

from server.accounts.passwords import verify_password
from server.embedded_postgres import EmbeddedPostgres

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CREATED_RE = re.compile(r"^line (\d+): (\S+)\s+created \((\w+)\)(?:  password: (\S+))?$", re.M)


def run_manage(env, *args):
    return subprocess.run([sys.executable, "-m", "server.manage", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)


@pytest.fixture
def manage(fresh_db, tmp_path):
    env = dict(os.environ, DATABASE_URL=fresh_db, DATA_DIR=str(tmp_path / "data"))
    return lambda *args: run_manage(env, *args)


@pytest.fixture
def sql(fresh_db):
    """sql(query, *params) -> all rows, in autocommit."""
    conn = psycopg2.connect(fresh_db)
    conn.autocommit = True

    def query(text, *params):
        with conn.cursor() as cur:
            cur.execute(text, params)
            return cur.fetchall() if cur.description else None
    yield query
    conn.close()


@pytest.fixture
def csv_file(tmp_path):
    def write(text, name="users.csv"):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return str(path)
    return write


def ok(result):
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def refused(result, code=1):
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    return result.stderr


def users(sql):
    return {r[0]: r[1:] for r in sql(
        "SELECT username, display_name, role, active, password_hash FROM users ORDER BY username")}


def add_session(sql, username):
    sql("""INSERT INTO sessions (token_hash, user_id, expires_at)
           SELECT gen_random_uuid()::text::bytea, id, now() + interval '1 hour'
           FROM users WHERE username = %s""", username)


def session_count(sql, username):
    return sql("SELECT count(*) FROM sessions s JOIN users u ON u.id = s.user_id "
               "WHERE u.username = %s", username)[0][0]


def test_import_good_file(manage, sql, csv_file):
    lines = ["username,display_name,role,password",
             "Ada,Ada Lovelace,student,analytical-engine",
             "grace,Grace Hopper,teacher,",
             "root.admin,The Admin,ADMIN"]
    lines += [f"s{i:02d},Student {i},student" for i in range(57)]  # a class: hashed in parallel
    out = ok(manage("import-users", csv_file("\n".join(lines) + "\n")))

    assert "created 60, skipped 0, invalid 0" in out
    created = {m[1]: m for m in CREATED_RE.findall(out)}
    assert len(created) == 60
    assert created["ada"][3] == ""  # given in the file: not printed
    assert created["grace"][0] == "3" and created["grace"][2] == "teacher"
    found = users(sql)
    assert len(found) == 60
    assert all(row[3].startswith("$argon2id$") for row in found.values())
    assert found["ada"][:3] == ("Ada Lovelace", "student", True)
    assert found["grace"][:2] == ("Grace Hopper", "teacher")
    assert found["root.admin"][:2] == ("The Admin", "admin")
    assert found["s56"][:2] == ("Student 56", "student")
    assert verify_password(found["ada"][3], "analytical-engine")
    for name in ("grace", "root.admin", "s00", "s56"):
        assert verify_password(found[name][3], created[name][3])
    assert not verify_password(found["grace"][3], created["s00"][3])
    audit = sql("SELECT actor, action, subject FROM audit_log WHERE subject = 'grace'")
    assert audit == [("manage", "create_user", "grace")]


def test_import_with_a_bad_row_creates_nothing(manage, sql, csv_file):
    ok(manage("create-user", "existing", "--role", "teacher"))
    path = csv_file("ada,Ada Lovelace,student\n"
                    "alan,Alan Turing,student\n"
                    "bob,Bob,wizard\n"
                    "carol,Carol,student,short\n"
                    "dave,,student\n")
    err = refused(manage("import-users", path))
    assert re.search(r"^line 3: bob: unknown role 'wizard'", err, re.M)
    assert re.search(r"^line 4: carol: .*at least 8 characters", err, re.M)
    assert re.search(r"^line 5: dave: the display name is empty", err, re.M)
    assert "line 1" not in err and "line 2" not in err
    assert "nothing was created" in err
    assert list(users(sql)) == ["existing"]


def test_import_skips_existing_users(manage, sql, csv_file):
    ok(manage("create-user", "ada", "--role", "teacher", "--name", "Original Ada"))
    out = ok(manage("import-users", csv_file("ada,Ada Lovelace,student\n"
                                             "alan,Alan Turing,student\n"
                                             "grace,Grace Hopper,student\n")))
    assert re.search(r"^line 1: ada\s+skipped: already exists$", out, re.M)
    assert "created 2, skipped 1, invalid 0" in out
    found = users(sql)
    assert sorted(found) == ["ada", "alan", "grace"]
    assert found["ada"][:2] == ("Original Ada", "teacher")  # untouched


def test_import_duplicate_within_file_is_invalid(manage, sql, csv_file):
    path = csv_file("username,display_name,role\nada,Ada,student\nalan,Alan,student\nADA,Ada 2,student\n")
    err = refused(manage("import-users", path))
    assert re.search(r"^line 4: ada: username 'ada' is also on line 2$", err, re.M)
    assert sql("SELECT to_regclass('users')")[0][0] is None or users(sql) == {}


def test_import_passwords_out(manage, sql, csv_file, tmp_path):
    out_path = str(tmp_path / "passwords.csv")
    out = ok(manage("import-users", csv_file("ada,\uff1dAda,student,,7B\nalan,Alan,student,turing-machine\n"),
                    "--passwords-out", out_path))
    assert "password:" not in out and "(student, class 7B)" in out
    assert stat.S_IMODE(os.stat(out_path).st_mode) == 0o600
    with open(out_path, encoding="utf-8") as f:
        rows = [line.split(",") for line in f.read().splitlines()]
    assert rows[0] == ["username", "display_name", "class", "password"]
    assert [r[:3] for r in rows[1:]] == [["ada", "'\uff1dAda", "7B"]]  # a full-width = is a formula's too
    assert verify_password(users(sql)["ada"][3], rows[1][3])
    assert sql("SELECT c.name FROM class_members m JOIN classes c ON c.id = m.class_id "
               "JOIN users u ON u.id = m.user_id WHERE u.username = 'ada'") == [("7B",)]
    # Never overwrites an earlier list, and refuses before creating anything.
    err = refused(manage("import-users", csv_file("bob,Bob,student\n", "more.csv"),
                         "--passwords-out", out_path))
    assert "already exists" in err
    assert "bob" not in users(sql)


def test_create_user(manage, sql):
    out = ok(manage("create-user", "  Ada ", "--role", "student", "--name", "Ada Lovelace"))
    password = re.search(r"^password: (\S+)$", out, re.M).group(1)
    found = users(sql)["ada"]
    assert found[:3] == ("Ada Lovelace", "student", True)
    assert found[3].startswith("$argon2id$") and verify_password(found[3], password)

    ok(manage("create-user", "alan", "--role", "teacher", "--password", "enigma-machine"))
    assert verify_password(users(sql)["alan"][3], "enigma-machine")
    assert users(sql)["alan"][0] == "alan"  # display name defaults to the username

    err = refused(manage("create-user", "ada", "--role", "admin"))
    assert err.strip() == "error: There is already an account named ada."  # as the admin page says
    assert users(sql)["ada"][1] == "student"
    assert "not a valid username" in refused(manage("create-user", "bad name", "--role", "student"))
    assert "at least 8" in refused(manage("create-user", "bob", "--role", "student", "--password", "x"))
    refused(manage("create-user", "bob", "--role", "wizard"), code=2)
    refused(manage("no-such-command"), code=2)
    assert "bob" not in users(sql)


def test_reset_password(manage, sql):
    ok(manage("create-user", "ada", "--role", "student", "--password", "old-password"))
    add_session(sql, "ada")
    add_session(sql, "ada")
    sql("INSERT INTO login_attempts (username, failures, blocked_until) VALUES ('ada', 9, 'infinity')")
    out = ok(manage("reset-password", "ada"))
    password = re.search(r"^new password for 'ada': (\S+)$", out, re.M).group(1)
    password_hash = users(sql)["ada"][3]
    assert verify_password(password_hash, password)
    assert not verify_password(password_hash, "old-password")
    assert session_count(sql, "ada") == 0
    assert sql("SELECT count(*) FROM login_attempts")[0][0] == 0
    assert sql("SELECT actor, detail FROM audit_log WHERE action = 'reset_password'") == [
        ("manage", {"sessions_ended": 2})]
    assert refused(manage("reset-password", "nobody")).strip() == "error: There is no account named nobody."


def test_deactivate_and_activate(manage, sql):
    ok(manage("create-user", "ada", "--role", "student"))
    ok(manage("create-user", "alan", "--role", "student"))
    add_session(sql, "ada")
    add_session(sql, "alan")
    ok(manage("deactivate", "ADA"))
    assert users(sql)["ada"][2] is False
    assert session_count(sql, "ada") == 0
    assert session_count(sql, "alan") == 1  # others keep theirs
    assert "already deactivated" in ok(manage("deactivate", "ada"))
    ok(manage("activate", "ada"))
    assert users(sql)["ada"][2] is True
    actions = sql("SELECT actor, action, subject FROM audit_log WHERE action LIKE '%%activate' ORDER BY id")
    assert actions == [("manage", "deactivate", "ada"), ("manage", "activate", "ada")]
    refused(manage("deactivate", "nobody"))


def test_list_users(manage, sql):
    ok(manage("create-user", "ada", "--role", "student", "--name", "Ada Lovelace"))
    ok(manage("create-user", "grace", "--role", "teacher", "--name", "Grace Hopper"))
    ok(manage("deactivate", "ada"))
    listed = json.loads(ok(manage("list-users", "--json")))
    assert [(u["username"], u["display_name"], u["role"], u["active"]) for u in listed] == [
        ("ada", "Ada Lovelace", "student", False), ("grace", "Grace Hopper", "teacher", True)]
    assert all(u["created_at"] for u in listed)
    assert [u["username"] for u in json.loads(ok(manage("list-users", "--role", "teacher", "--json")))] \
        == ["grace"]
    table = ok(manage("list-users"))
    assert re.search(r"^grace\s+Grace Hopper\s+teacher\s+yes\s", table, re.M)


def test_unreachable_database_is_one_clear_line(tmp_path):
    env = dict(os.environ, DATABASE_URL="postgresql://nobody@127.0.0.1:1/nothing",
               DATA_DIR=str(tmp_path))
    err = refused(run_manage(env, "list-users"))
    assert err.count("\n") == 1 and err.startswith("error: cannot use the database:")
    err = refused(run_manage(dict(env, DATABASE_URL="mysql://x"), "list-users"))
    assert err.startswith("error: DATABASE_URL=") and err.count("\n") == 1


def test_embedded_postgres_is_started_and_stopped(csv_file):
    # Not under tmp_path (0700): PostgreSQL runs as 'postgres' and must traverse it.
    data_dir = tempfile.mkdtemp(prefix="pyclassroom-manage-")
    os.chmod(data_dir, 0o755)
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["DATA_DIR"] = data_dir
    pid_file = os.path.join(data_dir, "postgres", "cluster", "postmaster.pid")
    try:
        ok(run_manage(env, "create-user", "ada", "--role", "admin"))
        assert not os.path.exists(pid_file)
        ok(run_manage(env, "import-users", csv_file("alan,Alan Turing,teacher\n")))
        listed = json.loads(ok(run_manage(env, "list-users", "--json")))
        assert [(u["username"], u["role"]) for u in listed] == [("ada", "admin"), ("alan", "teacher")]
        assert not os.path.exists(pid_file)
    finally:
        if os.path.exists(pid_file):  # a failed run left it going: adopt it, then stop it
            pg = EmbeddedPostgres(data_dir)
            pg.start()
            pg.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
