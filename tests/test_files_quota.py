"""The quota as the run service and the IDE meet it: Store.usage and
Store.quota_problem (the API the run service calls before and after a
program runs), and the server's answers to a home over its quota. Usage
counts what programs wrote and the earlier versions kept."""
import os

import pytest

from server.errors import Refused
from server.files.store import Area, Limits, Store
from tests.helpers import create_user

KIB = 1 << 10


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "storage"), Limits(quota_bytes=100 * KIB, quota_files=20,
                                                 max_file_bytes=64 * KIB, history_versions=5))
    s.ensure_home("ada", welcome=False)
    yield s
    s.close()


ADA = Area.home("ada")


def write_as_a_program(home, name, size):
    with open(os.path.join(home, name), "wb") as f:
        f.write(b"#" * size)


def test_usage_counts_what_programs_wrote_and_earlier_versions(store):
    assert store.usage(ADA) == (0, 0)
    etag = store.save(ADA, ("a.py",), b"1" * 1000, None)["etag"]
    store.save(ADA, ("a.py",), b"2" * 3000, etag)
    assert store.usage(ADA, fresh=True) == (4000, 2)  # the file and its earlier version
    write_as_a_program(store.home_path("ada"), "out.bin", 5000)
    os.mkfifo(os.path.join(store.home_path("ada"), "pipe"))
    assert store.usage(ADA) == (4000, 2)  # the record, until it is measured again
    assert store.usage(ADA, fresh=True) == (9000, 4)
    assert store.usage(ADA) == (9000, 4)  # the measurement rewrote the record


def test_quota_problem_says_how_much_is_used_of_what_and_what_to_delete(store):
    assert store.quota_problem(ADA) is None
    write_as_a_program(store.home_path("ada"), "huge.bin", 150 * KIB)
    problem = store.quota_problem(ADA, fresh=True)
    assert problem == ("Your folder is over its quota: 150 KiB used of 100 KiB (earlier versions included). "
                       "Delete at least 50 KiB to save or run again."), problem
    for i in range(25):
        write_as_a_program(store.home_path("ada"), f"f{i}", 1)
    os.unlink(os.path.join(store.home_path("ada"), "huge.bin"))
    assert "25 files and folders of the 20 allowed" in store.quota_problem(ADA, fresh=True)


def test_over_quota_only_saves_that_shrink_pass_and_old_versions_make_room(store):
    etag = store.save(ADA, ("work.py",), b"w" * 40 * KIB, None)["etag"]
    etag = store.save(ADA, ("work.py",), b"v" * 40 * KIB, etag)["etag"]  # 40 KiB more kept as a version
    # The next save needs room: the oldest version goes, the save passes.
    etag = store.save(ADA, ("work.py",), b"u" * 40 * KIB, etag)["etag"]
    assert [v["size"] for v in store.history(ADA, ("work.py",))] == [40 * KIB]
    write_as_a_program(store.home_path("ada"), "dump.bin", 90 * KIB)  # a program fills the home
    problem = store.quota_problem(ADA, fresh=True)
    assert problem and "Delete at least" in problem
    with pytest.raises(Refused) as refused:
        store.save(ADA, ("new.py",), b"x", None)
    assert refused.value.status == 507 and refused.value.code == "quota_exceeded"
    assert refused.value.message.startswith("Your folder is over its quota")
    # Cutting a file down is still allowed, so the student is never stuck.
    store.save(ADA, ("work.py",), b"short\n", etag)
    os.unlink(os.path.join(store.home_path("ada"), "dump.bin"))
    assert store.quota_problem(ADA, fresh=True) is None
    store.save(ADA, ("new.py",), b"x", None)


def test_a_home_over_quota_refuses_saves_with_the_sentence_over_http(start_server, fresh_db, data_dir):
    server = start_server(QUOTA_BYTES=64 * KIB)
    create_user(fresh_db, "ada", "ada-password")
    ada = server.client()
    ada.login_ok("ada", "ada-password")
    write_as_a_program(os.path.join(data_dir, "storage", "home", "ada"), "dump.bin", 100 * KIB)
    # After a run, the run service measures the home (as this Store does).
    measuring = Store(os.path.join(data_dir, "storage"), Limits(64 * KIB, 5000, 10 << 20, 20))
    assert "over its quota" in measuring.quota_problem(ADA, fresh=True)
    measuring.close()
    r = ada.request("PUT", "/api/files/home/x.py", data=b"x = 1\n", headers={"If-Match": "*"})
    assert r.status_code == 507, r.text
    assert r.json()["error"] == "quota_exceeded"
    assert "Your folder is over its quota" in r.json()["message"] and "Delete at least" in r.json()["message"]
    assert not os.path.exists(os.path.join(data_dir, "storage", "home", "ada", "x.py"))
    assert ada.request("DELETE", "/api/files/home/dump.bin").status_code == 200
    r = ada.request("PUT", "/api/files/home/x.py", data=b"x = 1\n", headers={"If-Match": "*"})
    assert r.status_code == 200, r.text  # the deleted file's version made room


