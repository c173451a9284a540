"""The admin accounts API as the admin page uses it: list, search, create,
import a class (all rows or none), reset a password, deactivate."""
import pytest

from tests.conftest import PASSWORD
from tests.helpers import create_user, sql
from loadtest.harness import ADMIN_PASSWORD


@pytest.fixture
def server(module_server):
    return module_server  # they list and search every account


@pytest.fixture
def admin(server):
    client = server.client()
    client.login_ok("admin", ADMIN_PASSWORD)
    return client


def test_only_admins_reach_the_accounts_api(server, people):
    teacher = people.teacher("mrs-t")
    assert teacher.get("/api/admin/users").status_code == 403
    assert teacher.post("/api/admin/users", json={"username": "x", "display_name": "X",
                                                  "role": "admin"}).status_code == 403
    assert server.client().get("/api/admin/users").status_code == 401


def test_create_then_log_in_and_search(server, admin):
    r = admin.post("/api/admin/users", json={"username": "Ada", "display_name": "Ada Lovelace",
                                             "role": "student"})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["user"]["username"] == "ada" and body["password"]
    assert server.client().login("ada", body["password"]).status_code == 200
    assert admin.post("/api/admin/users", json={"username": "ada", "display_name": "Again",
                                                "role": "student"}).status_code == 409
    found = admin.get("/api/admin/users?q=lovel").json()["users"]
    assert [u["username"] for u in found] == ["ada"]
    assert [u["username"] for u in admin.get("/api/admin/users?role=admin").json()["users"]] == ["admin"]
    bad = admin.post("/api/admin/users", json={"username": "no spaces", "display_name": "X", "role": "student"})
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_account"
    bad = admin.post("/api/admin/users", json={"username": "x1", "display_name": "X", "role": "wizard"})
    assert bad.status_code == 400


def test_import_is_all_or_nothing_and_skips_existing(server, admin):
    dsn = server.env["DATABASE_URL"]
    create_user(dsn, "old", "old-password")
    bad_csv = "username,display_name,role,password\nann,Ann,student,\nbo b,Bob,student,\ncy,Cy,pilot,\n"
    r = admin.post("/api/admin/users/import", json={"csv": bad_csv})
    assert r.status_code == 400 and r.json()["error"] == "invalid_rows"
    assert [row["line"] for row in r.json()["rows"]] == [3, 4]
    assert sql(dsn, "SELECT count(*) FROM users WHERE username = 'ann'") == [(0,)]

    good_csv = "ann,Ann Smith,student\nold,Old Timer,student\nben,Ben,teacher,ben-password-1\n"
    r = admin.post("/api/admin/users/import", json={"csv": good_csv})
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["created"] == 2 and report["skipped"] == 1
    by_name = {row["username"]: row for row in report["rows"]}
    assert by_name["old"]["outcome"].startswith("skipped")
    assert "password" not in by_name["ben"]  # given in the file, not echoed
    assert server.client().login("ann", by_name["ann"]["password"]).status_code == 200
    assert server.client().login("ben", "ben-password-1").status_code == 200


def test_reset_password_is_shown_once_and_ends_sessions(server, people, admin):
    ada = people.student("ada")
    r = admin.post(f"/api/admin/users/{ada.username}/password", json={})
    assert r.status_code == 200
    new = r.json()["password"]
    assert ada.get("/api/me").status_code == 401
    assert server.client().login(ada.username, PASSWORD).status_code == 401
    assert server.client().login(ada.username, new).status_code == 200
    assert admin.post("/api/admin/users/nobody/password", json={}).status_code == 404


def test_deactivate_ends_sessions_and_reactivate_restores_login(server, people, admin):
    ada = people.student("ada")
    active = f"/api/admin/users/{ada.username}/active"
    assert admin.post(active, json={"active": False}).status_code == 200
    assert ada.get("/api/me").status_code == 401
    assert server.client().login(ada.username, PASSWORD).json()["error"] == "account_deactivated"
    assert admin.post(active, json={"active": True}).status_code == 200
    assert server.client().login(ada.username, PASSWORD).status_code == 200
    r = admin.post("/api/admin/users/admin/active", json={"active": False})
    assert r.status_code == 400 and r.json()["error"] == "cannot_deactivate_self"
    assert admin.post(active, json={"active": "no"}).status_code == 400


def test_accounts_list_their_classes_and_filter_by_class(server, people, admin):
    from tests.live_support import a_class
    teacher, ann = people.teacher("mrs-c", log_in=False), people.student("ann-c")
    loner = people.student("loner")
    number = a_class(server, teacher, ann, name="Chess club")
    found = admin.get(f"/api/admin/users?class={number}").json()["users"]
    assert sorted((u["username"], u["classes"]) for u in found) == sorted(
        [(teacher.username, ["Chess club"]), (ann.username, ["Chess club"])])
    [me] = admin.get("/api/admin/users?q=admin&role=admin").json()["users"]
    assert me["classes"] == []  # admins are in none (and reach all)
    [alone] = admin.get(f"/api/admin/users?q={loner.username}").json()["users"]
    assert alone["classes"] == ["Default class"]
    assert admin.get(f"/api/admin/users?class={number}&role=teacher").json()["users"][0]["username"] == teacher.username
    for bad in ("abc", "-1", "1" * 19, "١"):
        r = admin.get(f"/api/admin/users?class={bad}")
        assert r.status_code == 400 and r.json()["error"] == "bad_class", r.text
    assert admin.get("/api/admin/users?class=99999999").json()["users"] == []
