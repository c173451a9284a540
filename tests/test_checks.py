"""Pressing Check, over the real WebSocket of a real server: an exercise's
output, code and function checks run against the student's saved program
(server/checks/grader.py), the verdicts decided in a checker sandbox the
student's code never reaches, the attempt recorded with its score.

Hostile programs (each a real submission): one that prints a fake result,
exits in the middle of a call, reads and writes where the checks live,
patches `assert` and builtins, never returns, forks: each gets nothing for
what it did, and the next student's check is unaffected. On local, and
on docker where the kind decides (exits, kills, forks, its file system).

Needs root for the local sandbox (programs run as students' uids).
"""
import asyncio
import os

import pytest

from loadtest.run_client import RunClient
from tests.conftest import People
from tests.live_support import a_class

TIMEOUT = 120  # only catches a hang

if os.geteuid() != 0:
    pytest.skip("the local sandbox runs programs as students' uids: these tests need root", allow_module_level=True)

TESTS_PY = '''"""SECRET-TESTS-FILE"""
from average import average


def test_two():
    assert average([4, 6]) == 5


def test_one():
    assert average([7]) == 7


def test_empty_list_raises():
    try:
        average([])
    except ZeroDivisionError:
        return
    assert False, "average([]) should raise ZeroDivisionError"
'''

RIGHT = '''def average(numbers):
    total = 0
    for n in numbers:
        total += n
    return total / len(numbers)


if __name__ == "__main__":
    numbers = []
    while True:
        line = input()
        if not line:
            break
        numbers.append(float(line))
    print("Average:", average(numbers))
'''

WRONG = RIGHT.replace("return total / len(numbers)", "return total // 2 + 1")
NO_PARSE = "def average(numbers)\n    return 0\n"


def exercise(**changes):
    return {"title": "Average", "file": "average.py", "due": None,
            "instructions": "# Average\nWrite `average(numbers)`.\n", "tests": TESTS_PY,
            "starter": {"average.py": "def average(numbers):\n    return 0\n"},
            "checks": [
                {"id": "shown", "kind": "output", "input": "4\n6\n\n", "expected": "Average: 5.0\n",
                 "compare": "normalized", "points": 2, "hint": "Print 'Average: ' first."},
                {"id": "secret-output", "kind": "output", "input": "1\n2\n3\n\n", "expected": "SECRET-EXPECTED 2.0",
                 "compare": "exact", "visibility": "hidden", "hint": "SECRET-HINT", "points": 3},
                {"id": "loop", "kind": "code", "rule": "uses_loop"},
                {"id": "no-stats", "kind": "code", "rule": "no_import:statistics"},
                {"id": "two", "kind": "function", "test": "test_two", "points": 2},
                {"id": "empty", "kind": "function", "test": "test_empty_list_raises", "visibility": "hidden"}],
            **changes}


@pytest.fixture
def room(request, shared_servers):
    """(server, class id, teacher, [students]) with the average exercise
    given, on a shared server of the sandbox kind `request.param` (local
    unless a test asks for another) with short check limits, one check at a
    time (the others wait in line)."""
    kind = getattr(request, "param", "local")
    if kind == "docker":
        request.getfixturevalue("docker_image")
    server = shared_servers.get(SANDBOX=kind, CHECK_SECONDS="3", CHECKS_AT_ONCE="1")
    people = People(server)
    teacher = people.teacher("mr-t")
    students = [people.student(f"s{i}") for i in range(3)]
    number = a_class(server, teacher, *students)
    r = teacher.request("PUT", f"/api/classes/{number}/exercises/average", json=exercise())
    assert r.status_code == 200, r.text
    return server, number, teacher, students


def submit(student, number, source):
    """Start the exercise (its starter) and save `source` as the file to check: its etag."""
    r = student.post(f"/api/exercises/{number}/average/start")
    assert r.status_code == 200, r.text
    r = student.request("PUT", "/api/files/home/average/average.py", data=source.encode(), headers={"If-Match": "*"})
    assert r.status_code == 200, r.text
    return r.json()["etag"]


