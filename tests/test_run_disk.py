"""A program that fills the disk, in every sandbox kind that promises
isolation: what one run writes past its home's quota is bounded (about one
RUN_FILE_MB, disk_guard.py), the student is told in plain words, and the
log says it once.

The tests share a server per kind with a small quota, so the writer is
quick (each test's students are its own, each with its own quota); the
overshoot of each run is printed (`pytest -s`) for the release notes.
"""
import os
import re

import pytest

from tests.conftest import _shared
from tests.runs_support import LIMITS, assert_all_released, run, student

QUOTA_MB = 32
FILE_MB = 8
SLACK_MB = 24  # what the server writes on while it is late to look, on a busy machine (disk_guard.py): 16 writers
# went 16 MB and 551 bytes past one file once, in a clean-clone run of the whole suite on 2 cores
SETTINGS = dict(LIMITS, QUOTA_BYTES=QUOTA_MB << 20, RUN_FILE_MB=FILE_MB, RUN_CPU_SECONDS=60)

# The attack: 100 files of the largest size a run may write, as fast as it can.
MANY_FILES = '''
import sys
block = b"x" * (int(sys.argv[1]) << 20)
for n in range(100):
    with open(f"fill{n}.bin", "wb") as f:
        f.write(block)
print("wrote all 100", flush=True)
'''

# The same from several processes at once, each with a write in flight.
WRITERS = '''
import os, sys
block = b"x" * (int(sys.argv[1]) << 20)
children = []
for w in range(int(sys.argv[2])):
    pid = os.fork()
    if pid == 0:
        for n in range(100):
            with open(f"fill{w}-{n}.bin", "wb") as f:
                f.write(block)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
print("wrote them all", flush=True)
'''

# Legitimate: the same file rewritten again and again, ten times the quota in all.
REWRITE = '''
import sys
block = b"y" * (int(sys.argv[1]) << 20)
for n in range(int(sys.argv[2])):
    with open("again.bin", "wb") as f:
        f.write(block)
print("rewrote it", n + 1, "times", flush=True)
'''


@pytest.fixture(params=["local", "docker", "remote"])
def disk_server(request, shared_servers):
    """A shared server with a small quota, per sandbox kind (remote: on a
    child runner, which guards its copy of the home; what the run wrote
    there is then kept in the home within its quota)."""
    if request.param == "docker":
        request.getfixturevalue("docker_image")
    yield from _shared(shared_servers, SANDBOX=request.param, **SETTINGS)


def used_bytes(server, username):
    """What the quota counts: the home and the versions kept of its files
    (the server may still be dropping old versions after the run: one gone
    between the listing and its size counts no more)."""
    storage = os.path.join(server.env["DATA_DIR"], "storage")
    total = 0
    for top in (os.path.join(storage, "home", username),
                os.path.join(storage, ".system", "history", "home--" + username)):
        for folder, _, names in os.walk(top):
            for name in names:
                try:
                    total += os.lstat(os.path.join(folder, name)).st_size
                except FileNotFoundError:
                    continue
    return total


def test_a_program_writing_many_files_stops_about_one_file_past_the_quota(disk_server):
    server = disk_server
    ada = student(server, "ada")
    logged = len(server.lines)  # the server is shared: what it logs from here on
    overshoots = []
    for _ in range(3):
        exit_, rc = run(server, ada, MANY_FILES, path="fill.py", args=[str(FILE_MB)], timeout=120)
        assert exit_["reason"] == "disk_limit", rc.messages
        assert "wrote all 100" not in rc.output()
        assert exit_["message"] == (f"your program wrote more than your folder can hold ({QUOTA_MB} MB), "
                                    "so it was stopped. Delete files you do not need, then run it again")
        used = used_bytes(server, ada.username)
        overshoots.append(used - (QUOTA_MB << 20))
        # One write in flight may be a whole file's worth (the freezer stops
        # a process between system calls), and more gets through while the
        # server is late to look.
        assert used <= (QUOTA_MB + FILE_MB + SLACK_MB) << 20, f"{used} bytes in a home of {QUOTA_MB} MB"
        # The student deletes what the program wrote, and runs again (the
        # versions the deletes kept make room for it).
        delete_what_it_wrote(ada)
    print(f"{server.env['SANDBOX']}: bytes past the {QUOTA_MB} MB quota after each run: {overshoots}")
    # One line in the log per run stopped, at INFO; no error.
    stopped = [line for line in server.lines[logged:] if re.search(r"run \w+ stopped: (it wrote|its home went over)", line)]
    assert len(stopped) == 3, stopped
    assert not [line for line in server.lines[logged:] if " ERROR " in line and ("507" in line or "quota" in line)]
    assert_all_released(server, ada)


def delete_what_it_wrote(student):
    """What a student does next: delete the program's files (the versions the deletes keep make room)."""
    for entry in student.get("/api/files/home/").json()["entries"]:
        if entry["name"].startswith("fill") and entry["name"].endswith(".bin"):
            assert student.request("DELETE", "/api/files/home/" + entry["name"]).status_code == 200


def test_rewriting_one_file_many_times_is_not_stopped(disk_server):
    """The budget counts bytes written, and the home is measured before a
    run is stopped: rewriting a file ten times the quota over is fine."""
    server = disk_server
    ada = student(server, "ada")
    times = 10 * QUOTA_MB // FILE_MB
    exit_, rc = run(server, ada, REWRITE, path="again.py", args=[str(FILE_MB), str(times)], timeout=120)
    assert exit_["reason"] == "ok", rc.messages
    assert f"rewrote it {times} times" in rc.output()


def test_several_processes_writing_at_once_stop_about_one_file_past_the_quota(disk_server):
    """Each process could be in the middle of a write as the run is frozen:
    several writers are killed on the kernel's count instead, mid-write."""
    server = disk_server
    ada = student(server, "ada")
    overshoots = []
    for writers in (4, 16):
        exit_, rc = run(server, ada, WRITERS, path="fill.py", args=[str(FILE_MB), str(writers)], timeout=120)
        assert exit_["reason"] == "disk_limit", rc.messages
        used = used_bytes(server, ada.username)
        overshoots.append(used - (QUOTA_MB << 20))
        assert used <= (QUOTA_MB + FILE_MB + SLACK_MB) << 20, f"{used} bytes in a home of {QUOTA_MB} MB"
        delete_what_it_wrote(ada)
    print(f"{server.env['SANDBOX']}: bytes past the {QUOTA_MB} MB quota, 4 and 16 writers: {overshoots}")
    assert_all_released(server, ada)
