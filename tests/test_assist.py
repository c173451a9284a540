"""Editing help (issue 13, items 2 and 3) against the real server: completions
that know the standard library, numpy, matplotlib and the student's own
modules; signatures and documentation; diagnostics while typing. And the
attacks: links, FIFOs and sys.path tricks in a home reach nothing outside
it, bad input is a JSON 4xx, and many students at once are all answered."""
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import People

TIMEOUT = 30  # a generous bound that only catches a hang


@pytest.fixture(autouse=True)
def _editing_help_warm(request):
    """The shared `server`'s editing help has warmed up before a test asks it."""
    if "server" in request.fixturenames:
        request.getfixturevalue("warm_server")


def ask(client, op, source, path="main.py", line=None, column=None, **extra):
    """POST /api/assist/<op>; line and column default to the end of the text."""
    lines = source.split("\n")
    body = {"path": path, "source": source, **extra}
    if op != "check":
        body["line"] = len(lines) if line is None else line
        body["column"] = len(lines[body["line"] - 1]) if column is None else column
    return client.post(f"/api/assist/{op}", json=body, timeout=TIMEOUT)


def names(client, source, **kw):
    r = ask(client, "complete", source, **kw)
    assert r.status_code == 200, r.text
    return [c["name"] for c in r.json()["completions"]]


def home_of(server, username):
    return os.path.join(server.env["DATA_DIR"], "storage", "home", username)


def save(client, path, text):
    r = client.request("PUT", "/api/files/home/" + path, data=text.encode(), timeout=TIMEOUT)
    assert r.status_code == 200, r.text


def test_completions_know_the_libraries_a_class_uses(server, people):
    ada = people.student("ada")
    r = ask(ada, "complete", "import random\nrandom.ra")
    assert r.status_code == 200, r.text
    answer = r.json()
    assert "randint" in [c["name"] for c in answer["completions"]]
    assert answer["prefix"] == 2  # "ra" is replaced by the chosen name
    assert {"name": "randint", "type": "function"} in answer["completions"]
    assert {"plot", "show", "xlabel"} <= set(names(ada, "import matplotlib.pyplot as plt\nplt."))
    assert "arange" in names(ada, "import numpy as np\nnp.ar")
    assert "sqrt" in names(ada, "import math\nmath.sq")
    assert "randint" in names(ada, "from random import ran")
    # Inside a function, its own names; the text need not be saved or finished.
    assert "total" in names(ada, "def f(count):\n    total = count * 2\n    return to")


def test_completions_are_ranked_for_beginners(server, people):
    ada = people.student("ada")
    # What Tab takes is what a beginner means: randint, not randbytes (jedi's first).
    assert names(ada, "import random\nrandom.ra")[0] == "randint"
    assert names(ada, "import matplotlib.pyplot as plt\nplt.ti")[0] == "title"
    # Private names only once a _ is typed.
    offered = names(ada, "import random\nrandom.")
    assert offered[0] == "randint" and not [n for n in offered if n.startswith("_")]
    private = names(ada, "import random\nrandom._")
    assert private and all(n.startswith("_") for n in private)
    # The student's own names first; constants after everything else.
    assert names(ada, "printer_count = 3\npri")[:2] == ["printer_count", "print"]
    offered = names(ada, "import os\nos.")
    constants = [i for i, n in enumerate(offered) if n.isupper() and len(n) > 1]
    assert constants and min(constants) > offered.index("getcwd")


def test_signatures_and_documentation(server, people):
    ada = people.student("ada")
    r = ask(ada, "signatures", "import random\nrandom.randint(3, ")
    assert r.status_code == 200, r.text
    [sig] = r.json()["signatures"]
    assert sig["label"] == "randint(a: int, b: int) -> int"
    assert sig["index"] == 1  # the cursor is on b
    assert [sig["label"][s:e] for s, e in sig["params"]] == ["a: int", "b: int"]
    assert "random integer" in sig["doc"]
    assert ask(ada, "signatures", "x = 1").json() == {"signatures": []}

    r = ask(ada, "describe", "import random\nrandom.ra", name="randint")
    assert r.status_code == 200, r.text
    assert r.json()["signature"] == "randint(a: int, b: int) -> int"
    assert "random integer" in r.json()["doc"]


def test_the_students_own_modules_and_names(server, people):
    ada = people.student("ada")
    save(ada, "lesson/helpers.py", 'from tools import double\n\ndef shout(text):\n    """Say it louder."""\n'
                                   '    return text.upper()\n\nLIMIT = 10\n')
    save(ada, "lesson/tools.py", "def double(x):\n    return 2 * x\n")
    save(ada, "other/far.py", "FAR = 1\n")
    assert {"shout", "LIMIT", "double"} <= set(names(ada, "import helpers\nhelpers.", path="lesson/main.py"))
    assert "double" in names(ada, "from helpers import double\nimport tools\ntools.d", path="lesson/main.py")
    assert "helpers" in names(ada, "import hel", path="lesson/main.py")
    # Only the file's own folder is on its path, as when it runs.
    assert names(ada, "import far\nfar.", path="lesson/main.py") == []
    r = ask(ada, "describe", "import helpers\nhelpers.sh", path="lesson/main.py", name="shout")
    assert r.json()["doc"] == "Say it louder."
    # A teacher gets help on a student's file too (their modules read, read-only).
    teacher = people.teacher("tess")
    assert "shout" in names(teacher, "import helpers\nhelpers.", path="lesson/main.py", area="user/" + ada.username)


