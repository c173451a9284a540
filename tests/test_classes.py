"""Classes (issue 13, item 6): teachers own classes; the roster, the course
folder, students' files and pushes work per class; an admin makes classes
and puts people in them (also from a class list's `class` column); an
account in no class is in the default class, as everyone was before."""
import pytest

from tests.conftest import PASSWORD, People
from tests.helpers import sql
from loadtest.harness import ADMIN_PASSWORD


@pytest.fixture
def school(start_server):
    """A server of its own (the default class holds every unassigned
    account) with an admin signed in, and its people."""
    server = start_server()
    admin = server.client()
    admin.login_ok("admin", ADMIN_PASSWORD)
    return server, admin, People(server)


def make_class(admin, name, *members):
    r = admin.post("/api/classes", json={"name": name})
    assert r.status_code == 201, r.text
    number = r.json()["class"]["id"]
    r = admin.post(f"/api/classes/{number}/members", json={"add": [m.username for m in members]})
    assert r.status_code == 200 and r.json()["added"] == len(members), r.text
    return number


def put(client, area, path, text, etag=None):
    headers = {"If-Match": etag} if etag else {}
    return client.request("PUT", f"/api/files/{area}/{path}", data=text.encode(), headers=headers)


def text_of(client, area, path):
    r = client.get(f"/api/files/{area}/{path}")
    return r.json()["content"] if r.status_code == 200 else r.status_code


def test_teachers_reach_only_their_classes(school):
    server, admin, people = school
    # New teachers, put into their classes before they ever sign in: just those classes are theirs.
    mrs_a, mr_b = people.teacher("mrs-a", log_in=False), people.teacher("mr-b", log_in=False)
    mr_x = people.teacher("mr-x")
    ann, ben, una = people.student("ann"), people.student("ben"), people.student("una")
    a = make_class(admin, "7A", mrs_a, ann)
    b = make_class(admin, "7B", mr_b, ben)
    mrs_a.login_ok(mrs_a.username, PASSWORD)
    mr_b.login_ok(mr_b.username, PASSWORD)

    mine = mrs_a.get("/api/classes").json()["classes"]
    assert [(c["id"], c["area"], c["teachers"], c["students"]) for c in mine] == [(a, f"class/{a}", [mrs_a.username], 1)]
    assert [c["name"] for c in ann.get("/api/classes").json()["classes"]] == ["7A"]
    assert "teachers" not in ann.get("/api/classes").json()["classes"][0]
    assert [c["name"] for c in admin.get("/api/classes").json()["classes"]] == ["Default class", "7A", "7B"]

    # Each class has a course folder of its own: its teachers write, its students read.
    assert put(mrs_a, f"class/{a}", "week1/start.py", "# 7A\n").status_code == 200
    assert text_of(ann, f"class/{a}", "week1/start.py") == "# 7A\n"
    assert put(ann, f"class/{a}", "week1/start.py", "hacked", etag="*").json()["error"] == "read_only"
    for outsider in (mr_b, ben, mr_x, una):
        r = outsider.get(f"/api/files/class/{a}/week1/start.py")
        assert r.status_code == 403 and r.json()["error"] == "not_your_class", r.text
    assert put(mr_b, f"class/{a}", "x.py", "x").status_code == 403
    assert mr_b.get("/api/files/class/999999/x.py").json()["error"] == "no_such_class"
    assert admin.get(f"/api/files/class/{a}/week1/start.py").status_code == 200

    # Students' homes: the teachers of their classes (and admins) read them.
    put(ann, "home", "work.py", "ann's work\n")
    assert text_of(mrs_a, f"user/{ann.username}", "work.py") == "ann's work\n"
    r = mr_b.get(f"/api/files/user/{ann.username}/work.py")
    assert r.status_code == 403 and r.json()["error"] == "not_your_student"
    assert mr_b.get(f"/api/zip/user/{ann.username}").status_code == 403
    assert text_of(admin, f"user/{ann.username}", "work.py") == "ann's work\n"

    # The roster is the class's; the default class holds those in no class.
    names = lambda client, q="": [s["username"] for s in client.get("/api/roster" + q).json()["students"]]
    assert names(mrs_a, f"?class={a}") == [ann.username]
    assert mrs_a.get(f"/api/roster?class={b}").json()["error"] == "not_your_class"
    assert names(mr_x) == [una.username]  # mr-x and una are in no class: the default one
    assert names(admin, f"?class={b}") == [ben.username]
    assert ann.get("/api/roster").status_code == 403
    assert mrs_a.get("/api/roster?class=abc").json()["error"] == "bad_class"

    # Taken out of 7A, ann is in no class again: the default class's teacher has her.
    r = admin.post(f"/api/classes/{a}/members", json={"remove": [ann.username]})
    assert r.json() == {"added": 0, "removed": 1}
    assert names(mr_x) == [ann.username, una.username]
    assert text_of(mr_x, f"user/{ann.username}", "work.py") == "ann's work\n"
    assert mrs_a.get(f"/api/files/user/{ann.username}/work.py").status_code == 403


