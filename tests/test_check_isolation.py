"""A check runs what the student pressed Check on, where nothing it does
can be kept: attacks by a student who has read grader.py, through the real
/ws/run and the real sandboxes.

- The student's program is given the hidden checks' inputs (their stdin,
  the arguments of their function calls). It tries to keep them: in its
  home (to read back through the files API), in /tmp, /dev/shm and in
  memory, to hand them back as the "actual" value of a visible check.
  None of it works: the home is byte-identical after the check, and no
  secret is in any answer, file or history version the student can read.
- A program that rewrites its own file during the check is graded on the
  snapshot taken when Check was pressed, which the teacher can open.
"""
import asyncio
import hashlib
import os

import pytest

from loadtest.run_client import RunClient
from tests.conftest import People
from tests.live_support import a_class
from tests.test_checks import TIMEOUT, results_by_id

if os.geteuid() != 0:
    pytest.skip("the local sandbox runs programs as students' uids: these tests need root", allow_module_level=True)

SECRET = "7319"  # digits in each hidden input: a number, so a program can pass it on as one
# What the keeper writes of the hidden inputs (its own text holds SECRET alone).
KEPT = (f"{SECRET} {SECRET}", f"{SECRET}1")

# The hidden checks come first, so that whatever a program keeps of them is
# there when the visible ones run.
TESTS_PY = f'''from average import average


def test_hidden():
    assert average([{SECRET}, {SECRET}]) == {SECRET}


def test_shown():
    assert average([4, 6]) == 5
'''

EXERCISE = {
    "title": "Average", "file": "average.py", "due": None, "instructions": "# Average\n", "tests": TESTS_PY,
    "starter": {"average.py": "def average(numbers):\n    return 0\n"},
    "checks": [
        {"id": "secret-output", "kind": "output", "input": f"{SECRET}\n{SECRET}\n\n", "expected": f"{SECRET}.0\n",
         "visibility": "hidden"},
        {"id": "secret-test", "kind": "function", "test": "test_hidden", "visibility": "hidden"},
        {"id": "late-output", "kind": "output", "input": f"{SECRET}1\n\n", "expected": f"{SECRET}1.0\n",
         "visibility": "after_due"},
        {"id": "shown-output", "kind": "output", "input": "4\n6\n\n", "expected": "5.0\n"},
        {"id": "shown-test", "kind": "function", "test": "test_shown"}],
}

# Keeps everything it is given everywhere it can write, and hands back the
# first hidden input it finds kept in place of its answer.
KEEPER = '''import glob, os, sys

PLACES = [os.path.expanduser("~/kept.txt"), "kept.txt", "/tmp/kept.txt", "/dev/shm/kept.txt",
          os.path.join(os.path.dirname(os.path.abspath(__file__)), "kept.txt")]
MEMORY = []


def keep(text):
    MEMORY.append(text)
    for place in PLACES:
        try:
            with open(place, "a") as f:
                f.write(text + "\\n")
        except OSError:
            pass


def kept():
    for place in PLACES + glob.glob("/tmp/*/kept.txt") + glob.glob(os.path.expanduser("~/**/kept.txt"), recursive=True):
        try:
            with open(place) as f:
                text = f.read().strip()
        except OSError:
            continue
        for word in text.split():
            if "%s" in word:
                return word
    return next((w for text in MEMORY for w in text.split() if "%s" in w), None)


def average(numbers):
    before = kept()
    keep(" ".join(str(n) for n in numbers))
    if before is not None:
        return before
    return sum(numbers) / len(numbers)


if __name__ == "__main__":
    lines = sys.stdin.read().split()
    before = kept()
    keep(" ".join(lines))
    print(before if before is not None else sum(map(float, lines)) / len(lines))
''' % (SECRET, SECRET)

RIGHT = '''def average(numbers):
    return sum(numbers) / len(numbers)


if __name__ == "__main__":
    import sys
    numbers = [float(n) for n in sys.stdin.read().split()]
    print(sum(numbers) / len(numbers))
'''

