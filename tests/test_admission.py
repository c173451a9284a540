"""The line for a place among the host's running programs
(server/runs/admission.py), on its own: who gets in, in which order, what
each waiter is told, and what happens when one gives up."""
import asyncio

import pytest
from hypothesis import given, settings, strategies as st

from server import config
from server.runs import admission
from server.runs.admission import Admission, Place, QueueFull

TIMEOUT = 5  # only catches a hang


@pytest.fixture(autouse=True)
def announce_at_once(monkeypatch):
    monkeypatch.setattr(admission, "ANNOUNCE_SECONDS", 0)


class Told:
    """A waiter's notify: the positions it heard, in order."""

    def __init__(self):
        self.heard = []

    async def __call__(self, position):
        self.heard.append(position)


async def settle():
    for _ in range(5):
        await asyncio.sleep(0)


def test_runs_within_the_slots_start_at_once_and_the_next_waits_told_its_place():
    async def go():
        line = Admission(2, 5)
        await line.enter(Told())
        await line.enter(Told())
        told = Told()
        third = asyncio.ensure_future(line.enter(told))
        await settle()
        assert not third.done() and told.heard == [1] and line.running == 2
        line.leave()
        await asyncio.wait_for(third, TIMEOUT)
        assert line.running == 2 and line.waiting == []
        line.leave(), line.leave()
        assert line.running == 0
    asyncio.run(go())


def test_beyond_the_line_is_refused_at_once():
    async def go():
        line = Admission(1, 1)
        await line.enter(Told())
        waiting = asyncio.ensure_future(line.enter(Told()))
        await settle()
        with pytest.raises(QueueFull):
            await line.enter(Told())
        waiting.cancel()
    asyncio.run(go())


def test_the_line_is_first_come_first_served_and_everyone_hears_when_they_move_up():
    async def go():
        line = Admission(1, 10)
        await line.enter(Told())
        told = [Told() for _ in range(3)]
        entered = [asyncio.ensure_future(line.enter(t)) for t in told]
        await settle()
        order = []
        for _ in range(3):
            line.leave()
            await settle()
            order.append(next(i for i, e in enumerate(entered) if e.done() and i not in order))
        assert order == [0, 1, 2]
        assert told[0].heard == [1] and told[1].heard == [2, 1] and told[2].heard == [3, 2, 1]
    asyncio.run(go())


def test_one_who_gives_up_leaves_the_line_and_those_behind_move_up():
    async def go():
        line = Admission(1, 10)
        await line.enter(Told())
        first, second = Told(), Told()
        a = asyncio.ensure_future(line.enter(first))
        b = asyncio.ensure_future(line.enter(second))
        await settle()
        a.cancel()
        await settle()
        assert second.heard == [2, 1] and len(line.waiting) == 1
        line.leave()
        await asyncio.wait_for(b, TIMEOUT)
        assert line.running == 1
    asyncio.run(go())


def test_a_place_admitted_just_as_its_waiter_gave_up_passes_on():
    async def go():
        line = Admission(1, 10)
        await line.enter(Told())
        a = asyncio.ensure_future(line.enter(Told()))
        b = asyncio.ensure_future(line.enter(Told()))
        await settle()
        line.leave()  # a's place is given...
        a.cancel()  # ...as it gives up
        await settle()
        assert b.done() and line.running == 1
    asyncio.run(go())


def test_a_place_asked_for_ahead_of_need_waits_behind_those_somebody_waits_for_until_hurried():
    async def go():
        line = Admission(1, 10)
        await line.enter(Told())
        early = Place(ahead=True)
        e = asyncio.ensure_future(line.enter(None, early))
        await settle()
        needed = Told()
        n = asyncio.ensure_future(line.enter(needed))
        await settle()
        assert line.position(early) == 2 and needed.heard == [1]
        hurried = Told()
        line.hurry(early, hurried)
        later = Told()
        asyncio.ensure_future(line.enter(later))
        await settle()
        assert line.position(early) == 2 and later.heard == [3] and hurried.heard == [2]
        line.leave()
        await settle()
        assert n.done() and not e.done() and line.position(early) == 1
        line.leave()
        await settle()
        assert e.done() and line.position(early) is None
    asyncio.run(go())


def test_the_hosts_limits_are_shared_out_among_the_workers():
    cfg = config.load({"RUN_MAX_CONCURRENT": "16", "RUN_QUEUE_MAX": "200"})
    line = Admission.share(cfg, 3)
    assert (line.slots, line.queue_max) == (5, 66)
    assert Admission.share(config.load({"RUN_MAX_CONCURRENT": "2"}), 4).slots == 1  # never none


@settings(max_examples=60, deadline=None)
@given(slots=st.integers(1, 3), queue_max=st.integers(0, 4),
       steps=st.lists(st.sampled_from(["enter", "leave", "give_up"]), max_size=25))
def test_running_never_exceeds_the_slots_nor_the_line_its_bound_and_order_holds(slots, queue_max, steps):
    async def go():
        line = Admission(slots, queue_max)
        admitted, waiting = [], []  # admitted in order; (number, task) still waiting
        for number, step in enumerate(steps):
            if step == "enter":
                task = asyncio.ensure_future(line.enter(Told()))
                await settle()
                if task.done():
                    if isinstance(task.exception(), QueueFull):
                        assert len(line.waiting) == queue_max
                        continue
                    admitted.append(number)
                else:
                    waiting.append((number, task))
            elif step == "leave" and line.running:
                line.leave()
            elif step == "give_up" and waiting:
                waiting.pop(0)[1].cancel()
            await settle()
            for entry in [w for w in waiting if w[1].done()]:
                waiting.remove(entry)
                admitted.append(entry[0])
            assert line.running <= slots and len(line.waiting) <= queue_max
            assert len(line.waiting) == len(waiting)
        assert admitted == sorted(admitted)  # first come, first served
        for _, task in waiting:
            task.cancel()
    asyncio.run(go())