async def check(server, student, number, etag=None):
    """Press Check on the IDE's socket: (the attempt or the error, every check message)."""
    async with RunClient(server.url, student.http.cookies.get_dict()) as rc:
        rc.messages = []
        asked = await rc.send(type="check", **{"class": number, "exercise": "average"}, **({"etag": etag} if etag else {}))
        while True:
            message = await rc.receive(TIMEOUT)
            if message["type"] == "error" or (message["type"] == "check" and message["state"] == "done"):
                answers = [m for m in rc.messages if m["type"] in ("check", "error")]
                assert {m["re"] for m in answers} == {asked}, answers  # each names the check it answers
                return message, answers


def results_by_id(attempt):
    return {r["id"]: r for r in attempt["results"]}


@pytest.mark.parametrize("room", ["local", "remote"], indirect=True)  # remote: a check's scratch homes on a runner
def test_a_wrong_program_fails_in_words_and_a_right_one_passes(room):
    server, number, teacher, (ann, *_) = room
    etag = submit(ann, number, WRONG)
    done, said = asyncio.run(check(server, ann, number, etag))
    assert [m["state"] for m in said][-2:] == ["running", "done"], said
    attempt = done["attempt"]
    assert attempt["counted"] and not attempt["not_gradable"] and attempt["attempts"] == 1
    got = results_by_id(attempt)
    assert not got["shown"]["passed"] and got["shown"]["earned"] == 0
    shown = got["shown"]["shown"]
    # Compared ignoring case and spaces, as the check says, but shown as written.
    assert shown["input"] == "4\n6\n\n" and "Average: 5.0" in shown["expected"]
    assert "Average: 6" in shown["actual"] and "-Average: 5.0" in shown["diff"], shown
    assert got["shown"]["message"].startswith("Your output differs") and got["shown"]["message"].endswith(".")
    assert got["shown"]["hint"] == "Print 'Average: ' first."
    assert got["loop"]["passed"] and got["no-stats"]["passed"]
    assert not got["two"]["passed"] and "6" in got["two"]["shown"]["actual"] and "5" in got["two"]["shown"]["expected"]
    # Hidden checks: only passed or not, under a neutral name.
    hidden = [r for r in attempt["results"] if r.get("hidden")]
    assert len(hidden) == 2 and all(set(r) <= {"id", "label", "passed", "points", "earned", "hidden", "message"}
                                    for r in hidden)
    text = str(done) + str(said)
    assert "SECRET" not in text and "secret-output" not in text and "test_empty" not in text

    etag = submit(ann, number, RIGHT)
    done, _ = asyncio.run(check(server, ann, number, etag))
    attempt = done["attempt"]
    assert all(r["passed"] for r in attempt["results"] if r["id"] != "hidden-1"), attempt["results"]
    # The hidden output check expects text no program here prints: it stays failed.
    assert attempt["score"] == attempt["max_score"] - 3 and attempt["attempts"] == 2
    grid = teacher.get(f"/api/classes/{number}/grid").json()
    [row] = [s for s in grid["students"] if s["username"] == ann.username]
    assert row["cells"]["average"]["attempts"] == 2 and row["cells"]["average"]["best"] == attempt["score"]


PROMPTING = RIGHT.replace("line = input()", 'line = input("A number (empty to stop): ")')


# Local only: prompts cross in the launcher's frames, the same code in every kind.
def test_a_prompting_program_passes_by_default_and_fails_under_exact(room):
    """Beginners write prompts: by default what input() prints before the
    student types is not compared; under "exact" it is. The result says
    which comparison was used and shows the run, prompts and typed lines apart."""
    server, number, teacher, (ann, *_) = room
    checks = [{"id": "default", "kind": "output", "input": "4\n6\n\n", "expected": "Average: 5.0\n"},
              {"id": "exact", "kind": "output", "input": "4\n6\n\n", "expected": "Average: 5.0\n",
               "compare": "exact"}]
    r = teacher.request("PUT", f"/api/classes/{number}/exercises/average", json=exercise(checks=checks))
    assert r.status_code == 200, r.text
    done, _ = asyncio.run(check(server, ann, number, submit(ann, number, PROMPTING)))
    got = results_by_id(done["attempt"])
    assert got["default"]["passed"] and got["default"]["shown"]["compare"] == "output", got["default"]
    exact = got["exact"]
    assert not exact["passed"] and exact["shown"]["compare"] == "exact"
    assert "what input() shows before you type too" in exact["message"]
    assert "+A number (empty to stop): A number (empty to stop): A number (empty to stop): Average: 5.0" \
        in exact["shown"]["diff"], exact["shown"]
    # Compared under exact, the prompts show as output; what was typed (not echoed in a check) is apart.
    prompt = "A number (empty to stop): "
    assert exact["shown"]["transcript"] == [["output", prompt], ["typed", "4\n"], ["output", prompt],
                                            ["typed", "6\n"], ["output", prompt], ["typed", "\n"],
                                            ["output", "Average: 5.0\n"]]


