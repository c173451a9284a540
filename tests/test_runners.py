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
from tests.runs_support import LIMITS, metric, run, save, student

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECRET = "a-runner-secret-for-the-tests-" + "x" * 16
TIMEOUT = 60  # hang guards only

if os.geteuid() != 0:
    pytest.skip("runners start bubblewrap sandboxes as students' uids: these tests need root",
                allow_module_level=True)


@pytest.fixture
def runners(data_dir):
    """start(id, **env) -> a running RunnerProcess, its DATA_DIR (its font
    cache and its sandboxes' homes, which students' uids reach) in the
    test's data_dir."""
    started = []

    def start(runner_id, **env):
        folder = os.path.join(data_dir, "runner-" + runner_id)
        os.makedirs(folder, mode=0o755)
        started.append(RunnerProcess(runner_id, SECRET, folder, {**LIMITS, **env}).start())
        return started[-1]

    yield start
    for runner in started:
        runner.stop()
        print(f"--- runner {runner.id} output ---\n" + "".join(runner.lines))


@pytest.fixture
def remote_server(start_server, runners, data_dir):
    """A server whose students' programs run on runner r1."""
    runner = runners("r1")
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


def test_a_silent_program_of_many_busy_processes_is_stopped_on_the_cpu_the_runner_counts(remote_server):
    # Each process stays under its own CPU limit (2 s) long after the run's
    # processes together pass it: only the runner's counts, sent while the
    # run goes (it prints nothing), can stop it before they end themselves.
    client = student(remote_server, "ada")
    code = ("import os\n"
            "for _ in range(10):\n"
            "    if os.fork() == 0:\n"
            "        while True: pass\n"
            "for _ in range(10): os.wait()\n"
            "print('every child ended on its own')\n")
    exit_, rc = run(remote_server, client, code, timeout=TIMEOUT)
    assert exit_["reason"] == "cpu_limit", exit_
    assert "every child ended on its own" not in rc.output()


def test_the_runner_holds_no_secret_and_refuses_to_start_with_one(remote_server, tmp_path):
    environ = open(f"/proc/{remote_server.runner.proc.pid}/environ", "rb").read().split(b"\0")
    names = {item.split(b"=", 1)[0].decode() for item in environ if item}
    assert not names & {"COOKIE_SECRET", "DATABASE_URL", "RUNNER_SECRET", "ADMIN_PASSWORD"}, names
    held = subprocess.run([sys.executable, "-m", "server.runner"], cwd=ROOT, capture_output=True, text=True,
                          env={**remote_server.runner.env, "DATABASE_URL": "postgresql://x@y/z"}, timeout=TIMEOUT)
    assert held.returncode == 2 and "must not hold DATABASE_URL" in held.stderr


async def knock(url, ticket, uid=None, settings=None, **more):
    """Open a sandbox socket on a runner with `ticket` and ask for a sandbox
    for `uid`: (close code, first message)."""
    headers = {"Authorization": "Ticket " + ticket} if ticket is not None else {}
    request = httpclient.HTTPRequest(url + "/sandbox", headers=headers, connect_timeout=10, request_timeout=10)
    ws = await websocket.websocket_connect(request)
    await ws.write_message(json.dumps({"uid": uid, "settings": {} if settings is None else settings, **more}))
    message = await asyncio.wait_for(ws.read_message(), TIMEOUT)
    return ws.close_code, message


def test_a_runner_refuses_forged_foreign_expired_and_replayed_tickets_and_says_so(runners, data_dir):
    runner = runners("r1")
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
    for why in ("no ticket", "not a ticket", "not signed with this runner's key", "for runner 'r2'",
                "an expired ticket", "already used (a replay)"):  # (its log reaches us a moment after the close)
        until(lambda: why in "".join(runner.lines), f"the runner to log {why!r}")


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
    real = runners("r2")
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


def test_a_runner_refuses_a_sandbox_asked_for_with_what_makes_no_sense(runners):
    runner = runners("r1")
    key = runner_key(SECRET, "r1")
    keys = ("../x", "A" * 32, "0" * 31, 7, ["0" * 32], "0" * 32 + "\n")  # a key to keep its home under: 32 hex digits
    for uid, settings, keep in ([(0, {}, None), (-5, {}, None), ("1000", {}, None), (True, {}, None), (None, [], None),
                                 (None, "x", None)] + [(None, {}, keep) for keep in keys]):
        code, message = asyncio.run(knock(runner.url, issue(key, "r1")[0], uid, settings, keep=keep))
        said = json.loads(message)
        assert said == {"type": "error", "message": "a sandbox is asked for with a uid, settings, and a key to keep "
                                                    "its home or none"}, (uid, settings, keep)