def test_the_default_class_keeps_the_course_folder_of_before(school):
    server, admin, people = school
    mr_x, una = people.teacher("mr-x"), people.student("una")
    assert put(mr_x, "course", "intro.py", "print('hi')\n").status_code == 200
    [default] = una.get("/api/classes").json()["classes"]
    assert default["area"] == "course" and default["default"]
    assert text_of(una, "course", "intro.py") == "print('hi')\n"
    # Put into a class of their own as well, he still teaches the default class.
    make_class(admin, "Robotics", mr_x)
    assert put(mr_x, "course", "intro.py", "print('hello')\n", etag="*").status_code == 200
    assert text_of(una, "course", "intro.py") == "print('hello')\n"


def test_joining_a_class_does_not_take_a_teacher_out_of_the_default_class(school):
    """The bug of issue 24: being in no class is what put a teacher in the
    default class, so joining a new class silently took them out of it and
    their students vanished from /teacher."""
    server, admin, people = school
    mr_x, una, ivo = people.teacher("mr-x"), people.student("una"), people.student("ivo")
    ann = people.student("ann")
    default = lambda client: next(c for c in client.get("/api/classes").json()["classes"] if c["default"])
    assert [s["username"] for s in mr_x.get("/api/roster").json()["students"]] == sorted([una.username, ivo.username,
                                                                                          ann.username])
    robotics = make_class(admin, "Robotics", mr_x, ann)

    classes = mr_x.get("/api/classes").json()["classes"]
    assert [(c["name"], c["students"]) for c in classes] == [("Default class", 2), ("Robotics", 1)]
    names = lambda q="": [s["username"] for s in mr_x.get("/api/roster" + q).json()["students"]]
    assert names() == sorted([una.username, ivo.username])  # his earlier students are still his
    assert names(f"?class={robotics}") == [ann.username]  # ann moved: a student is in one class or the default
    put(una, "home", "work.py", "una's\n")
    assert text_of(mr_x, f"user/{una.username}", "work.py") == "una's\n"
    members = admin.get(f"/api/classes/{default(admin)['id']}/members").json()["members"]
    assert (mr_x.username, True) in [(m["username"], m["assigned"]) for m in members]  # kept, and shown as put there

    # Taking him out of the default class is an admin's choice, and it holds.
    r = admin.post(f"/api/classes/{default(admin)['id']}/members", json={"remove": [mr_x.username]})
    assert r.json() == {"added": 0, "removed": 1}
    assert [c["name"] for c in mr_x.get("/api/classes").json()["classes"]] == ["Robotics"]
    # A new teacher who never signed in, put into a class, has just that class.
    new = people.teacher("mrs-new", log_in=False)
    make_class(admin, "Chess", new)
    new.login_ok(new.username, PASSWORD)
    assert [c["name"] for c in new.get("/api/classes").json()["classes"]] == ["Chess"]


def test_only_admins_change_classes_and_bad_changes_change_nothing(school):
    server, admin, people = school
    mrs_a, ann = people.teacher("mrs-a", log_in=False), people.student("ann")
    a = make_class(admin, "7A", mrs_a)
    mrs_a.login_ok(mrs_a.username, PASSWORD)
    assert mrs_a.post("/api/classes", json={"name": "Mine"}).status_code == 403
    assert mrs_a.post(f"/api/classes/{a}/members", json={"add": [ann.username]}).status_code == 403
    assert ann.get(f"/api/classes/{a}/members").status_code == 403
    assert admin.post("/api/classes", json={"name": "7A"}).json()["error"] == "exists"
    assert admin.post("/api/classes", json={"name": "7a"}).json()["error"] == "exists"
    assert admin.post("/api/classes", json={"name": " "}).json()["error"] == "invalid_name"
    assert admin.post("/api/classes", json={"name": "a\u202eb"}).json()["error"] == "invalid_name"
    # One unknown or admin name: nobody is added.
    for bad, code in ((["nobody-here"], "unknown_users"), (["admin"], "admins_have_no_class")):
        r = admin.post(f"/api/classes/{a}/members", json={"add": [ann.username] + bad})
        assert r.status_code == 400 and r.json()["error"] == code, r.text
    members = admin.get(f"/api/classes/{a}/members").json()["members"]
    assert [(m["username"], m["role"], m["assigned"]) for m in members] == [(mrs_a.username, "teacher", True)]
    assert admin.post("/api/classes/99999/members", json={"add": []}).json()["error"] == "no_such_class"
    assert admin.post(f"/api/classes/{a}", json={"name": "7A (2025)"}).status_code == 200
    assert [c["name"] for c in mrs_a.get("/api/classes").json()["classes"]] == ["7A (2025)"]


