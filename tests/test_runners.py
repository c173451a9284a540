"""Students' programs on runners (SANDBOX=remote): a runner process that
holds none of the web tier's secrets runs them, and is refused to whoever
cannot show a ticket of its own.

Real processes: `python -m server.runner` with the local sandbox, and the
server. Needs root (bubblewrap, students' uids).
"""
import asyncio
import json
import os
import signal
import subprocess
import sys
import threading

import pytest
from tornado import httpclient, websocket

from loadtest.harness import RunnerProcess
from server.runs.sandbox.tickets import issue, runner_key
from tests.runs_support import LIMITS, run, student

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECRET = "a-runner-secret-for-the-tests-" + "x" * 16
TIMEOUT = 60  # hang guards only

if os.geteuid() != 0:
    pytest.skip("runners start bubblewrap sandboxes as students' uids: these tests need root",
                allow_module_level=True)


@pytest.fixture
def runners(data_dir):
    """start(id, storage_root, **env) -> a running RunnerProcess, its DATA_DIR
    (its font cache, which students' uids read) in the test's data_dir."""
    started = []

    def start(runner_id, storage_root, **env):
        folder = os.path.join(data_dir, "runner-" + runner_id)
        os.makedirs(folder, mode=0o755)
        started.append(RunnerProcess(runner_id, SECRET, storage_root, folder, {**LIMITS, **env}).start())
        return started[-1]

    yield start
    for runner in started:
        runner.stop()
        print(f"--- runner {runner.id} output ---\n" + "".join(runner.lines))


@pytest.fixture
def remote_server(start_server, runners, data_dir):
    """A server whose students' programs run on runner r1 (started after
    the server, which makes the storage the runner walks into)."""
    storage = os.path.join(data_dir, "storage")
    os.makedirs(storage, mode=0o755, exist_ok=True)
    runner = runners("r1", storage)
    server = start_server(SANDBOX="remote", RUNNERS=f"r1={runner.url}", RUNNER_SECRET=SECRET, **LIMITS)
    server.runner = runner
    return server


def test_a_program_runs_on_the_runner_with_its_input_files_and_exit(remote_server):
    client = student(remote_server, "ada")
    code = ("name = input('Name? ')\n"
            "open('greeting.txt', 'w').write('hello ' + name)\n"
            "import os\nprint('hello', name, os.getuid() != 0, 'COOKIE_SECRET' in os.environ)\n"
            "raise SystemExit(3)\n")
    exit_, rc = run(remote_server, client, code, inputs=["Ada"])
    assert (exit_["reason"], exit_["code"]) == ("error", 3), exit_
    assert "hello Ada True False" in rc.output()
    r = client.request("GET", "/api/files/home/greeting.txt")
    assert r.status_code == 200 and r.json()["content"] == "hello Ada", r.text


def test_the_runner_holds_no_secret_and_refuses_to_start_with_one(remote_server, tmp_path):
    environ = open(f"/proc/{remote_server.runner.proc.pid}/environ", "rb").read().split(b"\0")
    names = {item.split(b"=", 1)[0].decode() for item in environ if item}
    assert not names & {"COOKIE_SECRET", "DATABASE_URL", "RUNNER_SECRET", "ADMIN_PASSWORD"}, names
    held = subprocess.run([sys.executable, "-m", "server.runner"], cwd=ROOT, capture_output=True, text=True,
                          env={**remote_server.runner.env, "DATABASE_URL": "postgresql://x@y/z"}, timeout=TIMEOUT)
    assert held.returncode == 2 and "must not hold DATABASE_URL" in held.stderr


async def knock(url, ticket, home="."):
    """Open a sandbox socket on a runner with `ticket` and ask for a sandbox
    of `home`: (close code, first message)."""
    headers = {"Authorization": "Ticket " + ticket} if ticket is not None else {}
    request = httpclient.HTTPRequest(url + "/sandbox", headers=headers, connect_timeout=10, request_timeout=10)
    ws = await websocket.websocket_connect(request)
    await ws.write_message(json.dumps({"home": home, "uid": None, "settings": {}}))
    message = await asyncio.wait_for(ws.read_message(), TIMEOUT)
    return ws.close_code, message


