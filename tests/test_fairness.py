"""Fair under overload: whoever waits longest is served next, and beyond a
bounded line a request gets a clear 503 at once.

- The FIFO gate (server/fifo.py), against a model, under Hypothesis.
- The database pool (server/db.py) on a real PostgreSQL: connections are
  handed out in the order they were asked for, even while tasks give one
  back and ask again at once (asyncpg's own pool lets them jump the line).
- The worker's line of requests, against the real server: a flood beyond
  it is refused with 503 + Retry-After, changes nothing, and health probes
  still answer.
"""
import asyncio
import collections
import itertools
import threading

import requests
from hypothesis import given, settings, strategies as st

from server import db
from server.fifo import FifoGate, Full
from tests.conftest import People


# -- the gate against a model -----------------------------------------------------

async def settle():
    for _ in range(5):
        await asyncio.sleep(0)


async def play(size, max_waiting, steps):
    """Run `steps` against a gate and a model of it (who holds, who waits in
    which order); after each step the places given so far, in order, the
    holders and the line must be the model's."""
    gate = FifoGate("test", size, max_waiting)
    tasks = {}  # number -> its task
    granted = []  # the order places were really given in
    expected, line, holding = [], collections.deque(), 0  # the model
    numbers = itertools.count()

    async def arrive(n):
        await gate.acquire()
        granted.append(n)

    def give_back():
        nonlocal holding
        gate.release()
        if line:
            expected.append(line.popleft())  # the longest waiter, never a newcomer
        else:
            holding -= 1

    for step, pick in steps:
        if step == "arrive":
            n = next(numbers)
            tasks[n] = asyncio.create_task(arrive(n))
            if holding < size and not line:
                holding += 1
                expected.append(n)
            elif max_waiting is None or len(line) < max_waiting:
                line.append(n)
            else:
                await settle()
                assert tasks[n].done() and isinstance(tasks[n].exception(), Full)
                continue
        elif step == "release" and holding:
            give_back()
        elif step == "cancel" and line:
            n = line[pick % len(line)]
            line.remove(n)
            tasks[n].cancel()
        await settle()
        assert granted == expected
        assert gate.holding == holding <= size and gate.waiting == len(line)
    while holding:  # everyone gives back: no place was lost to a cancelled waiter
        give_back()
        await settle()
    assert granted == expected and gate.holding == 0 and gate.waiting == 0
    async with asyncio.timeout(5):  # a hang guard: all `size` places are there at once
        for _ in range(size):
            await gate.acquire()


@settings(max_examples=300, deadline=None)
@given(size=st.integers(1, 4), max_waiting=st.one_of(st.none(), st.integers(0, 5)),
       steps=st.lists(st.tuples(st.sampled_from(["arrive", "arrive", "release", "cancel"]), st.integers(0, 10)),
                      max_size=60))
def test_the_gate_serves_in_arrival_order_and_refuses_beyond_its_line(size, max_waiting, steps):
    asyncio.run(play(size, max_waiting, steps))


# -- the database pool ------------------------------------------------------------

def test_database_connections_go_to_the_longest_waiter(fresh_db):
    """Tasks that each take a connection, run a statement, give it back and
    ask again at once, many rounds: every connection goes out in the order
    it was asked for (a ticket drawn just before asking)."""
    async def churn():
        pool = await db.create_pool(fresh_db, max_size=2, acquire_timeout=30, query_timeout=30)
        tickets = itertools.count()
        served = []

        async def student():
            for _ in range(10):
                ticket = next(tickets)
                async with pool.acquire() as conn:
                    served.append(ticket)
                    await conn.fetchval("SELECT 1")

        try:
            async with asyncio.timeout(60):  # a hang guard
                await asyncio.gather(*(student() for _ in range(12)))
        finally:
            await pool.close()
        return served

    served = asyncio.run(churn())
    assert len(served) == 120
    overtaken = sum(1 for i, t in enumerate(served) if any(later < t for later in served[i + 1:]))
    assert served == sorted(served), f"{overtaken} of 120 requests were served before someone who came earlier"


# -- the worker's line of requests ------------------------------------------------

def test_a_flood_beyond_the_line_gets_503_with_retry_after_and_changes_nothing(start_server):
    server = start_server(REQUESTS_AT_ONCE=1, REQUEST_QUEUE=2, FS_DELAY_MS=400)
    people = People(server)
    students = [people.student(f"flood{i}") for i in range(8)]
    start = threading.Barrier(len(students) + 1)
    answers = {}
    probes = []

    def save(student):
        start.wait()
        answers[student.username] = student.request("PUT", "/api/files/home/flood.py", data=b"print(1)\n",
                                                    headers={"If-Match": "*"})

    def probe():
        start.wait()
        for _ in range(5):
            probes.append(requests.get(server.url + "/healthz", timeout=30).status_code)

    threads = [threading.Thread(target=save, args=(s,)) for s in students] + [threading.Thread(target=probe)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(answers) == len(students)
    statuses = collections.Counter(r.status_code for r in answers.values())
    assert set(statuses) <= {200, 503} and statuses[200] >= 3 and statuses[503] >= 1, statuses
    for student in students:
        r = answers[student.username]
        after = student.get("/api/files/home/flood.py")
        if r.status_code == 503:
            assert r.json()["error"] == "server_busy" and r.json()["message"]
            assert int(r.headers["Retry-After"]) > 0
            assert after.status_code == 404  # the refused save changed nothing
        else:
            assert after.json()["content"] == "print(1)\n"
    assert probes == [200] * 5  # a load balancer's probe never waits in the line
    assert "Traceback" not in server.output()