def test_a_runner_works_on_a_copy_of_the_home_kept_in_step_both_ways(remote_server):
    """The runner never reaches the storage: the program runs on a copy of
    ada's home that the server keeps in step, both ways."""
    client = student(remote_server, "ada")
    save(client, "data.txt", "one")
    save(client, "old.txt", "to be deleted")
    code = ("import os\nprint('read', open('data.txt').read())\n"
            "os.makedirs('out', exist_ok=True)\nopen('out/made.txt', 'w').write('made from ' + open('data.txt').read())\n"
            "os.remove('old.txt') if os.path.exists('old.txt') else None\n")
    exit_, rc = run(remote_server, client, code)
    assert exit_["reason"] == "ok" and "read one" in rc.output(), exit_
    r = client.request("GET", "/api/files/home/out/made.txt")
    assert r.status_code == 200 and r.json()["content"] == "made from one", r.text
    assert client.request("GET", "/api/files/home/old.txt").status_code == 404
    trash = client.request("GET", "/api/trash/home")
    assert trash.status_code == 200 and "old.txt" in trash.text, trash.text  # a program's delete goes to the trash, as the student's would

    save(client, "data.txt", "two")  # saved between runs: the copy has it at the next run
    exit_, rc = run(remote_server, client, code)
    assert exit_["reason"] == "ok" and "read two" in rc.output(), (exit_, rc.output())
    assert client.request("GET", "/api/files/home/out/made.txt").json()["content"] == "made from two"
    versions = client.request("GET", "/api/history/home/out/made.txt").json()["versions"]
    assert len(versions) == 1, versions  # what the first run wrote is kept as a version, as a save's would be

    # No runner setting names the storage, and a runner refuses to be given it.
    environ = open(f"/proc/{remote_server.runner.proc.pid}/environ", "rb").read().split(b"\0")
    assert not any(item.startswith(b"STORAGE_ROOT=") for item in environ)
    held = subprocess.run([sys.executable, "-m", "server.runner"], cwd=ROOT, capture_output=True, text=True,
                          env={**remote_server.runner.env, "STORAGE_ROOT": remote_server.env["DATA_DIR"]},
                          timeout=TIMEOUT)
    assert held.returncode == 2 and "must not hold STORAGE_ROOT" in held.stderr