def test_an_edit_in_a_home_at_its_files_quota_is_saved_over_http(start_server, fresh_db):
    """The version an edit keeps is the server's own: at QUOTA_FILES a new
    file is refused, an edit of an existing one is saved (without it)."""
    server = start_server(QUOTA_FILES=6)
    create_user(fresh_db, "ada", "ada-password")
    ada = server.client()
    ada.login_ok("ada", "ada-password")
    n = 0
    while True:  # new files until the home is full (the welcome file counts too)
        r = ada.request("PUT", f"/api/files/home/f{n}.py", data=b"x = 1\n", headers={"If-Match": "*"})
        if r.status_code == 507:
            assert r.json()["error"] == "quota_exceeded", r.text
            break
        assert r.status_code == 200, r.text
        n += 1
        assert n < 10, "the files quota never refused a new file"
    for text in (b"x = 2\n", b"x = 3  # and a longer line\n"):
        r = ada.request("PUT", "/api/files/home/f0.py", data=text, headers={"If-Match": "*"})
        assert r.status_code == 200, r.text
        assert ada.get("/api/files/home/f0.py").json()["content"] == text.decode()
    r = ada.request("PUT", f"/api/files/home/f{n}.py", data=b"x = 1\n", headers={"If-Match": "*"})
    assert r.status_code == 507 and r.json()["error"] == "quota_exceeded"
    # A refusal the student acts on is not a server error in the log.
    assert not [line for line in server.lines if " ERROR " in line and " 507 " in line]


@pytest.fixture
def small_disk(tmp_path):
    """A file system of 256 KiB (tmpfs), so that it can be filled."""
    import subprocess
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    where = tmp_path / "disk"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)], check=True)
    yield where
    subprocess.run(["umount", "-l", str(where)], check=True)


def test_a_full_disk_leaves_no_temporary_files_behind(small_disk):
    import errno
    store = Store(str(small_disk / "storage"), Limits(quota_bytes=100 * KIB, quota_files=20,
                                                      max_file_bytes=64 * KIB, history_versions=5))
    try:
        store.ensure_home("ada", welcome=False)
        store.save(ADA, ("a.py",), b"a = 1\n", None)
        fd = os.open(os.path.join(store.home_path("ada"), "fill.bin"), os.O_WRONLY | os.O_CREAT)
        try:  # a program fills the disk
            while True:
                os.write(fd, b"#" * 4096)
        except OSError as e:
            assert e.errno == errno.ENOSPC
        finally:
            os.close(fd)
        with pytest.raises(OSError) as full:
            store.usage(ADA, fresh=True)  # the measurement cannot write its record
        assert full.value.errno == errno.ENOSPC
        for call in (lambda: store.save(ADA, ("b.py",), b"b = 1\n", None),
                     lambda: store.save(ADA, ("a.py",), b"a = 2\n", "*")):
            with pytest.raises((OSError, Refused)):
                call()
        left = [os.path.join(folder, name) for folder, _, names in os.walk(small_disk)
                for name in names if name.startswith(".~pyc")]
        assert left == []
    finally:
        store.close()


def _bytes_read():
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def test_deleting_a_huge_sparse_file_reads_none_of_it(store):
    """A program's sparse file of 64 GiB (larger than any save may be, so
    never restorable) is deleted without reading it to name a version."""
    home = store.home_path("ada")
    store.save(ADA, ("kept.py",), b"k = 1\n", None)
    with open(os.path.join(home, "sparse.bin"), "wb") as f:
        f.truncate(64 << 30)
    before = _bytes_read()
    answer = store.delete(ADA, ("sparse.bin",))
    assert _bytes_read() - before < 1 << 20
    assert answer == {"deleted": "sparse.bin", "kept": 0, "not_kept": 1}
    assert not os.path.exists(os.path.join(home, "sparse.bin"))
    assert store.usage(ADA, fresh=True)[0] == len(b"k = 1\n")
    # The same inside a folder; a small file there is still kept for the trash.
    os.mkdir(os.path.join(home, "out"))
    with open(os.path.join(home, "out", "sparse.bin"), "wb") as f:
        f.truncate(64 << 30)
    with open(os.path.join(home, "out", "small.txt"), "wb") as f:
        f.write(b"small")
    before = _bytes_read()
    answer = store.delete(ADA, ("out",))
    assert _bytes_read() - before < 1 << 20
    assert answer == {"deleted": "out", "kept": 1, "not_kept": 1}
    assert [e["path"] for e in store.trash_list(ADA)[0]["files"]] == ["out/small.txt"]
