"""A job's life without a sandbox, PostgreSQL or root (server/runs/job.py):
its collaborators are small fakes, and each story ends before a program
would run, which is where a job refuses, gives up or gives back what it
holds. tests/test_jobs.py runs the same `Jobs.start` with real programs."""
import asyncio
import logging

import pytest

from server import config
from server.errors import Refused
from server.runs import job as job_module
from server.runs.admission import Admission
from server.runs.job import Job, Jobs, RunRequest, State, WrongState
from server.runs.spec import Limits, RunSpec

ADA = {"id": 7, "username": "ada"}
TIMEOUT = 10  # only catches a hang


class Sink:
    def __init__(self):
        self.messages = []
        self.gone = asyncio.Event()
        self.queued = asyncio.Event()

    async def send(self, message):
        self.messages.append(message)
        if message["type"] == "queued":
            self.queued.set()


class Sandboxes:
    """A source of sandboxes: gives `sandboxed` (None: the start failed twice)."""
    holds_home = True
    copies_home = False

    def __init__(self, sandboxed="a sandbox"):
        self.sandboxed = sandboxed
        self.given_back = []

    async def take(self, user, notify):
        return self.sandboxed

    def used(self, user, sandboxed):
        raise AssertionError("no program runs in these stories")

    async def give_back(self, user, sandboxed, ran, reusable):
        self.given_back.append((sandboxed, ran, reusable))


class Usage:
    def __init__(self):
        self.forgotten = []

    def forget(self, user):
        self.forgotten.append(user["username"])


class Files:
    def __init__(self, refusal=None):
        self.refusal = refusal
        self.usage = Usage()

    async def runnable_size(self, username, area, parts):
        if self.refusal:
            raise self.refusal
        return 100


class Warm:
    def __init__(self):
        self.wanted = {}


class Lock:
    """runlock's claim and release, as the database would answer."""

    def __init__(self, answer="claimed"):
        self.answer = answer
        self.claimed, self.released = [], []

    async def claim(self, pool, username, run_id, token_hash):
        self.claimed.append(run_id)
        return self.answer

    async def release(self, pool, username, run_id):
        self.released.append(run_id)


@pytest.fixture
def lock(monkeypatch):
    found = Lock()
    monkeypatch.setattr(job_module.runlock, "claim", found.claim)
    monkeypatch.setattr(job_module.runlock, "release", found.release)
    return found


def make_jobs(files=None, slots=2, queue_max=5, draining=False):
    return Jobs(cfg=config.load({}), pool=None, files=files or Files(), admission=Admission(slots, queue_max),
                warm=Warm(), events=None, draining=lambda: draining)


def request(**kw):
    spec = RunSpec(ADA["id"], ADA["username"], ("main.py",), Limits.of(config.load({})))
    return RunRequest(spec, user=ADA, session=b"token", **kw)


def life(jobs, req, sink, before_end=None):
    """Start a job; its messages once its last one is out."""
    async def go():
        job = jobs.start(req, sink)
        if before_end:
            await before_end(job)
        await asyncio.wait_for(job.done.wait(), TIMEOUT)
        return job
    return asyncio.run(go())


def test_a_start_that_failed_twice_is_told_plainly_and_the_run_lock_given_back(lock):
    jobs, sink, source = make_jobs(), Sink(), Sandboxes(sandboxed=None)
    job = life(jobs, request(sandboxes=source), sink)
    assert sink.messages == [job_module.SANDBOX_FAILED]
    assert "Press Run to try again" in sink.messages[0]["message"]
    assert lock.claimed == lock.released and len(lock.claimed) == 1
    assert source.given_back == [] and job.state is State.ENDED and job.run is None
    assert jobs.live == set() and jobs.admission.running == 0


def test_a_student_with_a_run_already_is_refused_and_nothing_is_taken(lock):
    lock.answer = "busy"
    jobs, sink, source = make_jobs(), Sink(), Sandboxes()
    job = life(jobs, request(sandboxes=source), sink)
    assert [m["error"] for m in sink.messages] == ["already_running"]
    assert "Stop it there first." in sink.messages[0]["message"]
    assert lock.released == [] and source.given_back == [] and job.state is State.ENDED


def test_an_ended_session_is_refused_and_remembered(lock):
    lock.answer = "session_ended"
    jobs, sink = make_jobs(), Sink()
    job = life(jobs, request(sandboxes=Sandboxes()), sink)
    assert sink.messages == [{"type": "error", "error": "session_ended", "message": "Your session has ended. Log in again."}]
    assert job.session_ended and lock.released == []


