"""The class's mistakes grouped (static/src/class-errors.js), a pure function
of the roster, run by Node: what varies between runs is taken out of the
message, identifiers are kept, the biggest group comes first."""
import json
import shutil
import subprocess

import pytest

from tests.browser import ROOT


def groups(students):
    """[(description, usernames)] of errorGroups(students), as the page shows them."""
    node = shutil.which("node")
    if not node:
        pytest.skip("node is needed to run the page's modules")
    script = ("import { errorGroups, describeGroup } from './static/src/class-errors.js';"
              "const students = JSON.parse(process.argv[1]);"
              "console.log(JSON.stringify(errorGroups(students).map((g) => [describeGroup(g), g.usernames])));")
    done = subprocess.run([node, "--input-type=module", "-e", script, json.dumps(students)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=True)
    return [tuple(g) for g in json.loads(done.stdout)]


def failed(username, kind, message, file=None, line=None, running=False, text=None):
    return {"username": username, "display_name": username.title(), "running": running,
            "last_run": {"outcome": "error", "reason": "error", "error": {
                "kind": kind, "message": message, "file": file, "line": line,
                "text": text or (f"{kind}: {message}" if kind else None)}}}


def test_errors_group_by_kind_message_file_and_line_biggest_first():
    students = [failed(f"s{i}", "NameError", "name 'lenght' is not defined", "lesson2.py", 4) for i in range(3)]
    students += [
        failed("z1", "ZeroDivisionError", "division by zero", "lesson2.py", 9),
        failed("n1", "NameError", "name 'lenght' is not defined", "lesson2.py", 7),  # another line
        failed("n2", "NameError", "name 'lengt' is not defined", "lesson2.py", 4),  # another name
        failed("r1", "NameError", "name 'x' is not defined", running=True),  # running again: no error now
        {"username": "ok", "display_name": "Ok", "running": False, "last_run": {"outcome": "ok", "error": None}},
        {"username": "new", "display_name": "New", "running": False, "last_run": None},
    ]
    assert groups(students) == [
        ("3 students: NameError `lenght` at line 4 of lesson2.py", ["s0", "s1", "s2"]),
        ("1 student: NameError `lengt` at line 4 of lesson2.py", ["n2"]),
        ("1 student: NameError `lenght` at line 7 of lesson2.py", ["n1"]),
        ("1 student: ZeroDivisionError: division by zero at line 9 of lesson2.py", ["z1"]),
    ]


def test_what_varies_between_runs_is_taken_out_and_the_rest_kept():
    students = [
        failed("a", "TypeError", "'<' not supported between <Pet object at 0x7f3a2b1c9d00> and int", "pets.py", 3),
        failed("b", "TypeError", "'<' not supported between <Pet object at 0x7f11aa22bb30>  and int", "pets.py", 3),
        failed("c", None, None, text="Killed: it said <b>so</b>"),
        failed("d", None, None, text=None),
    ]
    assert groups(students) == [
        ("2 students: TypeError: '<' not supported between <Pet object at 0x…> and int at line 3 of pets.py",
         ["a", "b"]),
        ("1 student: stopped with an error, saying nothing", ["d"]),
        ("1 student: Killed: it said <b>so</b>", ["c"]),
    ]
