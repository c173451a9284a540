"""Starting sandboxes (server/runs/starts.py) with a scripted sandbox kind:
what counts as ready, a failed start tried once more and only then
reported, the sandboxes of failed starts killed and released, the line of
starts and its estimates. tests/test_starts.py starts real launchers."""
import asyncio
import logging

import pytest

from server import config
from server.runs import starts
from server.runs.protocol import frame
from server.runs.starts import Starts

TIMEOUT = 10  # only catches a hang


class Sandbox:
    """A started sandbox whose launcher writes `written` and then ends."""

    def __init__(self, written):
        self.stdout = asyncio.StreamReader()
        if written is not None:
            self.stdout.feed_data(written)
            self.stdout.feed_eof()
        self.readied = self.killed = self.released = False

    async def on_ready(self):
        self.readied = True

    async def kill(self):
        self.killed = True

    async def release(self):
        self.released = True

    def diagnostics(self):
        return "bwrap: setting up uid map: Permission denied"


class Kind:
    """Each start takes the next of `script`: bytes its launcher writes, an
    exception prepare raises, or None (it never says anything)."""
    name, reusable, copies_home = "scripted", True, False

    def __init__(self, *script):
        self.script = list(script)
        self.made = []
        self.settings = []

    async def prepare(self, home, uid, settings):
        self.settings.append(settings)
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        sandbox = Sandbox(step)
        self.made.append(sandbox)
        return sandbox


READY = frame(b"R")


def starts_of(kind, **settings):
    return Starts(kind, config.load({k: str(v) for k, v in settings.items()}))


def start(line, **kw):
    return asyncio.run(asyncio.wait_for(line.start("/home/ada", 1001, **kw), TIMEOUT))


def test_a_launcher_that_says_ready_gives_a_sandbox_with_its_runs():
    kind = Kind(READY)
    sandboxed = start(starts_of(kind, RUN_SANDBOX_RUNS=100))
    assert sandboxed.sandbox is kind.made[0] and kind.made[0].readied
    assert 80 <= sandboxed.runs_left <= 100 and kind.settings[0]["runs"] == sandboxed.runs_left
    assert kind.settings[0]["nice"] == 10 and kind.settings[0]["limits"]


@pytest.mark.parametrize("written, why", [
    (b"", "ended"),
    (frame(b"o", b"hello"), "broken"),  # output before ready: not the launcher's first word
    (b"Z\x00\x00\x00\x00", "broken"),  # not a kind of frame
    (b"R\x00\x00", "broken"),  # ended inside a frame
])
def test_what_is_not_a_ready_frame_is_why_a_start_failed(written, why):
    async def go():
        return await starts.not_ready(Sandbox(written), timeout=5)
    assert asyncio.run(go()) == why


def test_a_launcher_that_never_speaks_is_too_slow():
    async def go():
        return await starts.not_ready(Sandbox(None), timeout=0.01)
    assert asyncio.run(go()) == "too_slow"


def test_a_start_that_fails_once_is_tried_again_without_a_word_and_the_failed_one_discarded(caplog):
    kind = Kind(b"", READY)
    with caplog.at_level(logging.WARNING):
        sandboxed = start(starts_of(kind))
    assert sandboxed.sandbox is kind.made[1]
    assert kind.made[0].killed and kind.made[0].released and not kind.made[1].killed
    assert [r.levelname for r in caplog.records] == ["WARNING"] and "trying once more" in caplog.records[0].getMessage()


def test_a_start_that_fails_twice_is_logged_with_what_the_sandbox_said(caplog):
    kind = Kind(OSError("no bubblewrap"), b"")
    line = starts_of(kind)
    with caplog.at_level(logging.WARNING):
        assert start(line, what="check ") is None
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == ["a scripted check sandbox could not start (ended): bwrap: setting up uid map: Permission denied"]
    assert "OSError: no bubblewrap" in caplog.records[0].getMessage()
    assert line.line.running == 0 and kind.made[0].released


def test_a_kind_that_cannot_serve_again_starts_sandboxes_of_one_run():
    kind = Kind(READY)
    kind.reusable = False
    assert start(starts_of(kind, RUN_SANDBOX_RUNS=100)).runs_left == 1


def test_starts_beyond_the_slots_wait_in_line_and_each_leaves_its_place():
    async def go():
        kind = Kind(None, READY)
        line = starts_of(kind, SANDBOX_STARTS_AT_ONCE=1)
        first = asyncio.ensure_future(line.start("/home/a", 1))
        await asyncio.sleep(0.01)
        second = asyncio.ensure_future(line.start("/home/b", 2))
        await asyncio.sleep(0.01)
        assert len(kind.made) == 1 and len(line.line.waiting) == 1  # the second waits its turn
        kind.made[0].stdout.feed_data(READY)
        assert (await asyncio.wait_for(first, TIMEOUT)).sandbox is kind.made[0]
        assert (await asyncio.wait_for(second, TIMEOUT)).sandbox is kind.made[1]
        assert line.line.running == 0
    asyncio.run(go())


@pytest.mark.parametrize("setting, processes, cpus, expected", [
    (0, 1, 8, 8), (0, 3, 8, 2), (0, 16, 8, 1), (4, 1, 8, 4), (4, 3, 8, 1), (0, 1, None, 1),
])
def test_starts_at_once_are_the_setting_or_a_share_of_the_cpus(monkeypatch, setting, processes, cpus, expected):
    monkeypatch.setattr(starts.os, "cpu_count", lambda: cpus)
    assert starts.at_once(config.load({"SANDBOX_STARTS_AT_ONCE": str(setting)}), processes) == expected


def test_a_sandbox_serves_its_runs_less_up_to_a_fifth_and_never_none():
    seen = {starts.runs_per_sandbox(100) for _ in range(500)}
    assert min(seen) >= 80 and max(seen) == 100 and len(seen) > 5
    assert {starts.runs_per_sandbox(1) for _ in range(20)} == {1}


def test_the_estimate_of_a_start_follows_the_latest_starts():
    line = starts_of(Kind(), SANDBOX_STARTS_AT_ONCE=2)
    assert line.estimate(2) == round(starts.FIRST_GUESS * 2, 1)
    line.took.extend([1.0, 2.0])
    assert line.estimate(4) == 4.5