def test_a_file_that_cannot_run_is_refused_and_the_lock_it_claimed_given_back(lock):
    # (The file is looked at under the lock: the home is then as the student's last run left it.)
    files = Files(refusal=Refused(404, "not_found", "There is no file main.py in your folder."))
    jobs, sink = make_jobs(files), Sink()
    life(jobs, request(sandboxes=Sandboxes()), sink)
    assert sink.messages == [{"type": "error", "error": "not_found", "message": "There is no file main.py in your folder."}]
    assert lock.claimed == lock.released and len(lock.claimed) == 1
    assert files.usage.forgotten == ["ada"]  # nobody has an IDE open here: nothing kept for them


def test_a_bug_is_logged_and_said_as_a_sentence_without_its_details(lock, caplog):
    files = Files(refusal=KeyError("secret detail"))
    jobs, sink = make_jobs(files), Sink()
    with caplog.at_level(logging.ERROR):
        life(jobs, request(sandboxes=Sandboxes()), sink)
    assert sink.messages == [{"type": "error", "error": "internal_error",
                              "message": "Something went wrong on the server. It has been logged."}]
    assert any("a run failed" in r.getMessage() and r.exc_info for r in caplog.records)


def test_a_full_line_is_refused_as_busy_and_the_sandbox_given_back_unused(lock):
    jobs, sink, source = make_jobs(slots=1, queue_max=0), Sink(), Sandboxes()
    jobs.admission.running = 1  # somebody else's program holds the only place
    job = life(jobs, request(sandboxes=source, claim="held-by-the-asker"), sink)
    assert sink.messages == [{"type": "error", "error": "server_busy", "message": "The server is busy. Try again in a moment."}]
    assert source.given_back == [("a sandbox", False, False)]
    assert lock.claimed == lock.released == []  # the asker's own claim is the asker's to give back
    assert job.state is State.ENDED and jobs.admission.running == 1


def test_a_worker_shutting_down_starts_nothing_and_gives_the_place_on(lock):
    jobs, sink, source = make_jobs(draining=True), Sink(), Sandboxes()
    life(jobs, request(sandboxes=source), sink)
    assert [m["error"] for m in sink.messages] == ["server_restart"]
    assert jobs.admission.running == 0 and source.given_back == [("a sandbox", False, False)]
    assert len(lock.released) == 1


def test_nobody_waiting_any_more_before_the_line_ends_it_quietly(lock):
    jobs, sink, source = make_jobs(), Sink(), Sandboxes()
    sink.gone.set()
    job = life(jobs, request(sandboxes=source), sink)
    assert sink.messages == [] and source.given_back == [("a sandbox", False, False)]
    assert job.state is State.ENDED and len(lock.released) == 1


def test_a_job_in_the_line_is_told_its_place_and_leaves_it_when_nobody_waits(lock):
    jobs, sink, source = make_jobs(slots=1), Sink(), Sandboxes()
    jobs.admission.running = 1
    jobs.took.extend([4.0, 6.0])

    async def wait_then_go(job):
        await asyncio.wait_for(sink.queued.wait(), TIMEOUT)
        assert job.state is State.READY and jobs.admission.position(jobs.admission.waiting[0]) == 1
        sink.gone.set()
    job = life(jobs, request(sandboxes=source), sink, before_end=wait_then_go)
    assert sink.messages == [{"type": "queued", "line": "run", "position": 1, "estimate": 5.0}]
    assert jobs.admission.waiting == [] and jobs.admission.running == 1  # the other's place, untouched
    assert not job.admitted and source.given_back == [("a sandbox", False, False)]


def test_the_estimate_follows_the_latest_runs_and_the_places():
    jobs = make_jobs(slots=4)
    assert jobs.estimate(8) == round(job_module.RUN_FIRST_GUESS * 2, 1)
    jobs.took.extend([1.0, 3.0])
    assert jobs.estimate(2) == 1.0 and jobs.estimate(6) == 3.0


def test_a_step_from_the_wrong_state_is_an_error_and_a_job_ends_once(lock):
    jobs = make_jobs()
    job = Job(request(sandboxes=Sandboxes()), Sink(), jobs)
    with pytest.raises(WrongState, match="from ready to running, not from preparing"):
        job._step(State.READY, State.RUNNING)
    asyncio.run(job._end())
    assert job.state is State.ENDED
    with pytest.raises(WrongState, match="ends once"):
        asyncio.run(job._end())


def test_a_run_whose_asker_holds_its_place_waits_in_no_line(lock):
    """A check's checker run: the check waited in the checks' line and holds the run lock, so its job
    takes neither (a full line does not refuse it), and gives back neither."""
    jobs, sink, source = make_jobs(slots=1, queue_max=0, draining=True), Sink(), Sandboxes()
    jobs.admission.running = 1  # somebody else's program holds the only place
    job = life(jobs, request(sandboxes=source, claim="held-by-the-check", placed=True), sink)
    assert [m["error"] for m in sink.messages] == ["server_restart"]  # past the line: stopped by the shutdown
    assert jobs.admission.running == 1 and not job.admitted and lock.claimed == lock.released == []
    assert source.given_back == [("a sandbox", False, False)] and job.state is State.ENDED