def test_a_runner_refuses_forged_foreign_expired_and_replayed_tickets_and_says_so(runners, data_dir):
    storage = os.path.join(data_dir, "storage")
    os.makedirs(storage, mode=0o755, exist_ok=True)
    runner = runners("r1", storage)
    mine = runner_key(SECRET, "r1")
    forged, _ = issue(runner_key("another-secret-of-at-least-32-characters", "r1"), "r1")
    foreign, _ = issue(mine, "r2")  # signed with r1's key but naming r2: not for r1
    expired, _ = issue(mine, "r1", now=0)
    good, _ = issue(mine, "r1")
    for ticket in (None, "", "x.y", forged, foreign, expired):
        code, message = asyncio.run(knock(runner.url, ticket))
        assert (code, message) == (4401, None), ticket
    code, message = asyncio.run(knock(runner.url, good))
    assert message is not None and json.loads(message)["type"] in ("prepared", "error")
    code, message = asyncio.run(knock(runner.url, good))  # the same ticket again: a replay
    assert (code, message) == (4401, None)
    log = "".join(runner.lines)
    for why in ("no ticket", "not a ticket", "not signed with this runner's key", "for runner 'r2'",
                "an expired ticket", "already used (a replay)"):
        assert why in log, why


class Impostor:
    """A WebSocket server in this process that answers as a runner would,
    without the runner's key."""

    def __init__(self):
        from tornado import web
        self.asked = []
        impostor = self

        class Answer(websocket.WebSocketHandler):
            def on_message(self, message):
                impostor.asked.append(message)
                self.write_message(json.dumps({"type": "prepared", "proof": "made-up", "defences": {}}))

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def listen():
            from tornado.httpserver import HTTPServer
            from tornado.netutil import bind_sockets
            sockets = bind_sockets(0, "127.0.0.1")
            self.http = HTTPServer(web.Application([(r"/sandbox", Answer)]))
            self.http.add_sockets(sockets)
            return f"ws://127.0.0.1:{sockets[0].getsockname()[1]}"
        self.url = asyncio.run_coroutine_threadsafe(listen(), self.loop).result(TIMEOUT)

    def stop(self):
        self.loop.call_soon_threadsafe(self.http.stop)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(TIMEOUT)


def test_an_address_that_answers_in_a_runners_place_is_refused_and_the_run_goes_to_the_real_one(
        start_server, runners, data_dir):
    storage = os.path.join(data_dir, "storage")
    os.makedirs(storage, mode=0o755, exist_ok=True)
    real = runners("r2", storage)
    impostor = Impostor()
    try:
        # r1 comes first (the least busy, then by name): the impostor is asked first.
        server = start_server(SANDBOX="remote", RUNNERS=f"r1={impostor.url} r2={real.url}", RUNNER_SECRET=SECRET,
                              **LIMITS)
        client = student(server, "ada")
        exit_, rc = run(server, client, "print('ran where it should')\n")
    finally:
        impostor.stop()
    assert impostor.asked, "the impostor was never asked"
    assert exit_["reason"] == "ok" and "ran where it should" in rc.output(), exit_
    assert "runner r1 at ws://127.0.0.1" in server.output() and "without its key's proof: refused" in server.output()


def test_a_runner_starts_no_sandbox_outside_the_storage_whatever_path_it_is_given(runners, data_dir):
    storage = os.path.join(data_dir, "storage")
    os.makedirs(os.path.join(storage, "ada"), mode=0o755)
    os.symlink("/etc", os.path.join(storage, "out"))
    runner = runners("r1", storage)
    key = runner_key(SECRET, "r1")
    for home in ("..", "../..", "/etc", "ada/../..", "out", "out/ssl", "ada\x00", "", 7, None, ["ada"]):
        code, message = asyncio.run(knock(runner.url, issue(key, "r1")[0], home))
        said = json.loads(message)
        assert said["type"] == "error" and said["message"] in ("a home is a path inside the storage", "no such home"), home