def test_diagnostics_while_typing(server, people):
    ada = people.student("ada")
    r = ask(ada, "check", "x = 1\nprint(x)\nimport os\n")
    assert r.status_code == 200 and r.json() == {"diagnostics": []}  # an unused import is no mistake yet
    [d] = ask(ada, "check", "x = 'é🐍'; print(totl)\n").json()["diagnostics"]
    # Columns count characters (the emoji is one), whatever pyflakes counts in.
    assert d == {"line": 1, "column": 16, "end_column": 20, "severity": "error",
                 "message": "Undefined name 'totl'"}
    [d] = ask(ada, "check", "for i in range(3)\n    print(i)\n").json()["diagnostics"]
    assert (d["line"], d["column"], d["end_column"]) == (1, 16, 17) and "':'" in d["message"]
    [d] = ask(ada, "check", "def f():\n    return y\n").json()["diagnostics"]
    assert d["line"] == 2 and d["message"] == "Undefined name 'y'"
    assert ask(ada, "check", "print('a'\n").json()["diagnostics"][0]["message"] == "'(' was never closed"


def test_links_fifos_and_sys_path_reach_nothing_outside_the_home(server, people):
    ada, bob = people.student("ada"), people.student("bob")
    save(bob, "secret.py", 'def the_answer():\n    """Bob\'s solution."""\n    return 42\n')
    save(ada, "start.py", "print(1)\n")  # the home exists
    ada_home, bob_home = home_of(server, ada.username), home_of(server, bob.username)
    os.symlink(os.path.join(bob_home, "secret.py"), os.path.join(ada_home, "answers.py"))
    os.mkfifo(os.path.join(ada_home, "waiting.py"))
    assert names(ada, "import answers\nanswers.") == []
    assert names(ada, "import waiting\nwaiting.") == []  # answered, not blocked on the FIFO
    assert names(ada, f"import sys\nsys.path.append({bob_home!r})\nimport secret\nsecret.") == []
    assert names(ada, f"import sys\nsys.path.insert(0, {bob_home!r})\nfrom secret import ") == []
    # File names inside strings are not offered (the process's folder is not the home).
    assert names(ada, f"open('{bob_home}/") == []
    # Another student's files are not read through the area either.
    r = ask(ada, "complete", "import secret\nsecret.", area="user/" + bob.username)
    assert r.status_code == 403 and r.json()["error"] == "forbidden"
    assert "randint" in names(ada, "import random\nrandom.ra")  # and the processes are well


@pytest.mark.parametrize("op, body, status, code", [
    ("complete", {"source": "x"}, 400, "missing_field"),
    ("complete", {"path": "a.py", "source": "x", "line": 1}, 400, "missing_field"),
    ("complete", {"path": "a.py", "source": "x", "line": "1", "column": 0}, 400, "wrong_type"),
    ("complete", {"path": "a.py", "source": "x", "line": True, "column": 0}, 400, "wrong_type"),
    ("complete", {"path": "a.py", "source": "x", "line": 2, "column": 0}, 400, "bad_position"),
    ("complete", {"path": "a.py", "source": "x", "line": 1, "column": 2}, 400, "bad_position"),
    ("complete", {"path": "a.py", "source": "x", "line": 1, "column": -1}, 400, "bad_position"),
    ("complete", {"path": "a.py", "source": "x", "line": 10 ** 30, "column": 0}, 400, "bad_position"),
    ("complete", {"path": "notes.txt", "source": "x", "line": 1, "column": 0}, 400, "not_python"),
    ("complete", {"path": "../x.py", "source": "x", "line": 1, "column": 0}, 400, "path_segment"),
    ("complete", {"path": "/etc/x.py", "source": "x", "line": 1, "column": 0}, 400, "absolute_path"),
    ("complete", {"path": "a.py", "source": "x", "line": 1, "column": 0, "area": "../x"}, 400, "bad_area"),
    ("complete", {"path": "a.py", "source": "x" * (300 << 10), "line": 1, "column": 0}, 400, "too_long"),
    ("describe", {"path": "a.py", "source": "x", "line": 1, "column": 1}, 400, "missing_field"),
    ("describe", {"path": "a.py", "source": "x", "line": 1, "column": 1, "name": "no way"}, 400, "bad_name"),
    ("check", {"path": "a.py", "source": 5}, 400, "wrong_type"),
    ("explain", {"path": "a.py", "source": "x"}, 404, "not_found"),
])
def test_bad_input_is_a_json_4xx(server, people, op, body, status, code):
    ada = people.student("ada")
    r = ada.post(f"/api/assist/{op}", json=body, timeout=TIMEOUT)
    assert (r.status_code, r.json()["error"]) == (status, code), r.text
    assert isinstance(r.json()["message"], str)


def test_only_signed_in_users_with_the_xsrf_header(server, people):
    stranger = server.client()
    r = ask(stranger, "check", "x")
    assert r.status_code == 401 and r.json()["error"] == "not_logged_in"
    ada = people.student("ada")
    r = ada.post("/api/assist/check", json={"path": "a.py", "source": "x"}, xsrf=False, timeout=TIMEOUT)
    assert r.status_code == 403 and r.json()["error"] == "xsrf_missing"


def test_a_class_typing_at_once_is_answered(server, people):
    students = [people.student("s") for _ in range(24)]

    def one(client):
        return names(client, "import random\nrandom.ra"), ask(client, "check", "print(undefined)\n").json()

    with ThreadPoolExecutor(len(students)) as pool:
        for completions, checked in pool.map(one, students):
            assert "randint" in completions
            assert checked["diagnostics"][0]["message"] == "Undefined name 'undefined'"


def test_editing_help_turned_off(start_server):
    server = start_server(ASSIST_PROCESSES=0)
    ada = People(server).student("ada")
    r = ask(ada, "complete", "import random\nrandom.ra")
    assert r.status_code == 503 and r.json()["error"] == "assist_off"
