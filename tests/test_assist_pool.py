"""The pool of assist processes (server/assist/pool.py) with stand-in
processes that do what a test tells them: a student's newer request takes
the older one's place, the line is bounded, a request that waited or
computed too long is given up, a process that hangs or dies is replaced
with everything it started, and stopping answers everyone."""
import asyncio
import os
import sys
import tempfile

import psutil
import pytest

from server.assist.pool import Pool
from server.errors import Refused

# A stand-in assist process: ready at once (or after "start_delay" seconds),
# then per request: wait for the file "gate" to exist, sleep "sleep"
# seconds, exit if "exit", start a child if "child"; answer with its pid.
FAKE = r"""
import json, os, subprocess, sys, time
time.sleep(float(sys.argv[1]))
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    r = json.loads(line)
    while r.get("gate") and not os.path.exists(r["gate"]):
        time.sleep(0.01)
    if r.get("exit"):
        os._exit(3)
    child = subprocess.Popen(["sleep", "600"]).pid if r.get("child") else None
    time.sleep(r.get("sleep", 0))
    print(json.dumps({"id": r["id"], "result": {"pid": os.getpid(), "child": child, "echo": r.get("echo")}}),
          flush=True)
"""


def pool(size=1, queue_max=10, timeout=5, start_delay=0):
    return Pool(size, queue_max, timeout, lambda n: [sys.executable, "-c", FAKE, str(start_delay)])


async def ready(p, n=1):
    for _ in range(1000):
        if p.ready >= n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the pool's processes did not start")


async def outcome(awaitable):
    """The answer's result, or the Refused it raised, as (status, code)."""
    try:
        return (await awaitable)["result"]
    except Refused as e:
        return e.status, e.code


def gone(pid):
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def all_gone(*pids):
    """Whether they all end (a SIGKILLed process ends once the kernel schedules it:
    on a busy machine, a moment after the kill)."""
    for _ in range(1000):
        if all(gone(pid) for pid in pids):
            return True
        await asyncio.sleep(0.01)
    return False


def run(coro):
    asyncio.run(asyncio.wait_for(coro, 60))  # a hang fails, not blocks


@pytest.fixture
def gate():
    folder = tempfile.mkdtemp(prefix="assist-gate-")
    path = os.path.join(folder, "open")
    yield path
    if os.path.exists(path):
        os.unlink(path)
    os.rmdir(folder)


def test_a_newer_request_takes_the_older_ones_place(gate):
    async def story():
        p = pool()
        p.start()
        await ready(p)
        busy = asyncio.create_task(outcome(p.ask(("bob", "complete"), {"gate": gate})))
        await asyncio.sleep(0.1)  # bob's request holds the only process
        first = asyncio.create_task(outcome(p.ask(("ada", "complete"), {"echo": 1})))
        other = asyncio.create_task(outcome(p.ask(("ada", "check"), {"echo": "check"})))
        await asyncio.sleep(0.1)
        second = asyncio.create_task(outcome(p.ask(("ada", "complete"), {"echo": 2})))
        assert await first == (409, "superseded")  # at once, while bob's still runs
        assert not busy.done()
        open(gate, "w").close()
        assert (await busy)["echo"] is None
        assert (await second)["echo"] == 2
        assert (await other)["echo"] == "check"  # another kind of request is not replaced
        await p.close()
    run(story())


def test_the_line_is_bounded(gate):
    async def story():
        p = pool(queue_max=2)
        p.start()
        await ready(p)
        held = asyncio.create_task(outcome(p.ask(("s0", "check"), {"gate": gate})))
        await asyncio.sleep(0.1)
        waiting = [asyncio.create_task(outcome(p.ask((f"s{n}", "check"), {"echo": n}))) for n in (1, 2)]
        await asyncio.sleep(0.1)
        assert await outcome(p.ask(("s3", "check"), {})) == (503, "assist_busy")
        # A student already in line may still replace their request.
        replaced = asyncio.create_task(outcome(p.ask(("s2", "check"), {"echo": 22})))
        open(gate, "w").close()
        answers = [await t for t in [held, *waiting, replaced]]
        assert answers[1]["echo"] == 1 and answers[2] == (409, "superseded") and answers[3]["echo"] == 22
        await p.close()
    run(story())


def test_a_request_that_computes_too_long_gets_its_process_replaced():
    async def story():
        p = pool(timeout=1)
        p.start()
        await ready(p)
        first = await outcome(p.ask(("ada", "complete"), {}))
        started = await outcome(p.ask(("ada", "complete"), {"child": True}))
        assert started["pid"] == first["pid"]
        assert await outcome(p.ask(("ada", "complete"), {"child": True, "sleep": 600})) == (503, "assist_timeout")
        # The process and what it started (as jedi starts its own) are gone.
        assert await all_gone(first["pid"], started["child"])
        await ready(p)
        again = await outcome(p.ask(("ada", "complete"), {"echo": "again"}))
        assert again["echo"] == "again" and again["pid"] != first["pid"]
        await p.close()
    run(story())


def test_a_request_that_waited_too_long_is_not_computed():
    async def story():
        p = pool(timeout=1, start_delay=3)  # nothing can answer for 3 s
        p.start()
        assert await outcome(p.ask(("ada", "check"), {})) == (503, "assist_busy")
        await p.close()
    run(story())


def test_a_process_that_dies_is_replaced():
    async def story():
        p = pool()
        p.start()
        await ready(p)
        first = await outcome(p.ask(("ada", "check"), {}))
        assert await outcome(p.ask(("ada", "check"), {"exit": True})) == (503, "assist_busy")
        await ready(p)
        assert (await outcome(p.ask(("ada", "check"), {})))["pid"] != first["pid"]
        await p.close()
    run(story())


def test_closing_answers_everyone_and_ends_the_processes(gate):
    async def story():
        p = pool(size=2)
        p.start()
        await ready(p, 2)
        pids = {(await outcome(p.ask((f"s{n}", "check"), {})))["pid"] for n in range(6)}
        held = [asyncio.create_task(outcome(p.ask((f"s{n}", "check"), {"gate": gate}))) for n in range(3)]
        await asyncio.sleep(0.2)
        await p.close()
        assert [await t for t in held] == [(503, "assist_busy")] * 3
        assert all(gone(pid) for pid in pids)
    run(story())


@pytest.mark.skipif(os.geteuid() != 0, reason="only root takes a process back out of SCHED_IDLE")
def test_a_process_warms_up_at_idle_priority_and_answers_at_the_normal_one():
    async def story():
        p = pool(start_delay=2)
        p.start()
        try:
            warming = None
            for _ in range(100):  # the stand-in, still warming up
                warming = [c for c in psutil.Process().children() if FAKE in " ".join(c.cmdline())]
                if warming:
                    break
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.2)
            during = os.sched_getscheduler(warming[0].pid)
            answer = await p.ask(("ada", "complete"), {"echo": 1})
            return during, os.sched_getscheduler(answer["result"]["pid"])
        finally:
            await p.close()
    during, after = asyncio.run(story())
    assert during == os.SCHED_IDLE and after == os.SCHED_OTHER