def test_a_class_checking_at_once_waits_in_line_told_its_place(room):
    server, number, _, students = room
    etags = [submit(s, number, RIGHT) for s in students]

    async def everyone():
        return await asyncio.gather(*(check(server, s, number, e) for s, e in zip(students, etags)))
    finished = asyncio.run(everyone())
    assert all(done["type"] == "check" and done["attempt"]["counted"] for done, _ in finished)
    waited = [[m for m in said if m["state"] == "queued"] for _, said in finished]
    # One check at a time: the others were told where they stand and how long it may take.
    told = [w for w in waited if w]
    assert len(told) >= len(students) - 1, waited
    assert all(m["position"] >= 1 and m["estimate"] > 0 for w in told for m in w)
    assert max(m["position"] for w in told for m in w) >= 2


def test_a_program_that_does_not_parse_costs_no_attempt(room):
    server, number, _, (_, ben, _) = room
    etag = submit(ben, number, NO_PARSE)
    done, _ = asyncio.run(check(server, ben, number, etag))
    attempt = done["attempt"]
    assert attempt["not_gradable"] and not attempt["counted"] and attempt["attempts"] == 0
    assert "line 1" in attempt["note"] and attempt["score"] == 0


def test_a_check_refuses_a_version_the_editor_does_not_show(room):
    server, number, teacher, (_, _, cy) = room
    submit(cy, number, RIGHT)
    done, _ = asyncio.run(check(server, cy, number, "0" * 20))
    assert done["type"] == "error" and done["error"] == "changed"
    # Refused before the program ran: not a press to keep (a script could add one every millisecond).
    r = teacher.get(f"/api/classes/{number}/exercises/average/attempts/{cy.username}")
    assert r.status_code == 404 and r.json()["error"] == "no_attempt"


def texts(value):
    """Every text in a JSON value, one after the other."""
    if isinstance(value, dict):
        return " ".join(texts(v) for v in value.values())
    if isinstance(value, list):
        return " ".join(texts(v) for v in value)
    return value if isinstance(value, str) else ""


# Prints a NUL and the UTF-8 bytes of a lone surrogate; raises with both in its message.
NUL_AND_HALVES = '''import os
import sys


def average(numbers):
    raise ValueError("nul \\0 and half \\ud800 here")


if __name__ == "__main__":
    sys.stdout.flush()
    os.write(1, b"Average: 5.0\\0 \\xed\\xa0\\x80\\n")
    raise ValueError("nul \\0 and half \\ud800 here")
'''


# Local only: the output crosses in the launcher's frames and is cleaned up by the server, whatever the kind.
def test_nul_and_lone_surrogates_in_output_and_exceptions_are_shown_and_recorded(room):
    server, number, teacher, (ann, *_) = room
    etag = submit(ann, number, NUL_AND_HALVES)
    done, _ = asyncio.run(check(server, ann, number, etag))
    assert done["type"] == "check", done
    attempt = done["attempt"]
    assert attempt["outcome"] == "checked" and attempt["counted"] and attempt["attempts"] == 1
    got = results_by_id(attempt)
    # Escaped where they can be seen, never dropped: \0 for the NUL, \ud800 for the half a character.
    assert "Average: 5.0\\0 \ufffd" in got["shown"]["shown"]["actual"], got["shown"]
    assert "nul \\0 and half \\ud800 here" in texts(got["two"]), got["two"]
    latest = teacher.get(f"/api/classes/{number}/exercises/average/attempts/{ann.username}").json()
    assert latest["id"] == attempt["id"] and latest["outcome"] == "checked"
    assert "nul \\0 and half \\ud800 here" in texts(latest["checks"])


