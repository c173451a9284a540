"""A run that no IDE socket asked for: a job whose messages go to a
collector, started through the worker's own wiring (worker.Context and
open_database, as a worker process makes them: tests/inprocess.py) and the same `Jobs.start`
an IDE socket's `run` calls, in the `local` sandbox with every defence on.

Needs root (programs run as students' own uids, in cgroups).
"""
import asyncio
import os

import psutil
import pytest

from server import config
from server.accounts import sessions
from server.accounts.passwords import hash_password
from server.files.area import Area
from server.runs.job import Job, RunRequest, State, WrongState
from server.runs.spec import Limits, RunSpec

TIMEOUT = 60  # only catches a hang

if os.geteuid() != 0:
    pytest.skip("programs run as students' uids in cgroups: these tests need root", allow_module_level=True)


def asked(user, session, parts, claim=None, **fields):
    """A run of `parts` in `user`'s home, asked for by `session`, with the worker's limits."""
    return RunRequest(RunSpec(user["id"], user["username"], parts, Limits.of(config.load({})), **fields), user, session,
                      claim=claim)


class Collector:
    """A sink that keeps every message, as a grader would."""

    def __init__(self):
        self.messages = []
        self.gone = asyncio.Event()
        self.output = asyncio.Event()

    async def send(self, message):
        self.messages.append(message)
        if message["type"] == "output":
            self.output.set()

    def of(self, kind):
        return [m for m in self.messages if m["type"] == kind]


@pytest.fixture
def worker_here(start_inprocess):
    """story(async fn(ctx, student, session)) runs `fn` on the loop of a
    worker made in this process (tests/inprocess.py) over the real `local`
    sandbox, for a student who has logged in."""
    def story(fn):
        server = start_inprocess(SANDBOX="local", RUN_CPU_SECONDS=5, RUN_WALL_SECONDS=30)

        async def go():
            ctx = server.ctx
            await ctx.pool.execute("INSERT INTO users (username, display_name, role, password_hash) "
                                   "VALUES ('ada', 'Ada', 'student', $1)", hash_password("a-password"))
            user, token, _, _ = await ctx.accounts.login("ada", "a-password", "127.0.0.1")
            await fn(ctx, user, sessions.token_hash(token))
        server.call(asyncio.wait_for(go(), TIMEOUT * 2), TIMEOUT * 3)

    return story


async def save(ctx, user, name, source):
    await ctx.files.save(user["username"], Area.home(user["username"]), (name,), source.encode(), "*")


def held_by(ctx, job):
    """What is still held for `job` (all empty when it gave everything back)."""
    sandbox = job.sandboxed.sandbox if job.sandboxed else None
    return {"live jobs": list(ctx.jobs.live), "run locks": ctx.jobs.claims(),
            "places": ctx.admission.running, "ready sandboxes": list(ctx.jobs.warm.ready),
            # A cgroup is removed only once empty: every process the program started is gone.
            "cgroups": [d for d in (sandbox.group.dirs.values() if sandbox and sandbox.group else ()) if os.path.exists(d)],
            "launcher": sandbox is not None and psutil.pid_exists(sandbox.proc.pid),
            "usage records": list(ctx.files.usage.homes)}


NOTHING = {"live jobs": [], "run locks": [], "places": 0, "ready sandboxes": [], "cgroups": [], "launcher": False,
           "usage records": []}


def test_a_job_with_no_socket_runs_with_every_defence_and_gives_everything_back(worker_here):
    async def story(ctx, user, session):
        defences = ctx.sandbox_kind.defences()
        assert defences["seccomp"] and defences["cgroup"] and defences["own_uid"] and defences["namespaces"]
        await save(ctx, user, "main.py", "import os, sys\nprint('hello', sys.argv[1:], os.getuid() != 0)\n"
                                         "open('out.txt', 'w').write('made by a job')\n")
        collector = Collector()
        job = ctx.jobs.start(asked(user, session, ("main.py",), args=("a", "b")), collector)
        await asyncio.wait_for(job.done.wait(), TIMEOUT)

        assert [m["type"] for m in collector.messages][0] == "started"
        assert "".join(m["data"] for m in collector.of("output")) == "hello ['a', 'b'] True\r\n"  # a terminal's line ends
        [exit_] = collector.of("exit")
        assert exit_["reason"] == "ok" and exit_["code"] == 0, exit_
        assert job.state is State.ENDED
        data, _, _ = await ctx.files.read(user["username"], Area.home(user["username"]), ("out.txt",))
        assert data == b"made by a job"
        # Nobody has an IDE open: the sandbox went with the run, and nothing else is held.
        assert held_by(ctx, job) == NOTHING
        assert await ctx.pool.fetchval("SELECT count(*) FROM active_runs WHERE username = 'ada'") == 0
        assert job.sandboxed.sandbox.group is not None  # it ran in a cgroup of its own
    worker_here(story)