def test_a_class_list_with_a_class_column_makes_the_class(school):
    server, admin, people = school
    old = people.student("old")
    csv = ("username,display_name,role,password,class\n"
           "cy,Cy Young,student,,8c\n"
           "di,Di Lee,student,di-password-1,8C\n"
           "mr-c,Mr C,teacher,,8C\n"
           f"{old.username},Old,student,,8C\n"
           "ed,Ed,student\n")
    r = admin.post("/api/admin/users/import", json={"csv": csv})
    assert r.status_code == 200, r.text
    rows = {row["username"]: row for row in r.json()["rows"]}
    # "8c" is the same class as "8C": one class is made, named as first written.
    assert rows["cy"]["class"] == "8c" and rows["cy"]["display_name"] == "Cy Young" and rows["cy"]["password"]
    assert rows["ed"]["class"] is None
    [c8] = [c for c in admin.get("/api/classes").json()["classes"] if c["name"].lower() == "8c"]
    assert c8["teachers"] == ["mr-c"] and c8["students"] == 2  # the existing account was skipped, and left
    mr_c = server.client()
    mr_c.login_ok("mr-c", rows["mr-c"]["password"])
    assert [s["username"] for s in mr_c.get(f"/api/roster?class={c8['id']}").json()["students"]] == ["cy", "di"]
    # A bad class name or an admin with a class: nothing is created.
    for bad in ("zz,Zed,student,,\u0000x\n", "zz,Zed,admin,,8C\n", "zz,Zed,student,,8C,extra\n"):
        r = admin.post("/api/admin/users/import", json={"csv": bad})
        assert r.status_code == 400 and r.json()["error"] == "invalid_rows", r.text
    assert sql(server.env["DATABASE_URL"], "SELECT count(*) FROM users WHERE username = 'zz'") == [(0,)]


def test_push_updates_unchanged_copies_and_leaves_changed_ones(school):
    server, admin, people = school
    mrs_a, ann, ben, cat = people.teacher("mrs-a"), people.student("ann"), people.student("ben"), people.student("cat")
    outsider = people.student("out")
    a = make_class(admin, "7A", mrs_a, ann, ben, cat)
    area = f"class/{a}"
    put(mrs_a, area, "week1/start.py", "# v1\n")
    put(mrs_a, area, "week1/data.txt", "1 2 3\n")
    put(cat, "home", "week1/start.py", "cat began before the push\n")

    r = mrs_a.post("/api/course/push", json={"area": area, "path": "week1"})
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["students"] == 3 and out_of(report) == set()
    assert sorted(report["copied"][ann.username]) == ["week1/data.txt", "week1/start.py"]
    assert report["skipped"][cat.username] == [{"path": "week1/start.py", "reason": "changed"}]
    assert text_of(outsider, "home", "week1/start.py") == 404  # not in the class

    # Ann edits her copy; ben deletes his data file; the teacher corrects the starter.
    etag = ann.get("/api/files/home/week1/start.py").json()["etag"]
    assert put(ann, "home", "week1/start.py", "# v1\nprint('ann')\n", etag=etag).status_code == 200
    assert ben.request("DELETE", "/api/files/home/week1/data.txt").status_code == 200
    etag = mrs_a.get(f"/api/files/{area}/week1/start.py").json()["etag"]
    put(mrs_a, area, "week1/start.py", "# v2, corrected\n", etag=etag)

    report = mrs_a.post("/api/course/push", json={"area": area, "path": "week1"}).json()
    assert report["updated"] == {ben.username: ["week1/start.py"]}
    assert report["skipped"][ann.username] == [{"path": "week1/start.py", "reason": "changed"}]
    assert report["skipped"][cat.username] == [{"path": "week1/start.py", "reason": "changed"}]
    assert report["copied"] == {ben.username: ["week1/data.txt"]}  # deleted: it comes back
    assert report["up_to_date"] == {ann.username: ["week1/data.txt"], cat.username: ["week1/data.txt"]}
    assert text_of(ben, "home", "week1/start.py") == "# v2, corrected\n"
    assert text_of(ann, "home", "week1/start.py") == "# v1\nprint('ann')\n"
    assert text_of(cat, "home", "week1/start.py") == "cat began before the push\n"
    # Ben's v1 is an earlier version of his file, not lost.
    assert len(ben.get("/api/history/home/week1/start.py").json()["versions"]) == 1

    # Only the class's students, and only its teachers push.
    r = mrs_a.post("/api/course/push", json={"area": area, "path": "week1", "students": [outsider.username]})
    assert r.status_code == 400 and r.json()["error"] == "unknown_students"
    assert ann.post("/api/course/push", json={"area": area, "path": "week1"}).status_code == 403
    other = people.teacher("mr-x")
    assert other.post("/api/course/push", json={"area": area, "path": "week1"}).json()["error"] == "not_your_class"
    r = mrs_a.post("/api/course/push", json={"area": area, "path": "week1/start.py", "students": [ben.username]})
    assert r.json()["students"] == 1 and r.json()["up_to_date"] == {ben.username: ["week1/start.py"]}


