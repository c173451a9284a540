"""A run's write budget (server/runs/disk_guard.py) against a scripted
count of writes: when the home is measured, when the run is let go on,
when it is reported over its quota, and that a sandbox is never left
frozen by mistake. The cgroup's own files are plain files here."""
import asyncio
import os

import pytest

from server.runs import disk_guard
from server.runs.disk_guard import DiskGuard, GroupWrites

MB = 1 << 20
TIMEOUT = 10  # only catches a hang


class Writes:
    """The kernel's count as a script: each read gives the next (written, writers)."""

    def __init__(self, readings):
        self.readings = list(readings)
        self.is_frozen = False
        self.froze = self.thawed = 0

    def pids(self):
        return [1, 2]

    def read(self, exclude=()):
        if len(self.readings) > 1:
            return self.readings.pop(0)
        return self.readings[0]

    def written(self):
        return self.readings[0][0]

    def freeze(self):
        self.is_frozen = True
        self.froze += 1

    def frozen(self):
        return self.is_frozen

    def thaw(self):
        self.is_frozen = False
        self.thawed += 1


@pytest.fixture(autouse=True)
def quick(monkeypatch):
    monkeypatch.setattr(disk_guard, "MAX_INTERVAL", 0.001)


def watch(guard):
    return asyncio.run(asyncio.wait_for(guard.over_quota(), TIMEOUT))


def measured(*rooms):
    left = list(rooms)
    calls = []

    async def measure():
        calls.append(1)
        return left.pop(0)
    return measure, calls


def test_a_run_past_its_budget_is_measured_and_reported_frozen_when_over_the_quota():
    writes = Writes([(0, 0), (5 * MB, 1), (40 * MB, 1)])
    measure, calls = measured(None)
    guard = DiskGuard(writes, measure, room=30 * MB, file_bytes=20 * MB)
    assert watch(guard) is True
    assert len(calls) == 1 and guard.walks == 1
    assert writes.is_frozen and writes.thawed == 0  # left frozen, to be killed


def test_a_run_that_rewrote_its_files_gets_a_new_budget_and_is_thawed():
    # 40 MB written, but over files it had: the walk finds 25 MB still left.
    writes = Writes([(0, 0), (40 * MB, 1), (40 * MB, 0), (60 * MB, 1), (70 * MB, 1)])
    measure, calls = measured(25 * MB, None)
    guard = DiskGuard(writes, measure, room=30 * MB, file_bytes=20 * MB)
    assert watch(guard) is True
    assert len(calls) == 2 and writes.froze == 2 and writes.thawed == 1


def test_several_heavy_writers_are_stopped_on_the_count_without_a_walk():
    writes = Writes([(0, 0), (31 * MB, 3)])
    measure, calls = measured()
    guard = DiskGuard(writes, measure, room=30 * MB, file_bytes=20 * MB)
    assert watch(guard) is True
    assert calls == [] and writes.is_frozen and writes.thawed == 0


def test_a_home_near_its_quota_still_gets_the_slack_before_a_walk():
    writes = Writes([(0, 0), (4 * MB, 1), (6 * MB, 1)])
    measure, calls = measured(None)
    guard = DiskGuard(writes, measure, room=0, file_bytes=20 * MB)  # slack: a quarter of RUN_FILE_MB
    assert guard.slack == 5 * MB
    assert watch(guard) is True and len(calls) == 1  # not at 4 MB: only past 5


def test_a_failed_measurement_thaws_the_run():
    writes = Writes([(0, 0), (40 * MB, 1)])

    async def broken():
        raise OSError("the file server did not answer")
    guard = DiskGuard(writes, broken, room=30 * MB, file_bytes=20 * MB)
    with pytest.raises(OSError):
        watch(guard)
    assert not writes.is_frozen and writes.thawed == 1


def test_what_a_run_wrote_counts_from_its_start():
    writes = Writes([(7 * MB, 0)])
    guard = DiskGuard(writes, measured()[0], room=100 * MB, file_bytes=20 * MB)
    assert guard.wrote() == 0

    async def start_then_look():
        task = asyncio.ensure_future(guard.over_quota())
        await asyncio.sleep(0.01)
        writes.readings = [(9 * MB, 0)]
        assert guard.wrote() == 2 * MB
        task.cancel()
    asyncio.run(start_then_look())


# -- a cgroup's files, as GroupWrites reads and writes them ---------------------------

def test_a_v2_group_is_frozen_and_thawed_through_its_files_and_counts_never_go_back(tmp_path):
    (tmp_path / "cgroup.procs").write_text(f"{os.getpid()}\n")
    (tmp_path / "cgroup.events").write_text("populated 1\nfrozen 0\n")
    group = GroupWrites(2, {"": str(tmp_path)})
    assert group.pids() == [os.getpid()]
    first = group.written()
    assert first >= 0
    group.freeze()
    assert (tmp_path / "cgroup.freeze").read_text() == "1" and not group.frozen()
    (tmp_path / "cgroup.events").write_text("populated 1\nfrozen 1\n")
    assert group.frozen()
    group.thaw()
    assert (tmp_path / "cgroup.freeze").read_text() == "0"
    (tmp_path / "cgroup.procs").write_text("")  # the group is gone: the last count stands
    assert group.read() == (first, 0)


def test_a_v1_group_without_a_freezer_cannot_be_guarded(tmp_path):
    class Group:
        version, dirs = 1, {"memory": str(tmp_path)}
    assert GroupWrites.of(Group()) is None and GroupWrites.of(None) is None
    Group.dirs = {"memory": str(tmp_path), "freezer": str(tmp_path)}
    group = GroupWrites.of(Group())
    (tmp_path / "freezer.state").write_text("THAWED\n")
    group.freeze()
    assert group.frozen()
    group.thaw()
    assert (tmp_path / "freezer.state").read_text() == "THAWED"


def test_processes_that_are_gone_count_nothing_and_heavy_writers_are_told_apart(monkeypatch):
    counts = {11: b"rchar: 5\nwrite_bytes: 3145728\ncancelled_write_bytes: 0\n",
              12: b"rchar: 5\nwrite_bytes: 100\ncancelled_write_bytes: 0\n",
              13: b"rchar: 5\nwrite_bytes: 2097152\ncancelled_write_bytes: 0\n"}
    opened = {}

    def fake_open(path, flags):
        pid = int(path.split("/")[2])
        if pid not in counts:
            raise FileNotFoundError(path)
        opened[1000 + pid] = counts[pid]
        return 1000 + pid
    monkeypatch.setattr(disk_guard.os, "open", fake_open)
    monkeypatch.setattr(disk_guard.os, "read", lambda fd, n: opened[fd])
    monkeypatch.setattr(disk_guard.os, "close", lambda fd: None)
    assert disk_guard.written_bytes([11, 12, 13, 99]) == (3145728 + 100 + 2097152, 2)
    assert disk_guard.written_bytes([11, 12, 13], exclude={11}) == (3145728 + 100 + 2097152, 1)