def test_a_job_stopped_midway_or_refused_gives_everything_back(worker_here):
    async def story(ctx, user, session):
        await save(ctx, user, "spin.py", "import os\nos.fork()\nprint('spinning', flush=True)\nwhile True: pass\n")
        collector = Collector()
        job = ctx.jobs.start(asked(user, session, ("spin.py",)), collector)
        await asyncio.wait_for(collector.output.wait(), TIMEOUT)
        assert job.state is State.RUNNING
        # A second job of the same student is refused by the run lock, whoever asks.
        second = Collector()
        other = ctx.jobs.start(asked(user, session, ("spin.py",)), second)
        await asyncio.wait_for(other.done.wait(), TIMEOUT)
        assert [m.get("error") for m in second.messages] == ["already_running"]
        await job.run.stop("killed")
        await asyncio.wait_for(job.done.wait(), TIMEOUT)
        [exit_] = collector.of("exit")
        assert exit_["reason"] == "killed"
        assert held_by(ctx, job) == NOTHING
        assert await ctx.pool.fetchval("SELECT count(*) FROM active_runs") == 0

        # A session that ended: refused before anything is taken.
        await ctx.pool.execute("DELETE FROM sessions")
        late = Collector()
        refused = ctx.jobs.start(asked(user, session, ("spin.py",)), late)
        await asyncio.wait_for(refused.done.wait(), TIMEOUT)
        assert [m.get("error") for m in late.messages] == ["session_ended"] and refused.session_ended
        assert refused.sandboxed is None and refused.state is State.ENDED
    worker_here(story)


def test_a_job_whose_asker_left_before_it_ran_starts_nothing(worker_here):
    async def story(ctx, user, session):
        await save(ctx, user, "main.py", "print('never')\n")
        collector = Collector()
        collector.gone.set()
        job = ctx.jobs.start(asked(user, session, ("main.py",)), collector)
        await asyncio.wait_for(job.done.wait(), TIMEOUT)
        assert job.run is None and collector.messages == []
        assert held_by(ctx, job) == NOTHING
    worker_here(story)


def test_runs_under_one_lock_with_their_input_given(worker_here):
    """A check's runs: several jobs under one run lock its asker holds,
    each fed its input at once; the lock stays held between them (a Run
    pressed meanwhile is refused) and goes only when the asker gives it back."""
    async def story(ctx, user, session):
        await save(ctx, user, "add.py", "a = int(input('a? '))\nb = int(input('b? '))\nprint('sum', a + b)\n")
        claim = await ctx.jobs.claim(user, session)
        outputs = []
        for given in ("3\n4\n", "10\n-2\n"):
            collector = Collector()
            job = ctx.jobs.start(asked(user, session, ("add.py",), claim=claim, stdin=given), collector)
            await asyncio.wait_for(job.done.wait(), TIMEOUT)
            assert collector.of("exit")[0]["reason"] == "ok", collector.messages
            outputs.append("".join(m["data"] for m in collector.of("output")).replace("\r\n", "\n"))
            # Between the runs the lock is still the asker's: another run is refused.
            refused = Collector()
            other = ctx.jobs.start(asked(user, session, ("add.py",)), refused)
            await asyncio.wait_for(other.done.wait(), TIMEOUT)
            assert [m.get("error") for m in refused.messages] == ["already_running"]
        assert [o.splitlines()[-1].endswith(f"sum {n}") for o, n in zip(outputs, (7, 8))] == [True, True], outputs
        assert ctx.jobs.claims() == [claim]
        await ctx.jobs.release(user, claim)
        assert ctx.jobs.claims() == []
        assert await ctx.pool.fetchval("SELECT count(*) FROM active_runs") == 0
    worker_here(story)


def test_a_step_in_the_wrong_state_is_an_error_not_a_silent_no_op():
    job = Job(asked({"id": 1, "username": "ada"}, b"", ("main.py",)), Collector(), jobs=None)
    with pytest.raises(WrongState):  # preparing: it cannot start running before it had its place
        job._step(State.READY, State.RUNNING)
    job._step(State.PREPARING, State.READY)
    with pytest.raises(WrongState):
        job._step(State.PREPARING, State.READY)
    assert job.state is State.READY