def out_of(report):
    return set(report["failed"])


def test_a_students_save_racing_a_repush_is_never_overwritten(school):
    """Each of many rounds: the student saves her copy while the teacher
    pushes a new starter. Whichever comes first, her save is either
    refused with a conflict (the push came first: she sees the new version)
    or kept (and the push reports it changed); never silently replaced."""
    from concurrent.futures import ThreadPoolExecutor
    server, admin, people = school
    mrs_a, ann = people.teacher("mrs-a"), people.student("ann")
    a = make_class(admin, "7A", mrs_a, ann)
    area = f"class/{a}"
    put(mrs_a, area, "s.py", "# v0\n")
    mrs_a.post("/api/course/push", json={"area": area, "path": "s.py"})
    with ThreadPoolExecutor(2) as pool:
        for n in range(1, 9):
            mine = ann.get("/api/files/home/s.py").json()
            course = mrs_a.get(f"/api/files/{area}/s.py").json()["etag"]
            put(mrs_a, area, "s.py", f"# v{n}\n", etag=course)
            saving = pool.submit(put, ann, "home", "s.py", f"ann {n}\n", mine["etag"])
            pushing = pool.submit(mrs_a.post, "/api/course/push", json={"area": area, "path": "s.py"})
            saved, report = saving.result(), pushing.result().json()
            now = text_of(ann, "home", "s.py")
            if saved.status_code == 200:
                assert now == f"ann {n}\n" and report["skipped"][ann.username][0]["reason"] == "changed"
                # Hers from now on: put the pushed version back for the next round.
                put(ann, "home", "s.py", f"# v{n}\n", etag=saved.json()["etag"])
                mrs_a.post("/api/course/push", json={"area": area, "path": "s.py"})
            else:
                assert saved.status_code == 409 and now == f"# v{n}\n", (saved.text, now)
                assert report["updated"] == {ann.username: ["s.py"]}


