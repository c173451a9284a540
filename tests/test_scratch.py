"""The checks' scratch folders (server/runs/scratch.py) go whatever a
program made of them, and a crashed worker's go at the next start."""
import os

from server import config
from server.files.walk import remove_tree
from server.runs.cgroups import worker_tag
from server.runs.scratch import remove_leftovers, scratch_folder


def hostile_tree(top):
    """Folders 2,000 deep, a FIFO, a link out, a read-only folder (as root)."""
    os.makedirs(top)
    path = top
    for _ in range(2000):
        path = os.path.join(path, "d")
        os.mkdir(path)  # one level at a time: a path this long is over PATH_MAX for makedirs
        os.chdir(path)
        path = "."
    os.mkfifo(os.path.join(top, "fifo"))
    os.symlink("/etc", os.path.join(top, "out"))
    if os.geteuid() == 0:  # the server that runs sandboxes as students' uids: root
        os.mkdir(os.path.join(top, "locked"))
        open(os.path.join(top, "locked", "f"), "w").close()
        os.chmod(os.path.join(top, "locked"), 0o500)


def test_a_dead_workers_folders_go_and_a_live_ones_stay(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = config.load({"DATA_DIR": str(tmp_path)})
    root = scratch_folder(cfg)
    dead = os.path.join(root, "w999999999-1.abc")
    mine = os.path.join(root, worker_tag() + ".def")
    hostile_tree(dead)
    os.makedirs(mine)
    os.chdir(tmp_path)

    assert remove_leftovers(cfg) == 1
    assert os.listdir(root) == [os.path.basename(mine)]
    assert os.path.isdir("/etc")  # the link was removed, not followed


def test_remove_tree_never_follows_a_link(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    top = tmp_path / "scratch"
    top.mkdir()
    os.symlink(outside, top / "link")
    remove_tree(str(top))
    assert not top.exists() and (outside / "keep").read_text() == "x"