# Wrong, but as it runs (an output check) it puts a right version in its place.
SWAPPER = '''import os

def average(numbers):
    return -1


if __name__ == "__main__":
    import sys
    numbers = [float(n) for n in sys.stdin.read().split()]
    print(sum(numbers) / len(numbers))
    right = "def average(numbers):\\n    return sum(numbers) / len(numbers)\\n"
    for path in (os.path.abspath(__file__), os.path.expanduser("~/swap/average.py")):
        try:
            os.chmod(os.path.dirname(path), 0o755)
            os.chmod(path, 0o644)
        except OSError:
            pass
        try:
            with open(path, "w") as f:
                f.write(right)
        except OSError:
            pass
'''


@pytest.fixture(params=["local", "docker"])
def room(request, shared_servers):
    if request.param == "docker":
        request.getfixturevalue("docker_image")
    server = shared_servers.get(SANDBOX=request.param, CHECK_SECONDS="3")
    people = People(server)
    teacher = people.teacher("iso-t")
    student = people.student(f"iso-{request.param[:3]}-{os.urandom(3).hex()}")
    number = a_class(server, teacher, student)
    r = teacher.request("PUT", f"/api/classes/{number}/exercises/swap", json=EXERCISE)
    assert r.status_code == 200, r.text
    r = student.post(f"/api/exercises/{number}/swap/start")
    assert r.status_code == 200, r.text
    return server, number, teacher, student


def save(student, source):
    r = student.request("PUT", "/api/files/home/swap/average.py", data=source.encode(), headers={"If-Match": "*"})
    assert r.status_code == 200, r.text
    return r.json()["etag"]


def press_check(server, student, number, etag):
    """Press Check on the IDE's socket: the attempt, and every check message."""
    async def press():
        async with RunClient(server.url, student.http.cookies.get_dict()) as rc:
            rc.messages = []
            await rc.send(type="check", **{"class": number, "exercise": "swap", "etag": etag})
            while True:
                message = await rc.receive(TIMEOUT)
                if message["type"] == "error" or (message["type"] == "check" and message["state"] == "done"):
                    return message, rc.messages
    done, said = asyncio.run(press())
    assert done["type"] == "check", done
    return done["attempt"], said


def tree(folder):
    """{relative path: sha256} of everything under `folder` (links and all)."""
    found = {}
    for top, dirs, names in os.walk(folder):
        for name in dirs + names:
            path = os.path.join(top, name)
            rel = os.path.relpath(path, folder)
            if os.path.islink(path) or os.path.isdir(path):
                found[rel] = "link" if os.path.islink(path) else "folder"
            else:
                with open(path, "rb") as f:
                    found[rel] = hashlib.sha256(f.read()).hexdigest()
    return found


def secrets_under(folder):
    """Files under `folder` that hold what the keeper kept of a hidden input."""
    found = []
    for top, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(top, name)
            try:
                with open(path, "rb") as f:
                    data = f.read()
                if any(k.encode() in data for k in KEPT):
                    found.append(path)
            except OSError:
                pass
    return found


def storage_of(server):
    return os.path.join(server.env["DATA_DIR"], "storage")


def students_storage_secrets(server):
    """Files of the storage a student can reach (homes, their history and
    trash: not the teachers' checks area) that hold the secret."""
    storage = storage_of(server)
    return [path for path in secrets_under(storage)
            if not os.path.relpath(path, storage).replace(os.sep, "/").split("/").count("checks")]


def checked_leaving_the_home_as_it_was(server, number, student, source):
    """Save `source` and press Check: (its etag, the attempt, the check's
    messages), once the home is found byte for byte as it was before."""
    home = os.path.join(storage_of(server), "home", student.username)
    etag = save(student, source)
    before = tree(home)
    attempt, said = press_check(server, student, number, etag)
    assert tree(home) == before  # nothing a check's run wrote survives it
    return etag, attempt, said


