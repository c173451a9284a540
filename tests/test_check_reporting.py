"""A check is reported as a check: pressing Check leaves what the student's
last Run showed on the teacher's screen (their mistake stays in "Mistakes
now"), and the tile learns the check's score from its attempt."""
import os
import time

import pytest

from tests.conftest import People
from tests.live_support import a_class
from tests.runs_support import run
from tests.test_check_isolation import EXERCISE, RIGHT, press_check, save

TIMEOUT = 60  # only catches a hang

if os.geteuid() != 0:
    pytest.skip("the local sandbox runs programs as students' uids: these tests need root", allow_module_level=True)


def roster_row(teacher, number, username, until):
    """The student's roster row once `until(row)` holds."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        rows = teacher.get(f"/api/roster?class={number}").json()["students"]
        row = next(r for r in rows if r["username"] == username)
        if until(row) or time.monotonic() > deadline:
            return row
        time.sleep(0.1)


def test_a_check_keeps_the_mistake_of_the_last_run_and_shows_its_score(shared_servers):
    server = shared_servers.get(SANDBOX="local", CHECK_SECONDS="3")
    people = People(server)
    teacher, ann = people.teacher("rep-t"), people.student("rep-ann")
    number = a_class(server, teacher, ann)
    assert teacher.request("PUT", f"/api/classes/{number}/exercises/swap", json=EXERCISE).status_code == 200
    assert ann.post(f"/api/exercises/{number}/swap/start").status_code == 200

    ended, _ = run(server, ann, "items = [1, 2]\nprint(lenght(items))\n", path="oops.py")
    assert ended["reason"] == "error"
    row = roster_row(teacher, number, ann.username, lambda r: r["last_run"] and r["last_run"]["error"])
    assert row["last_run"]["error"]["kind"] == "NameError", row

    attempt, _ = press_check(server, ann, number, save(ann, RIGHT))

    row = roster_row(teacher, number, ann.username, lambda r: r["last_check"])
    assert row["last_check"]["exercise"] == "swap" and row["last_check"]["score"] == attempt["score"], row
    # The check's runs (all of which ended well) did not replace the run the teacher saw fail.
    assert not row["running"] and row["last_run"]["outcome"] == "error", row
    assert row["last_run"]["error"]["kind"] == "NameError" and row["last_run"]["error"]["file"] == "oops.py", row
