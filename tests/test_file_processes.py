"""The file processes (server/files/processes.py) as a worker uses them:
real child processes over a real store. A call's answer and its refusal
reach the caller intact; a caller that gives up, a process killed mid-call
or while idle, and a full backlog each cost at most their own call, and
never hand one call's answer to another."""
import asyncio
import os
import signal

import pytest

from server.errors import Refused
from server.executor import Busy
from server.files.area import Area
from server.files.child.protocol import NoSuchOperation, Op
from server.files.paths import NotAFile
from server.files.processes import FileProcesses
from server.files.store import Limits, Store

HOME = Area.home("ada")
HANG = 60  # seconds: only catches a hang


def store_at(tmp_path, delay_ms=0):
    store = Store(str(tmp_path / "storage"), Limits(1 << 20, 100, 1 << 20, 5, delay_ms=delay_ms))
    store.ensure_home("ada", welcome=False)
    return store


def with_processes(store, count, check, max_pending=64):
    async def main():
        processes = FileProcesses(store, count, max_pending)
        await processes.start()
        try:
            await asyncio.wait_for(check(processes), HANG)
        finally:
            await processes.close()
        return processes
    return asyncio.run(main())


def pids(processes):
    return {p.popen.pid for p in processes._watching}


def test_answers_and_refusals_cross_intact(tmp_path):
    store = store_at(tmp_path)
    os.mkfifo(os.path.join(store.home_path("ada"), "pipe"))  # a student's program made it

    async def check(processes):
        meta = await processes.call(Op.SAVE, HOME, ("a.py",), b"print(1)\n", None)
        data, etag, read_meta = await processes.call(Op.READ, HOME, ("a.py",), None)
        assert (data, etag, read_meta["size"]) == (b"print(1)\n", meta["etag"], 9)
        with pytest.raises(NotAFile) as refused:  # a subclass, with its own constructor
            await processes.call(Op.READ, HOME, ("pipe",), None)
        assert (refused.value.status, refused.value.code) == (400, "not_a_file")
        with pytest.raises(Refused) as refused:
            await processes.call(Op.SAVE, HOME, ("a.py",), b"print(2)\n", "not-the-etag")
        assert refused.value.status == 409
        data, _, _ = await processes.call(Op.READ, HOME, ("a.py",), None)
        assert data == b"print(1)\n"  # the refused save changed nothing
    with_processes(store, 2, check)


def test_a_caller_that_gives_up_never_gets_or_leaves_another_calls_answer(tmp_path):
    store = store_at(tmp_path)
    store.save(HOME, ("a.py",), b"a", None)
    store.save(HOME, ("b.py",), b"b", None)
    slow = store_at(tmp_path, delay_ms=300)  # the same files, on a slow file system

    async def check(processes):
        given_up = asyncio.ensure_future(processes.call(Op.READ, HOME, ("a.py",), None))
        await asyncio.sleep(0.1)  # the one process is in the call
        given_up.cancel()
        data, _, _ = await processes.call(Op.READ, HOME, ("b.py",), None)
        assert data == b"b"
        data, _, _ = await processes.call(Op.READ, HOME, ("a.py",), None)
        assert data == b"a"
    with_processes(slow, 1, check)


def test_a_killed_process_costs_its_own_call_only_and_is_replaced(tmp_path):
    store = store_at(tmp_path, delay_ms=300)

    async def check(processes):
        await processes.call(Op.SAVE, HOME, ("a.py",), b"a", None)
        [first] = pids(processes)
        call = asyncio.ensure_future(processes.call(Op.SAVE, HOME, ("a.py",), b"lost?", "*"))
        await asyncio.sleep(0.1)  # in the call
        os.kill(first, signal.SIGKILL)
        with pytest.raises(Refused) as refused:
            await call
        assert (refused.value.status, refused.value.code) == (503, "file_process_lost")
        data, _, _ = await processes.call(Op.READ, HOME, ("a.py",), None)
        assert data in (b"a", b"lost?")  # never acknowledged, atomic either way
        # Killed while idle: once the worker has seen it go, nobody's call fails.
        while pids(processes) in ({first}, set()):
            await asyncio.sleep(0.01)
        [second] = pids(processes)
        os.kill(second, signal.SIGKILL)
        while pids(processes) in ({second}, set()):
            await asyncio.sleep(0.01)
        for _ in range(3):
            await processes.call(Op.SAVE, HOME, ("a.py",), b"after", "*")
        assert len(pids(processes)) == 1 and second not in pids(processes)
    with_processes(store, 1, check)