def test_a_program_keeps_nothing_of_the_hidden_checks(room):
    server, number, _, student = room
    _, attempt, said = checked_leaving_the_home_as_it_was(server, number, student, KEEPER)
    assert students_storage_secrets(server) == []
    got = results_by_id(attempt)
    # The visible checks were answered by programs that never saw a hidden input: the keeper
    # found nothing kept, so it answered right, and showed no secret.
    assert got["shown-output"]["passed"] and got["shown-test"]["passed"], got
    assert SECRET not in str(attempt) and SECRET not in str(said)
    # Nor through the files API, its history or the trash.
    listing = student.get("/api/files/home/swap").json()
    assert [e["name"] for e in listing["entries"]] == ["average.py"], listing
    for answer in (student.get("/api/files/home/swap/average.py"),
                   student.get("/api/history/home/swap/average.py"), student.get("/api/trash/home")):
        assert answer.status_code == 200 and not any(k in answer.text for k in KEPT), answer.text


# Local only: which bytes every check runs is the grader's snapshot, the same in every kind.
@pytest.mark.parametrize("room", ["local"], indirect=True)
def test_every_check_of_an_attempt_runs_the_bytes_check_was_pressed_on(room):
    server, number, teacher, student = room
    etag, attempt, _ = checked_leaving_the_home_as_it_was(server, number, student, SWAPPER)
    got = results_by_id(attempt)
    # Its output checks ran the swapper (which prints right), and so did the function checks,
    # whatever the output checks' runs wrote meanwhile: average() of the snapshot returns -1.
    assert got["shown-output"]["passed"], got
    assert not got["shown-test"]["passed"] and "-1" in got["shown-test"]["shown"]["actual"], got
    # The teacher opens exactly what was graded.
    r = teacher.get(f"/api/classes/{number}/exercises/swap/attempts/{student.username}")
    assert r.status_code == 200, r.text
    graded = r.json()
    assert graded["version"] == etag and graded["file"] == "swap/average.py"
    assert graded["source"] == SWAPPER


def test_a_right_program_passes_in_its_throwaway_home(room):
    server, number, _, student = room
    etag = save(student, RIGHT)
    attempt, _ = press_check(server, student, number, etag)
    # The hidden ones expect a number no program here prints: all but those pass.
    got = results_by_id(attempt)
    assert got["shown-output"]["passed"] and got["shown-test"]["passed"], got
    assert attempt["score"] >= 2


def test_an_open_exercise_starts_one_checks_sandbox_ahead_which_goes_with_the_ide(room):
    """The IDE says an exercise is shown (prepare_check): the check's sandbox
    starts then, one however often it is said, and Check uses it; the next
    is started for the next press; all go when the IDE closes. Counted by
    the student's own launchers (the server's counters are shared with
    other tests' work)."""
    from tests.runs_support import launcher_pids, no_processes_of, sandbox_uid, wait_for
    server, number, _, student = room
    etag = save(student, RIGHT)
    uid = sandbox_uid(server, student.username)

    async def story():
        async with RunClient(server.url, student.http.cookies.get_dict()) as rc:
            assert wait_for(lambda: len(launcher_pids(uid)) == 1, TIMEOUT)  # the IDE's ready sandbox
            for _ in range(5):
                await rc.send(type="prepare_check")
            # And one check's sandbox: no more, however often it is said.
            assert wait_for(lambda: len(launcher_pids(uid)) == 2, TIMEOUT)
            prepared = set(launcher_pids(uid))
            await asyncio.sleep(1)
            assert set(launcher_pids(uid)) == prepared
            await rc.send(type="check", **{"class": number, "exercise": "swap", "etag": etag})
            done = await rc.until("check", TIMEOUT)
            while done.get("state") != "done":
                done = await rc.until("check", TIMEOUT)
            assert results_by_id(done["attempt"])["shown-test"]["passed"]
            # Used by the check, it went; one for the next press is there.
            assert wait_for(lambda: len(launcher_pids(uid)) == 2 and set(launcher_pids(uid)) != prepared, TIMEOUT)
    asyncio.run(story())
    assert no_processes_of(server, student.username)  # the IDE closed: its sandboxes went
