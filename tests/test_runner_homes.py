"""A runner's copy of a home (server/runner/homes.py), attacked in-process:
hostile paths from the wire, and what a program leaves in its copy
between runs (links, FIFOs, files where folders go, deep folders)."""
import os
import stat

import pytest
from hypothesis import given, settings, strategies as st

from server.errors import Refused
from server.files.history import etag_of
from server.runner.homes import HomeCopy

MB = 1 << 20


@pytest.fixture
def copy(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("untouched")
    folder = tmp_path / "home"
    folder.mkdir()
    return HomeCopy(str(folder), None)


def put(copy, path, data):
    copy.put(path, data, 0, etag_of(data))


def outside(copy):
    return os.path.join(os.path.dirname(copy.folder), "outside")


def test_files_put_come_back_only_once_changed_and_deletions_are_told(copy):
    put(copy, "a.txt", b"one")
    put(copy, "sub/b.txt", b"two")
    assert copy.changes(MB, MB).written == []  # as it was sent: nothing to take back
    with open(os.path.join(copy.folder, "a.txt"), "w") as f:
        f.write("changed by the program")
    os.remove(os.path.join(copy.folder, "sub", "b.txt"))
    with open(os.path.join(copy.folder, "new.txt"), "w") as f:
        f.write("new")
    changes = copy.changes(MB, MB)
    assert sorted(changes.written) == [("a.txt", etag_of(b"changed by the program")), ("new.txt", etag_of(b"new"))]
    assert changes.deleted == ["sub/b.txt"] and not changes.partial
    assert copy.read("a.txt", etag_of(b"changed by the program"), MB) == b"changed by the program"
    assert copy.read("a.txt", etag_of(b"something else"), MB) is None
    again = copy.changes(MB, MB)  # what was taken back is known now
    assert (again.written, again.deleted) == ([], [])


def test_a_file_rewritten_with_the_same_content_is_not_taken_back(copy):
    put(copy, "a.txt", b"same")
    path = os.path.join(copy.folder, "a.txt")
    os.remove(path)
    with open(path, "wb") as f:
        f.write(b"same")
    assert copy.changes(MB, MB).written == []


def test_a_new_sandbox_takes_a_kept_copy_less_what_changed_since_it_was_known(copy, tmp_path):
    """A copy kept from the sandbox before (runner/service.py, "keep") moves
    into the new sandbox's home; what its web tier would not know goes."""
    put(copy, "same.txt", b"as sent")
    put(copy, "sub/deep.txt", b"as sent too")
    put(copy, "touched.txt", b"rewritten the same")
    put(copy, "changed.txt", b"as sent")
    put(copy, "removed.txt", b"as sent")
    home = lambda *names: os.path.join(copy.folder, *names)  # noqa: E731
    with open(home("changed.txt"), "w") as f:  # (a run whose changes were never taken back)
        f.write("changed")
    os.utime(home("touched.txt"), ns=(1, 1))
    os.remove(home("removed.txt"))
    with open(home("stray.txt"), "w") as f:
        f.write("never sent")
    os.mkfifo(home("sub", "pipe"))
    new = tmp_path / "new"
    new.mkdir()
    (new / "same.txt").mkdir()  # whatever is in the way goes
    taker = HomeCopy(str(new), None)
    taker.take(copy)
    assert os.listdir(copy.folder) == []
    assert sorted(taker.known) == ["same.txt", "sub/deep.txt", "touched.txt"]
    assert taker.known["same.txt"][0] == etag_of(b"as sent")
    assert (new / "same.txt").read_bytes() == b"as sent" and (new / "sub" / "deep.txt").read_bytes() == b"as sent too"
    assert not (new / "changed.txt").exists() and not (new / "stray.txt").exists()
    changes = taker.changes(MB, MB)
    assert (changes.written, changes.deleted) == ([], [])  # it holds what it knows, and only that


def test_what_does_not_fit_is_skipped_with_why(copy):
    for name, size in (("big.bin", 3 * MB), ("a.txt", 600 << 10), ("b.txt", 600 << 10)):
        with open(os.path.join(copy.folder, name), "wb") as f:
            f.write(b"x" * size)
    changes = copy.changes(MB, 2 * MB)
    assert changes.written == [("a.txt", etag_of(b"x" * (600 << 10)))]
    assert sorted(changes.skipped) == [("b.txt", "no_room"), ("big.bin", "too_big")]


def test_only_regular_files_come_back(copy):
    os.mkfifo(os.path.join(copy.folder, "pipe"))
    os.symlink(os.path.join(outside(copy), "victim.txt"), os.path.join(copy.folder, "link.txt"))
    os.symlink("/", os.path.join(copy.folder, "root"))
    os.mknod(os.path.join(copy.folder, "sock"), stat.S_IFSOCK | 0o600)
    assert copy.changes(MB, MB).written == []


def test_a_put_replaces_what_a_program_left_in_its_way_and_never_writes_through_a_link(copy):
    victim = os.path.join(outside(copy), "victim.txt")
    os.symlink(victim, os.path.join(copy.folder, "a.txt"))
    os.symlink(outside(copy), os.path.join(copy.folder, "sub"))
    os.mkfifo(os.path.join(copy.folder, "pipe.txt"))
    with open(os.path.join(copy.folder, "folder"), "w") as f:
        f.write("a file where a folder goes")
    os.makedirs(os.path.join(copy.folder, "file.txt", "deep"))
    put(copy, "a.txt", b"one")
    put(copy, "sub/b.txt", b"two")
    put(copy, "pipe.txt", b"three")  # a FIFO with no reader: opened, it would hang the runner
    put(copy, "folder/c.txt", b"four")
    put(copy, "file.txt", b"five")
    for path, data in (("a.txt", b"one"), ("sub/b.txt", b"two"), ("pipe.txt", b"three"), ("folder/c.txt", b"four"),
                       ("file.txt", b"five")):
        full = os.path.join(copy.folder, path)
        assert not os.path.islink(full) and open(full, "rb").read() == data, path
    assert open(victim).read() == "untouched" and os.listdir(outside(copy)) == ["victim.txt"]


def test_a_piece_must_follow_the_one_before(copy):
    copy.put("a.txt", b"12345", 0, None)
    copy.put("a.txt", b"678", 5, etag_of(b"12345678"))
    assert open(os.path.join(copy.folder, "a.txt"), "rb").read() == b"12345678"
    with pytest.raises(Refused):
        copy.put("a.txt", b"9", 3, None)
    os.remove(os.path.join(copy.folder, "a.txt"))
    os.symlink(os.path.join(outside(copy), "victim.txt"), os.path.join(copy.folder, "a.txt"))
    with pytest.raises(Refused):
        copy.put("a.txt", b"9", 9, None)  # a later piece never follows a link either
    assert open(os.path.join(outside(copy), "victim.txt")).read() == "untouched"


def test_folders_too_deep_or_too_many_names_leave_the_changes_partial_and_nothing_deleted(copy):
    put(copy, "kept.txt", b"kept")
    os.remove(os.path.join(copy.folder, "kept.txt"))
    fd = os.open(copy.folder, os.O_RDONLY)
    try:
        for _ in range(200):  # deeper than any path the API takes
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    changes = copy.changes(MB, MB)
    assert changes.partial and changes.deleted == []  # it could not look everywhere: nothing counts as gone
    copy.clear()
    assert os.listdir(copy.folder) == []


PATHS = st.one_of(
    st.sampled_from(["..", "../x", "/etc/passwd", "a/../../x", "a//b", "./a", "a/./b", "", "/", "a/", "\x00",
                     "a\x00b", ".~pyc-history/x", "x" * 300, "/".join(["d"] * 40)]),
    st.text(alphabet=st.sampled_from(["a", ".", "/", "\\", "\x00", "~", " "]), max_size=12),
    st.integers(), st.none(), st.lists(st.text(max_size=3), max_size=2))


@given(path=PATHS)
@settings(max_examples=150, deadline=None)
def test_hostile_paths_are_refused_and_change_nothing_outside(tmp_path_factory, path):
    base = tmp_path_factory.mktemp("hostile")
    (base / "outside.txt").write_text("untouched")
    folder = base / "home"
    folder.mkdir()
    copy = HomeCopy(str(folder), None)
    try:
        copy.put(path, b"hostile", 0, etag_of(b"hostile"))
    except Refused:
        pass
    try:
        copy.delete(path)
    except Refused:
        pass
    assert sorted(os.listdir(base)) == ["home", "outside.txt"]
    assert (base / "outside.txt").read_text() == "untouched"
    for top, _, files in os.walk(folder):
        for name in files:
            full = os.path.realpath(os.path.join(top, name))
            assert full.startswith(str(folder) + os.sep), full