def test_calls_past_the_backlog_are_refused_at_once(tmp_path):
    store = store_at(tmp_path, delay_ms=200)

    async def check(processes):
        held = [asyncio.ensure_future(processes.call(Op.LIST, HOME, ())) for _ in range(2)]
        await asyncio.sleep(0)
        with pytest.raises(Busy):
            await processes.call(Op.LIST, HOME, ())
        assert [len(listing) for listing in await asyncio.gather(*held)] == [0, 0]
        assert await processes.call(Op.LIST, HOME, ()) == []  # room again
    with_processes(store, 1, check, max_pending=2)


def test_closing_ends_every_process(tmp_path):
    store = store_at(tmp_path)
    seen = set()

    async def check(processes):
        await processes.call(Op.LIST, HOME, ())
        seen.update(processes._watching)
    with_processes(store, 3, check)
    assert len(seen) == 3 and all(p.popen.returncode is not None for p in seen)


def test_a_call_that_fails_unexpectedly_is_answered_and_keeps_the_process(tmp_path):
    store = store_at(tmp_path)

    async def check(processes):
        [pid] = pids(processes)
        with pytest.raises(AttributeError) as failed:  # not a refusal: the worker logs it as a bug
            await processes.call("no_such_method")
        assert "no_such_method" in str(failed.value)
        assert await processes.call(Op.LIST, HOME, ()) == []
        assert pids(processes) == {pid}  # the same process answered both
    with_processes(store, 1, check)


def test_a_call_past_its_deadline_is_refused_and_its_process_replaced(tmp_path):
    """A process that misses a call's deadline (here a store that waits
    3 s per save; on a hung mount, a process asleep in the kernel) is
    abandoned: the caller is told the storage is not answering, a new
    process takes the next calls, and the pool stays its size."""
    from server.files.faults import NotAnswering
    store = store_at(tmp_path, delay_ms=3000)

    async def check(processes):
        loop = asyncio.get_running_loop()
        before = pids(processes)
        with pytest.raises(NotAnswering) as refused:
            await processes.call(Op.SAVE, HOME, ("a.py",), b"print(1)\n", None, deadline=loop.time() + 0.5)
        assert (refused.value.status, refused.value.code) == (503, "storage_not_answering")
        # The other process and the replacement answer (a listing does not wait).
        for _ in range(4):
            assert await processes.call(Op.LIST, HOME, (), deadline=loop.time() + HANG) is not None
        while len(processes._live) < processes.count or processes._stuck:
            await asyncio.sleep(0.05)
        assert len(pids(processes)) == processes.count and pids(processes) != before

    with_processes(store, 2, check)


def test_a_process_makes_only_the_operations_of_its_table(tmp_path):
    """A call names an Op; a store method's name, or anything else not in
    the table, is refused by the process, which then goes on."""
    store = store_at(tmp_path)

    async def check(processes):
        [pid] = pids(processes)
        for not_an_op in ("save", "home_path", "__init__", ["save"], None):
            with pytest.raises(NoSuchOperation):
                await processes.call(not_an_op, HOME, ("a.py",), b"x", None)
        assert await processes.call(Op.LIST, HOME, ()) == []  # nothing was saved
        assert pids(processes) == {pid}
    with_processes(store, 1, check)