# Both kinds: the checker's exit reaches the grader as each kind reports a sandbox's end.
@pytest.mark.parametrize("room", ["local", "docker"], indirect=True)
def test_a_press_that_could_not_be_checked_is_kept_with_why_and_does_not_count(room):
    server, number, teacher, (_, ben, _) = room
    # The teacher's tests end the checker as it reads them: nothing can be checked.
    r = teacher.request("PUT", f"/api/classes/{number}/exercises/average",
                        json=exercise(tests=TESTS_PY + "\nimport os\nos._exit(3)\n"))
    assert r.status_code == 200, r.text
    etag = submit(ben, number, RIGHT)

    async def press_twice():
        """Check, and Check again while the first is on its way: (the second's answer, the first's)."""
        async with RunClient(server.url, ben.http.cookies.get_dict()) as rc:
            for _ in range(2):
                await rc.send(type="check", **{"class": number, "exercise": "average", "etag": etag})
            answers = []
            while len(answers) < 2:
                message = await rc.receive(TIMEOUT)
                if message["type"] == "error" or message.get("state") == "done":
                    answers.append(message)
            return answers
    again, done = asyncio.run(press_twice())
    assert again["error"] in ("check_waiting", "already_running") and again["re"] == "2", again
    assert done["re"] == "1", done  # the first press's answer, told apart by its id
    assert done["type"] == "error" and done["error"] == "checker_failed", done
    assert done["message"].startswith("Your program could not be checked, so this did not count as an attempt: ")
    attempt = done["attempt"]
    assert (attempt["outcome"], attempt["reason"], attempt["counted"]) == ("not_checked", "checker_failed", False)

    latest = teacher.get(f"/api/classes/{number}/exercises/average/attempts/{ben.username}").json()
    assert (latest["outcome"], latest["reason"], latest["counted"]) == ("not_checked", "checker_failed", False)
    assert latest["message"].startswith("The checks stopped before they had all run.")
    # One press, kept once: the second was the same press.
    assert [(p["id"], p["outcome"], p["reason"]) for p in latest["presses"]] == \
        [(attempt["id"], "not_checked", "checker_failed")]
    grid = teacher.get(f"/api/classes/{number}/grid").json()
    [row] = [s for s in grid["students"] if s["username"] == ben.username]
    cell = row["cells"]["average"]
    assert cell["attempts"] == 0 and cell["best"] is None and cell["not_gradable"]


HOSTILE = {
    # Prints what a checker's result looks like, on stdout and everywhere it can write.
    "fake result": RIGHT.replace("return total / len(numbers)",
                                 "import os, json\n    line = json.dumps({'type': 'result', 'id': 'test_two', "
                                 "'passed': True, 'message': 'passed'}) + '\\n'\n"
                                 "    for fd in range(0, 64):\n        try:\n            os.write(fd, line.encode())\n"
                                 "        except OSError:\n            pass\n    return -1"),
    # Ends its own process in the middle of a call.
    "exit mid-call": RIGHT.replace("return total / len(numbers)", "import os\n    os._exit(0)"),
    # Looks for the checks' folder and the tests file, and writes beside them.
    "reads the checks": RIGHT.replace(
        "return total / len(numbers)",
        "import os, glob\n    found = glob.glob('/**/tests.py', recursive=True) + glob.glob('/**/checks', recursive=True)\n"
        "    for path in found:\n        try:\n            open(path + '.x', 'w').write('x')\n        except OSError:\n"
        "            pass\n    if found:\n        return 5\n    return -1"),
    # Patches assert's machinery and builtins so that every comparison passes.
    "patches builtins": "import builtins\nbuiltins.AssertionError = type('Never', (Exception,), {})\n"
                        "builtins.isinstance = lambda *a: True\nclass Yes(float):\n    def __eq__(self, o): return True\n"
                        "def average(numbers):\n    return Yes(0)\n",
    # Never returns.
    "never returns": "def average(numbers):\n    while True:\n        pass\n",
    # Forks as much as it can, then answers wrongly.
    "fork bomb": "import os\ndef average(numbers):\n    for _ in range(200):\n        try:\n            os.fork()\n"
                 "        except OSError:\n            break\n    return -1\n",
}
# Exiting, killing at the time limit, the forks' process limit and what the
# sandbox's file system shows are each kind's own.
ON_EVERY_KIND = {"exit mid-call", "reads the checks", "never returns", "fork bomb"}


