"""Editing help in a jail (issue 20): a student who has read our source
types completion requests at other students' code, homes, course folders
and DATA_DIR, and finds nothing; the helpers never run as root; one
student's pathological text does not switch editing help off for the
class; and where no walls can be built, editing help is off and says so
rather than run without them.

The server's DATA_DIR (and so the storage) is a path of valid Python names
here, as /srv/storage or /mnt/efs are in production, so that a dotted
import could name it."""
import os
import shutil
import tempfile
import threading
import uuid

import psutil
import pytest

from tests.conftest import People
from tests.helpers import wait_for_editing_help
from tests.test_assist import TIMEOUT, ask, names, save

EDITING_HELP = {"ASSIST_PROCESSES": "2"}
BOB_MODULE = '''"""Bob's helpers: xyzzy_module_doc."""
ANSWER_KEY = {"xyzzy_question_one": 42, "xyzzy_question_two": "secret"}


def xyzzy_solve(answer="xyzzy_default_value"):
    """xyzzy_function_doc"""
    return answer
'''
JAIL_ROOT = {"usr", "bin", "lib", "lib64", "sbin", "etc", "dev", "tmp", "opt"}
# Everything of Bob's has "xyzzy" in its name, and nothing of Python's does.
SECRETS = ("xyzzy", "ANSWER_KEY", "helper_bob")


@pytest.fixture(autouse=True)
def _editing_help_warm(request):
    """The shared `server`'s editing help has warmed up before a test asks it."""
    if "server" in request.fixturenames:
        request.getfixturevalue("warm_server")


@pytest.fixture
def dotted_server(start_server):
    data = os.path.join(tempfile.gettempdir(), "pyclassroom_jail_" + uuid.uuid4().hex[:8])
    os.mkdir(data, 0o755)
    try:
        yield wait_for_editing_help(start_server(data_dir=data, **EDITING_HELP))
    finally:
        shutil.rmtree(data, ignore_errors=True)


def everything_said(client, op, source, **kw):
    r = ask(client, op, source, **kw)
    assert r.status_code in (200, 503), r.text  # 503: busy, never a way around the walls
    return r.text


def test_relative_imports_find_no_other_student_home_or_data_dir(dotted_server):
    server = dotted_server
    people = People(server)
    bob, ada = people.student("bob"), people.student("ada")
    save(bob, "helper_bob.py", BOB_MODULE)
    save(ada, "mine.py", "def my_own():\n    return 1\n")
    # Bob uses editing help on his module: his copy is in a helper's folder now.
    assert "xyzzy_solve" in names(bob, "import helper_bob\nhelper_bob.xy")
    data = server.env["DATA_DIR"]
    dotted_home = ".".join([*data.strip("/").split("/"), "storage", "home", bob.username])
    dotted_data = ".".join(data.strip("/").split("/"))
    found, roots = [], set()
    for _ in range(3):  # two helper processes: each is asked more than once
        for dots in range(1, 9):  # up to / and past it
            lead = "." * dots
            listed = names(ada, f"from {lead} import ")
            found += listed
            if "usr" in listed:
                roots.add(frozenset(listed))
            for folder in listed:
                found.append(everything_said(ada, "complete", f"from {lead}{folder}.helper_bob import "))
                found.append(everything_said(ada, "complete", f"from {lead}{folder} import "))
            found.append(everything_said(ada, "complete", f"from {lead}{dotted_home}.helper_bob import "))
            found.append(everything_said(ada, "complete", f"from {lead}{dotted_home} import "))
            found.append(everything_said(ada, "complete", f"from {lead}{dotted_data} import "))
            found.append(everything_said(ada, "complete", f"from {lead}{dotted_data}.secrets import "))
            source = f"from {lead}{dotted_home}.helper_bob import ANSWER_KEY, xyzzy_solve\nANSWER_KEY[\""
            found.append(everything_said(ada, "complete", source))
            found.append(everything_said(ada, "signatures", source.replace('ANSWER_KEY["', "xyzzy_solve(")))
            described = ask(ada, "describe", f"from {lead}{dotted_home}.helper_bob import xy", name="xyzzy_solve")
            if described.status_code == 200:  # the name asked about comes back; nothing more may
                found += [described.json()["signature"], described.json()["doc"]]
    said = "\n".join(found)
    for secret in SECRETS + (bob.username, os.path.basename(data), "cookie_secret"):
        assert secret not in said, f"{secret!r} reached another student"
    # What the helper lists above the student's own folder is the jail's system folders.
    assert "mine" in names(ada, "from . import ")
    assert roots and all(root <= JAIL_ROOT for root in roots), roots


def test_helpers_never_run_as_root_and_status_says_how_they_are_walled(dotted_server):
    server = dotted_server
    admin = People(server).admin("root_admin")
    r = admin.get("/api/status", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    helping = r.json()["editing_help"]
    assert helping["on"] is True and "bubblewrap" in helping["walls"]
    workers = [p for p in psutil.process_iter(["cmdline", "uids"])
               if "server.assist.child" in " ".join(p.info["cmdline"] or ())
               and "--folder" in (p.info["cmdline"] or ())]
    mine = [p for p in workers if _descends_from(p, server.proc.pid)]
    assert len(mine) >= 2
    for p in mine:
        assert 0 not in p.uids(), f"an assist process runs as root: {p.info['cmdline']}"


def _descends_from(proc, pid):
    try:
        return any(parent.pid == pid for parent in proc.parents())
    except psutil.Error:
        return False


def test_a_pathological_text_does_not_switch_help_off_for_the_class(server, people):
    # `server` is the suite's shared server with editing help (conftest).
    mallory, students = people.student("mallory"), [people.student("s") for _ in range(4)]
    doubling = 's = "abcdefgh"\n' + "s = s + s\n" * 40 + "s."
    stop = threading.Event()
    attacks = []

    def attack():
        while not stop.is_set() and len(attacks) < 200:
            for op in ("complete", "signatures", "describe"):
                extra = {"name": "upper"} if op == "describe" else {}
                attacks.append(ask(mallory, op, doubling, **extra).status_code)

    threads = [threading.Thread(target=attack) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        answered = []
        for _ in range(5):
            for student in students:
                answered.append("randint" in names(student, "import random\nrandom.ra"))
    finally:
        stop.set()
        for t in threads:
            t.join(TIMEOUT)
    assert all(answered), f"{answered.count(False)} of {len(answered)} completions were not answered"
    assert attacks and set(attacks) <= {200, 409, 503}
    # The text itself is answered as a str, quickly enough not to be cut off.
    assert "upper" in names(mallory, doubling)


def test_no_walls_no_editing_help(start_server, tmp_path):
    # A PATH without bubblewrap: the server runs (SANDBOX=process), editing help is off and says why.
    bare = tmp_path / "bin"
    bare.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        for name in os.listdir(folder):
            if name != "bwrap" and not (bare / name).exists():
                (bare / name).symlink_to(os.path.join(folder, name))
    server = start_server(SANDBOX="process", PATH=str(bare), **EDITING_HELP)
    people = People(server)
    r = ask(people.student("ada"), "complete", "import random\nrandom.ra")
    assert r.status_code == 503 and r.json()["error"] == "assist_off"
    assert "walled in" in r.json()["message"]
    status = people.admin("an_admin").get("/api/status", timeout=TIMEOUT).json()["editing_help"]
    assert status["on"] is False and "bubblewrap" in status["why"]