def test_with_no_runners_named_each_worker_runs_its_programs_on_a_child_runner_it_starts_again(start_server):
    server = start_server(processes=2, SANDBOX="remote", **LIMITS)
    client = student(server, "ada")
    exit_, rc = run(server, client, "import os\nprint('child', 'COOKIE_SECRET' in os.environ)\n")
    assert exit_["reason"] == "ok" and "child False" in rc.output(), exit_
    runners = children_runners(server)
    assert runners, "no child runner"
    for pid in runners:
        names = {item.split(b"=", 1)[0].decode()
                 for item in open(f"/proc/{pid}/environ", "rb").read().split(b"\0") if item}
        assert not names & {"COOKIE_SECRET", "DATABASE_URL", "RUNNER_SECRET", "ADMIN_PASSWORD"}, names

    killed = {}

    async def on(rc, message):
        if message["type"] == "output" and "waiting" in message.get("data", "") and not killed:
            for pid in children_runners(server):
                os.kill(pid, signal.SIGKILL)
            killed["yes"] = True
    exit_, _ = run(server, client, "print('waiting', flush=True)\nimport time\ntime.sleep(50)\n", on=on)
    assert exit_["reason"] == "runner_lost", exit_
    exit_, rc = run(server, client, "print('again')\n")
    assert exit_["reason"] == "ok" and "again" in rc.output(), exit_
    assert "the child runner" in server.output() and "stopped" in server.output()


def children_runners(server):
    """The pids of the server's child runners (python -m server.runner under its workers)."""
    import psutil
    return [p.pid for p in psutil.Process(server.proc.pid).children(recursive=True)
            if p.cmdline()[1:3] == ["-m", "server.runner"]]


def lose_a_runner(start_server, runners, data_dir, students, how):
    """Two runners; `students` students run a program that waits; the
    busiest runner is lost (`how`: kill or freeze): what
    loadtest.bench_runner_loss.one_kill saw."""
    from loadtest.bench_runner_loss import one_kill
    from loadtest.harness import students as make_students
    storage = os.path.join(data_dir, "storage")
    os.makedirs(storage, mode=0o755, exist_ok=True)
    pair = runners("r1", storage), runners("r2", storage)
    server = start_server(SANDBOX="remote", RUNNERS=" ".join(f"{r.id}={r.url}" for r in pair), RUNNER_SECRET=SECRET,
                          **{**LIMITS, "RUN_MAX_CONCURRENT": 40, "RUN_WALL_SECONDS": 300, "RUN_IDLE_SECONDS": 300})
    credentials = make_students(server.env["DATABASE_URL"], students, prefix=how)
    return server, asyncio.run(one_kill(how, server.url, credentials, pair, TIMEOUT))


def test_a_runner_killed_under_twenty_running_students_loses_only_its_runs_and_no_save(start_server, runners,
                                                                                       data_dir):
    """Kill -9 one of two runners while 20 students' programs run: exactly
    its students are told, in words; the others run on; every save the
    server acknowledged is still there; and they all run again."""
    _, lost = lose_a_runner(start_server, runners, data_dir, 20, "kill")
    assert 0 < lost["students_on_victim"] < 20, lost
    assert lost["reasons"] == {"runner_lost": lost["students_on_victim"]} and lost["others_told"] == 0, lost
    assert lost["words"] == ["stopped: the computer running your program stopped. Press Run again"], lost
    assert lost["saves_lost"] == 0 and lost["rerun_errors"] == 0, lost


def test_a_runner_that_stops_answering_is_given_up_and_its_students_told(start_server, runners, data_dir):
    """A frozen runner (SIGSTOP: the kernel keeps its sockets open, nothing
    answers on them) is noticed by its silence, not by a closed socket."""
    server, lost = lose_a_runner(start_server, runners, data_dir, 4, "freeze")
    assert lost["reasons"] == {"runner_lost": lost["students_on_victim"]} and lost["others_told"] == 0, lost
    assert lost["saves_lost"] == 0 and lost["rerun_errors"] == 0, lost
    assert "said nothing for 2 s" in server.output()