def hostile_cases():
    """Every case on local; on docker too the cases whose effect depends on the
    sandbox kind (the launcher's own defences are the same code in every kind)."""
    for name in HOSTILE:
        yield pytest.param("local", name, id=f"local-{name}")
        if name in ON_EVERY_KIND:
            yield pytest.param("docker", name, id=f"docker-{name}")


@pytest.mark.parametrize(("room", "name"), hostile_cases(), indirect=["room"])
def test_a_hostile_program_gets_nothing_for_it_and_the_next_check_is_unaffected(room, name):
    server, number, _, (mallory, honest, _) = room
    etag = submit(mallory, number, HOSTILE[name])
    done, _ = asyncio.run(check(server, mallory, number, etag))
    assert done["type"] == "check", done
    got = results_by_id(done["attempt"])
    assert not got["two"]["passed"], got["two"]
    assert not got["hidden-2"]["passed"]
    assert got["two"]["message"] and got["two"]["message"] != "Passed."

    etag = submit(honest, number, RIGHT)
    done, _ = asyncio.run(check(server, honest, number, etag))
    got = results_by_id(done["attempt"])
    assert got["two"]["passed"] and got["shown"]["passed"] and got["hidden-2"]["passed"], got


# Each imports statistics without its text naming it (the text rule passes), and
# is otherwise right: only the rule, watched while the program runs, can fail it.
IN_AVERAGE = "    total = 0\n"
RULE_BREAKERS = {
    "computed": "__import__('statis' + 'tics')\n" + RIGHT,
    "importlib": "import importlib\nimportlib.import_module('statis' + 'tics')\n" + RIGHT,
    "exec": "exec('import ' + 'statistics')\n" + RIGHT,
    "its source": "import sysconfig\nexec(open(sysconfig.get_paths()['stdlib'] + '/statis' + 'tics.py').read(), "
                  "{'__name__': 'mine'})\n" + RIGHT,
    "caught, in the function": RIGHT.replace(IN_AVERAGE, "    try:\n        __import__('statis' + 'tics')\n"
                                                         "    except BaseException:\n        pass\n" + IN_AVERAGE),
    "another interpreter": "import subprocess, sys\n" + RIGHT.replace(
        IN_AVERAGE, "    subprocess.run([sys.executable, '-c', 'import statistics'])\n" + IN_AVERAGE),
}


@pytest.mark.parametrize("name", list(RULE_BREAKERS))  # local: the launcher watches imports in every kind
def test_a_forbidden_import_fails_the_rule_however_it_is_spelled(room, name):
    server, number, teacher, (mallory, *_) = room
    etag = submit(mallory, number, RULE_BREAKERS[name])
    done, _ = asyncio.run(check(server, mallory, number, etag))
    assert done["type"] == "check", done
    got = results_by_id(done["attempt"])["no-stats"]
    assert not got["passed"] and got["earned"] == 0, got
    if name == "another interpreter":
        assert got["message"].startswith("Your program started another program"), got
        assert "whether it imported statistics" in got["message"]
    else:
        assert got["message"] == ("Your program imported statistics while it ran (itself, or through a module it "
                                  "imported), which this exercise does not allow.")


def test_a_program_importing_allowed_modules_keeps_the_rule(room):
    server, number, _, (_, honest, _) = room
    source = "import math, random, json\nimport importlib\nimportlib.import_module('fractions')\n" + RIGHT
    etag = submit(honest, number, source)
    done, _ = asyncio.run(check(server, honest, number, etag))
    got = results_by_id(done["attempt"])
    assert got["no-stats"]["passed"] and got["two"]["passed"] and got["shown"]["passed"], got
    assert got["hidden-2"]["passed"], got