def test_files_larger_than_a_piece_cross_both_ways_whole(remote_server):
    """A file of several 1 MiB pieces goes to the runner and another comes back, byte for byte."""
    import hashlib
    client = student(remote_server, "ada")
    data = os.urandom(5 << 19).hex()[: (5 << 20) // 2]  # 2.5 MB of text: three pieces
    save(client, "big.txt", data)
    code = ("import hashlib\ntext = open('big.txt').read()\nprint(hashlib.sha256(text.encode()).hexdigest())\n"
            "open('back.txt', 'w').write(text[::-1])\n")
    exit_, rc = run(remote_server, client, code)
    assert exit_["reason"] == "ok" and hashlib.sha256(data.encode()).hexdigest() in rc.output(), (exit_, rc.output())
    r = client.request("GET", "/api/files/home/back.txt?download=1")  # (too long for the editor's view)
    assert r.status_code == 200 and r.content == data[::-1].encode()


def test_a_file_saved_while_the_program_ran_is_kept_and_the_student_told(remote_server):
    client = student(remote_server, "ada")
    save(client, "notes.txt", "first")

    async def go():
        from loadtest.run_client import RunClient
        save(client, "main.py", "open('notes.txt', 'w').write('the program')\ninput('go on? ')\n")
        async with RunClient(remote_server.url, client.http.cookies.get_dict()) as rc:
            await rc.send(type="run", path="main.py")
            await rc.until("output", TIMEOUT)
            etag = client.request("GET", "/api/files/home/notes.txt").json()["etag"]
            r = client.request("PUT", "/api/files/home/notes.txt", data=b"the student's", headers={"If-Match": etag})
            assert r.status_code == 200, r.text
            await rc.send(type="stdin", data="\r")
            exit_ = await rc.until("exit", TIMEOUT)
            notice = await rc.until("notice", TIMEOUT)
            return exit_, notice
    exit_, notice = asyncio.run(go())
    assert exit_["reason"] == "ok", exit_
    assert notice["message"] == ("Your program changed 'notes.txt', but it was also saved while the program ran: "
                                 "the saved version is kept."), notice
    assert client.request("GET", "/api/files/home/notes.txt").json()["content"] == "the student's"
    exit_, rc = run(remote_server, client, "print(open('notes.txt').read())\n")
    assert "the student's" in rc.output(), rc.output()  # and the copy has the kept version again


def test_a_students_next_sandbox_on_a_runner_starts_with_their_copy_and_is_sent_only_what_changed(remote_server):
    """Each run here is a new connection, so a new sandbox: the runner keeps
    the copy of ada's home from the sandbox before, and the next takes it."""
    client = student(remote_server, "ada")
    for name in "abcde":
        save(client, name + ".txt", name.upper())
    code = ("import os\nprint(sorted((n, open(n).read()) for n in os.listdir('.') if n.endswith('.txt')))\n"
            "open('out.txt', 'w').write('written')\n")
    sent = lambda: metric(remote_server, "pyclassroom_runner_files_sent_total")  # noqa: E731
    adopted = lambda: metric(remote_server, "pyclassroom_runner_copies_adopted_total")  # noqa: E731

    before, taken = sent(), adopted()
    exit_, rc = run(remote_server, client, code)
    assert exit_["reason"] == "ok" and "('e.txt', 'E')" in rc.output(), (exit_, rc.output())
    home = [e for e in client.request("GET", "/api/files/home?tree=1").json()["entries"] if e["kind"] == "file"]
    assert sent() - before == len(home) - 1  # the whole home (but out.txt, which the run wrote)

    save(client, "b.txt", "B2")
    assert client.request("DELETE", "/api/files/home/c.txt").status_code in (200, 204)
    before = sent()
    exit_, rc = run(remote_server, client, code)
    assert exit_["reason"] == "ok", exit_
    assert "('a.txt', 'A'), ('b.txt', 'B2'), ('d.txt', 'D'), ('e.txt', 'E'), ('out.txt', 'written')" \
        in rc.output(), rc.output()
    assert adopted() - taken == 1
    assert sent() - before == 2  # b.txt and main.py (saved again by the test): not the others

    other = student(remote_server, "bob")  # on the same runner: his own home only
    exit_, rc = run(remote_server, other, code)
    assert exit_["reason"] == "ok" and "[]" in rc.output() and "A'" not in rc.output(), rc.output()
    assert adopted() - taken == 1


def test_a_program_reaches_no_other_home_on_a_runner(remote_server):
    bob = student(remote_server, "bob")
    save(bob, "secret.txt", "bob's secret 4711")
    exit_, _ = run(remote_server, bob, "print('bob ran')\n")
    assert exit_["reason"] == "ok"
    ada = student(remote_server, "ada")
    storage = os.path.join(remote_server.env["DATA_DIR"], "storage")
    code = ("import os\nfound = []\n"
            f"for top in ('..', '../..', '/tmp', '/home', '/root', '/srv', '/mnt', '/var', '/data', {storage!r},\n"
            f"            {remote_server.runner.env['DATA_DIR']!r}, {remote_server.env['DATA_DIR']!r}):\n"
            "    for folder, dirs, files in os.walk(os.path.abspath(top)):\n"
            "        if folder.startswith(('/proc', '/sys', '/dev', '/usr', '/etc')):\n"
            "            dirs[:] = []\n"
            "            continue\n"
            "        for name in files:\n"
            "            if not os.path.isfile(os.path.join(folder, name)):\n"
            "                continue\n"
            "            try:\n"
            "                found.append(open(os.path.join(folder, name), errors='replace').read(200))\n"
            "            except OSError:\n"
            "                pass\n"
            "print('looked', len(found), any('4711' in text for text in found))\n")
    exit_, rc = run(remote_server, ada, code)
    assert exit_["reason"] == "ok" and "looked" in rc.output() and "True" not in rc.output(), rc.output()


def test_what_a_program_leaves_in_its_copy_cannot_turn_the_runners_writes(remote_server, tmp_path):
    """Between runs a program's copy holds what it made: a link where a
    file goes, a FIFO, a file where a folder goes, folders 2,000 deep. The
    runner replaces what is in the way of what it is sent, reads back
    only regular files, and never writes through a link."""
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    os.chmod(tmp_path, 0o755)
    client = student(remote_server, "ada")
    save(client, "data.txt", "one")
    save(client, "sub/inner.txt", "inner")
    code = ("import os\n"
            f"os.remove('data.txt'); os.symlink({str(victim)!r}, 'data.txt')\n"
            "os.mkfifo('pipe.txt')\n"
            "import shutil; shutil.rmtree('sub'); open('sub', 'w').write('a file now')\n"
            "os.chdir(os.getcwd())\n"
            "for _ in range(2000):\n"
            "    os.mkdir('d'); os.chdir('d')\n"
            "print('planted', flush=True)\n")
    exit_, rc = run(remote_server, client, code)
    assert exit_["reason"] == "ok" and "planted" in rc.output(), (exit_, rc.output())
    save(client, "data.txt", "two")
    save(client, "pipe.txt", "a file")
    save(client, "sub/inner.txt", "inner again")
    exit_, rc = run(remote_server, client, "import os\nprint(open('data.txt').read(), open('pipe.txt').read(), "
                                           "open('sub/inner.txt').read(), os.path.islink('data.txt'))\n")
    assert exit_["reason"] == "ok" and "two a file inner again False" in rc.output(), (exit_, rc.output())
    assert victim.read_text() == "untouched"


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
    """The pids of the server's child runners (python -m server.runner under
    its workers). Other children come and go meanwhile (a sandbox that just
    ended is a zombie until it is reaped): they are passed over."""
    import psutil
    found = []
    for child in psutil.Process(server.proc.pid).children(recursive=True):
        try:
            if child.cmdline()[1:3] == ["-m", "server.runner"]:
                found.append(child.pid)
        except psutil.Error:  # gone, or a zombie
            continue
    return found


def lose_a_runner(start_server, runners, data_dir, students, how):
    """Two runners; `students` students run a program that waits; the
    busiest runner is lost (`how`: kill or freeze): what
    loadtest.bench_runner_loss.one_kill saw."""
    from loadtest.bench_runner_loss import one_kill
    from loadtest.harness import students as make_students
    pair = runners("r1"), runners("r2")
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


def registered(server, within=3):
    """The runners whose heartbeat the server kept in the last `within` seconds."""
    from tests.helpers import sql
    rows = sql(server.env["DATABASE_URL"],
               "SELECT id FROM runners WHERE seen > now() - make_interval(secs => %s) ORDER BY id", within)
    return [row[0] for row in rows]


def until(condition, what, timeout=TIMEOUT):
    import time
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_runners_that_register_take_the_programs_and_one_that_stops_drops_out(start_server, runners):
    """No RUNNERS: runners come and go by registering with a heartbeat
    (kept in PostgreSQL, read by every worker); a runner killed drops out
    within 3 seconds and the class's runs go to the one left."""
    server = start_server(processes=2, SANDBOX="remote", RUNNER_SECRET=SECRET, **LIMITS)
    pair = [runners(name, RUNNER_SERVER=server.url) for name in ("r1", "r2")]
    until(lambda: registered(server) == ["r1", "r2"], "both runners to register")
    clients = [student(server, f"s{i}") for i in range(4)]
    for client in clients:
        exit_, rc = run(server, client, "print('placed')\n")
        assert exit_["reason"] == "ok" and "placed" in rc.output(), exit_
    pair[0].stop()
    until(lambda: registered(server) == ["r2"], "the stopped runner to drop out", timeout=10)
    for client in clients:
        exit_, rc = run(server, client, "print('on the one left')\n")
        assert exit_["reason"] == "ok" and "on the one left" in rc.output(), exit_


def test_with_no_runner_a_run_waits_for_one_and_is_not_refused(start_server, runners):
    server = start_server(SANDBOX="remote", RUNNER_SECRET=SECRET, **LIMITS)
    client = student(server, "ada")
    save(client, "main.py", "print('ran when a runner came')\n")

    async def go():
        from loadtest.run_client import RunClient
        async with RunClient(server.url, client.http.cookies.get_dict()) as rc:
            await rc.send(type="run", path="main.py")
            await asyncio.sleep(1.5)  # no runner at all: nothing can start it yet; then one registers
            await asyncio.get_running_loop().run_in_executor(None, lambda: runners("late", RUNNER_SERVER=server.url))
            return await rc.until("exit", TIMEOUT), rc
    exit_, rc = asyncio.run(go())
    assert exit_["reason"] == "ok" and "ran when a runner came" in rc.output(), (exit_, rc.messages)
    assert not [m for m in rc.messages if m["type"] == "error"], rc.messages


def test_a_heartbeat_not_signed_by_its_runner_or_replayed_is_refused_and_logged(start_server):
    import requests
    import time
    from server.runs.sandbox.tickets import heartbeat
    server = start_server(SANDBOX="remote", RUNNER_SECRET=SECRET, RUNNERS="r1=ws://127.0.0.1:9", **LIMITS)

    def beat(token, **body):
        return requests.post(server.url + "/api/runners/heartbeat", json={"heartbeat": token, **body}, timeout=10)
    key = runner_key(SECRET, "r9")
    now = time.time_ns()
    good = heartbeat(key, "r9", "ws://127.0.0.1:9999", 4, 0, now)
    forged = heartbeat(runner_key("another-secret-of-at-least-32-characters", "r9"), "r9", "ws://evil:1", 4, 0, now)
    other = heartbeat(runner_key(SECRET, "r8"), "r9", "ws://evil:1", 4, 0, now)  # r8's key, naming r9
    ticket, _ = issue(key, "r9")  # a ticket is not a heartbeat, even with the runner's key
    stale = heartbeat(key, "r9", "ws://127.0.0.1:9999", 4, 0, now - 60 * 10**9)
    for token in (forged, other, ticket, stale, "", None, 7, "x.y"):
        r = beat(token)
        assert r.status_code == 403 and r.json()["error"] == "refused", (token, r.text)
    assert beat(good).status_code == 200
    assert registered(server) == ["r9"]
    r = beat(good)  # the same one again: a replay
    assert r.status_code == 409 and r.json()["error"] == "replayed", r.text
    older = heartbeat(key, "r9", "ws://evil:1", 4, 0, now - 1)
    assert beat(older).status_code == 409
    r = requests.post(server.url + "/api/runners/heartbeat", data=b"{not json", timeout=10,
                      headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"] == "malformed_json"
    log = server.output()
    for why in ("not signed with its key", "not a heartbeat", "too old", "not later than its last"):
        assert why in log, why


def test_a_fleets_runners_enroll_with_its_key_and_none_can_take_anothers_name(start_server, runners):
    """Runners an autoscaler starts alike hold only their fleet's key: each
    names itself, enrolls once and is given a key of its own; a member that
    was escaped from cannot enroll under a name taken, nor speak for one."""
    import requests
    from server.runs.sandbox.tickets import heartbeat
    fleet = os.urandom(32)
    server = start_server(SANDBOX="remote", RUNNER_SECRET=SECRET, RUNNER_FLEET="ecs", RUNNER_FLEET_KEY=fleet.hex(),
                          **LIMITS)
    for name in ("a", "b"):
        runners(name, RUNNER_SERVER=server.url, RUNNER_FLEET="ecs", RUNNER_FLEET_KEY=fleet.hex())
    until(lambda: len(registered(server)) == 2, "both fleet runners to enroll")
    names = registered(server)
    assert all(name.startswith("ecs-") for name in names) and len(set(names)) == 2, names
    exit_, rc = run(server, student(server, "ada"), "print('on the fleet')\n")
    assert exit_["reason"] == "ok" and "on the fleet" in rc.output(), exit_

    def beat(token):
        return requests.post(server.url + "/api/runners/heartbeat", json={"heartbeat": token}, timeout=10)
    taken = beat(heartbeat(fleet, names[0], "ws://127.0.0.1:9", 4, 0, fleet="ecs"))
    assert taken.status_code == 409 and taken.json()["error"] == "enrolled" and "key" not in taken.text, taken.text
    as_runner = beat(heartbeat(fleet, names[0], "ws://127.0.0.1:9", 4, 0))  # the fleet's key is no runner's
    assert as_runner.status_code == 403
    foreign = beat(heartbeat(fleet, "other-1", "ws://127.0.0.1:9", 4, 0, fleet="ecs"))  # not named after the fleet
    assert foreign.status_code == 403
    wrong_fleet = beat(heartbeat(fleet, "web-1", "ws://127.0.0.1:9", 4, 0, fleet="web"))
    assert wrong_fleet.status_code == 403
    assert registered(server) == names
    assert "that name is enrolled already" in server.output()