def test_a_push_may_overwrite_changed_copies_keeping_theirs_in_history_or_send_a_new_file(school):
    """Issue 24: "update everyone's copy anyway" replaces a changed copy and
    keeps the student's version in its history (restorable); "send as a new
    file" puts the starter beside theirs under a free name; the report says
    who got what, by name."""
    server, admin, people = school
    mrs_a = people.teacher("mrs-a")
    ann, ben, cat = (people.student(n, display_name=d) for n, d in
                     (("ann", "Ann Smith"), ("ben", "Ben Jones"), ("cat", "Cat Lee")))
    a = make_class(admin, "7A", mrs_a, ann, ben, cat)
    area = f"class/{a}"
    put(mrs_a, area, "lesson2.py", "# v1\n")
    assert mrs_a.post("/api/course/push", json={"area": area, "path": "lesson2.py"}).status_code == 200
    for student, text in ((ann, "# ann's work\n"), (cat, "# cat's work\n")):
        etag = student.get("/api/files/home/lesson2.py").json()["etag"]
        assert put(student, "home", "lesson2.py", text, etag=etag).status_code == 200
    etag = mrs_a.get(f"/api/files/{area}/lesson2.py").json()["etag"]
    put(mrs_a, area, "lesson2.py", "# v2\n", etag=etag)

    # Overwrite, for ann only: hers is the newest earlier version, and comes back.
    r = mrs_a.post("/api/course/push", json={"area": area, "path": "lesson2.py", "students": [ann.username],
                                             "changed": "overwrite"})
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["changed"] == "overwrite" and report["names"] == {ann.username: "Ann Smith"}
    [replaced] = report["replaced"][ann.username]
    assert replaced["path"] == "lesson2.py" and replaced["version"]
    assert report["skipped"] == {} and report["updated"] == {}
    assert text_of(ann, "home", "lesson2.py") == "# v2\n"
    versions = ann.get("/api/history/home/lesson2.py").json()["versions"]
    assert versions[0]["version"] == replaced["version"]
    kept = ann.get(f"/api/history/home/lesson2.py?version={replaced['version']}").json()
    assert kept["content"] == "# ann's work\n"
    r = ann.post("/api/files/home/lesson2.py", json={"action": "restore", "version": replaced["version"]})
    assert r.status_code == 200, r.text
    assert text_of(ann, "home", "lesson2.py") == "# ann's work\n"

    # Send as a new file, to everyone: ben had not changed his (updated), ann and cat
    # get "lesson2 (teacher).py" beside theirs; a file of that name of cat's is never overwritten.
    put(cat, "home", "lesson2 (teacher).py", "# cat's own file of that name\n")
    r = mrs_a.post("/api/course/push", json={"area": area, "path": "lesson2.py", "changed": "new_file"})
    report = r.json()
    assert report["names"] == {ann.username: "Ann Smith", ben.username: "Ben Jones", cat.username: "Cat Lee"}
    assert report["updated"] == {ben.username: ["lesson2.py"]}
    assert report["sent_as_new"] == {ann.username: [{"path": "lesson2.py", "as": "lesson2 (teacher).py"}],
                                     cat.username: [{"path": "lesson2.py", "as": "lesson2 (teacher 2).py"}]}
    assert text_of(ann, "home", "lesson2 (teacher).py") == "# v2\n"
    assert text_of(ann, "home", "lesson2.py") == "# ann's work\n"
    assert text_of(cat, "home", "lesson2 (teacher).py") == "# cat's own file of that name\n"
    assert text_of(cat, "home", "lesson2 (teacher 2).py") == "# v2\n"
    assert text_of(cat, "home", "lesson2.py") == "# cat's work\n"
    # Sent again: found up to date beside theirs, no third copy.
    report = mrs_a.post("/api/course/push", json={"area": area, "path": "lesson2.py", "changed": "new_file"}).json()
    assert report["sent_as_new"] == {}
    assert report["up_to_date"] == {ann.username: ["lesson2 (teacher).py"], ben.username: ["lesson2.py"],
                                    cat.username: ["lesson2 (teacher 2).py"]}

    # A bad choice changes nothing; the rights stay: only the class's teacher pushes.
    r = mrs_a.post("/api/course/push", json={"area": area, "path": "lesson2.py", "changed": "everything"})
    assert r.status_code == 400 and r.json()["error"] == "bad_field"
    r = mrs_a.post("/api/course/push", json={"area": area, "path": "lesson2.py", "changed": 3})
    assert r.status_code == 400 and r.json()["error"] == "wrong_type"
    assert text_of(cat, "home", "lesson2.py") == "# cat's work\n"
    r = ann.post("/api/course/push", json={"area": area, "path": "lesson2.py", "changed": "overwrite"})
    assert r.status_code == 403
    r = people.teacher("mr-x").post("/api/course/push", json={"area": area, "path": "lesson2.py",
                                                              "changed": "overwrite"})
    assert r.json()["error"] == "not_your_class"
    assert text_of(cat, "home", "lesson2.py") == "# cat's work\n"


def test_an_overwriting_push_never_replaces_a_copy_it_cannot_keep(start_server):
    """A student whose home has no room for their version keeps their copy:
    the report says so, and nothing of theirs is lost."""
    server = start_server(QUOTA_BYTES="3000")
    admin = server.client()
    admin.login_ok("admin", ADMIN_PASSWORD)
    people = People(server)
    mrs_a, ann = people.teacher("mrs-a"), people.student("ann")
    a = make_class(admin, "7A", mrs_a, ann)
    area = f"class/{a}"
    put(mrs_a, area, "big.py", "# v1\n")
    mrs_a.post("/api/course/push", json={"area": area, "path": "big.py"})
    etag = ann.get("/api/files/home/big.py").json()["etag"]
    mine = "# ann\n" + "x" * 1200 + "\n"
    assert put(ann, "home", "big.py", mine, etag=etag).status_code == 200
    etag = mrs_a.get(f"/api/files/{area}/big.py").json()["etag"]
    put(mrs_a, area, "big.py", "# v2\n" + "y" * 1700 + "\n", etag=etag)
    report = mrs_a.post("/api/course/push", json={"area": area, "path": "big.py", "changed": "overwrite"}).json()
    assert report["replaced"] == {}
    assert report["skipped"] == {ann.username: [{"path": "big.py", "reason": "quota_exceeded"}]}
    assert text_of(ann, "home", "big.py") == mine
