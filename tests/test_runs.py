"""Running programs over a real WebSocket against the real server, in the
`local` (bubblewrap), `docker` and `process` sandboxes (the attacks only
where isolation is promised: local and docker). What the launcher or the
server decides, the same in every kind, runs on local only."""
import asyncio
import base64
import os
import re
import signal
import subprocess
import tempfile
import time

import pytest

from server.runs import cgroups
from loadtest.run_client import RunClient
from tests.runs_support import (LIMITS, REUSE_PROBE, no_processes_of, pids_of_uid, probe, run,
                                sandbox_uid, save, student)

# -- what a student does ------------------------------------------------------

def test_hello_world(sandbox_server):
    ada = student(sandbox_server, "ada")
    exit_, rc = run(sandbox_server, ada, 'print("Hello, world!")\n')
    assert exit_["reason"] == "ok" and exit_["code"] == 0, rc.messages
    assert rc.output("stdout") == "Hello, world!\r\n"
    assert [m["type"] for m in rc.messages][0] == "started"
    assert {m.get("re") for m in rc.messages} == {"1"}  # each answer names the `run` (the client's first message)


# Local only: prompts, input and echo are the launcher's, the same in every kind.
def test_two_inputs_with_prompts(local_server):
    ada = student(local_server, "ada")
    code = 'a = int(input("First number: "))\nb = int(input("Second number: "))\nprint("Sum:", a + b)\n'
    exit_, rc = run(local_server, ada, code, inputs=["2", "40"])
    assert exit_["reason"] == "ok"
    # Prompts, the echo of what was typed, then the answer: as in a terminal.
    assert rc.output("stdout") == "First number: 2\r\nSecond number: 40\r\nSum: 42\r\n"
    assert rc.output("stderr") == ""


# Local only: the input mark is the launcher's, the same in every kind.
def test_input_says_it_waits_after_its_prompt_with_or_without_one(local_server):
    ada = student(local_server, "ada")
    code = 'a = input("First: ")\nprint("then")\nb = input()\nprint(a + b)\n'
    answers = ["x", "y"]

    async def on(rc, message):  # answer each `input` message, and only those
        if message["type"] == "input":
            await rc.send(type="stdin", data=answers.pop(0) + "\r")
    exit_, rc = run(local_server, ada, code, on=on)
    assert exit_["reason"] == "ok", rc.messages
    kinds = [m["type"] for m in rc.messages]
    prompt = next(i for i, m in enumerate(rc.messages) if m["type"] == "output" and "First: " in m["data"])
    assert kinds.index("input") > prompt and kinds.count("input") == 2
    # Each repeats its prompt (a check leaves it out of the output it compares).
    assert [m.get("prompt") for m in rc.messages if m["type"] == "input"] == ["First: ", None]
    assert rc.output("stdout") == "First: x\r\nthen\r\ny\r\nxy\r\n"  # the mark is not shown


# Local only: the traceback is cleaned by the launcher, the same in every kind.
def test_errors_go_to_stderr_with_a_clean_traceback(local_server):
    ada = student(local_server, "ada")
    exit_, rc = run(local_server, ada, 'print("before")\nx = 1 / 0\n')
    assert exit_["reason"] == "error" and exit_["code"] == 1
    err = rc.output("stderr")
    assert "ZeroDivisionError: division by zero" in err and 'main.py", line 2' in err
    assert "launcher" not in err and "runpy" not in err
    assert rc.output("stdout") == "before\r\n"


# Local only: the exit code comes from the launcher, the advice from the server.
def test_an_error_ends_in_words_with_advice_that_fits_it(local_server):
    ada = student(local_server, "ada")
    exit_, _ = run(local_server, ada, "items = [3, 1, 2]\nprint(lenght(items))\n")
    assert exit_["reason"] == "error" and exit_["code"] == 1
    assert exit_["message"] == "stopped with an error"  # the traceback and the sentence say which
    assert "Did you mean len?" in exit_["explanation"] and "quotes" not in exit_["explanation"]
    exit_, _ = run(local_server, ada, "import sys\nsys.exit(3)\n")
    assert exit_["reason"] == "error" and exit_["code"] == 3 and "explanation" not in exit_
    assert exit_["message"] == "stopped with an error: it ended itself with the number 3, as sys.exit(3) does"


def test_tracebacks_are_what_python3_prints_suggestions_included(sandbox_server):
    ada = student(sandbox_server, "ada")
    code = 'message = "hi"\nprnt(mesage)\n'
    exit_, rc = run(sandbox_server, ada, code)
    assert exit_["reason"] == "error"
    err = rc.output("stderr").replace("\r\n", "\n")
    assert "NameError: name 'prnt' is not defined. Did you mean: 'print'?" in err
    # Under it, one plain sentence, worked out by the server from the traceback.
    assert exit_["explanation"] == ("Line 2 of main.py: Python does not know the name prnt. "
                                    "Did you mean print? Check the spelling.")
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "main.py"), "w") as f:
            f.write(code)
        python3 = subprocess.run(["/usr/bin/python3", "main.py"], capture_output=True, text=True, cwd=folder).stderr
    # The same lines as python3's own, but for where the file is.
    assert [re.sub(r'File ".*main.py"', "main.py", line) for line in err.strip().splitlines()] == \
        [re.sub(r'File ".*main.py"', "main.py", line) for line in python3.strip().splitlines()], (err, python3)


# Local only: which version runs is decided by the server before any sandbox.
def test_run_runs_the_version_the_editor_shows_or_nothing(local_server):
    ada = student(local_server, "ada")
    seen = ada.request("PUT", "/api/files/home/shown.py", data=b'print("version A")\n').json()["etag"]
    # Saved from another computer after the editor showed version A.
    other = ada.request("PUT", "/api/files/home/shown.py", data=b'print("version B from the other computer")\n',
                        headers={"If-Match": f'"{seen}"'})
    assert other.status_code == 200

    async def go(etag):
        async with RunClient(local_server.url, ada.http.cookies.get_dict()) as rc:
            return await rc.run("shown.py", etag=etag), rc

    exit_, rc = asyncio.run(go(seen))
    assert exit_["reason"] == "changed" and "changed somewhere else" in exit_["message"], rc.messages
    assert rc.output("stdout") == "" and rc.output("stderr") == ""
    exit_, rc = asyncio.run(go(other.json()["etag"]))  # the version now shown runs
    assert exit_["reason"] == "ok" and rc.output("stdout") == "version B from the other computer\r\n"
    exit_, rc = asyncio.run(go("0" * 20))  # a version that never was
    assert exit_["reason"] == "changed"

    async def refused(etag):
        async with RunClient(local_server.url, ada.http.cookies.get_dict()) as rc:
            await rc.send(type="run", path="shown.py", etag=etag)
            return await rc.until("error", 30)

    for bad in ("x" * 20, 5, "0" * 64):
        assert asyncio.run(refused(bad))["error"] == "bad_field"


# Local only: __main__ is set up by the launcher, the same in every kind.
def test_the_program_is_the_module_main_as_under_python3(local_server):
    """What `python3 main.py` gives a script: __name__, __file__, the module
    in sys.modules (pickle and dataclasses look classes up there), its
    coding cookie, a SyntaxError shown without the launcher's frames."""
    ada = student(local_server, "ada")
    code = ("# -*- coding: latin-1 -*-\nimport dataclasses, pickle, sys, __main__\n"
            "@dataclasses.dataclass\nclass P:\n    x: int\n"
            "print(__name__, __file__, sys.argv[0], __main__.P is P, pickle.loads(pickle.dumps(P(3))))\n"
            "print('caf\xe9')\n").encode("latin-1")
    exit_, rc = run(local_server, ada, code)
    assert exit_["reason"] == "ok", rc.messages
    first, second = rc.output("stdout").split("\r\n")[:2]
    name, file, argv0, same, obj = first.split(" ", 4)
    assert (name, argv0, same, obj, second) == ("__main__", "main.py", "True", "P(x=3)", "caf\u00e9"), first
    assert file.startswith("/") and file.endswith("/main.py"), file
    exit_, rc = run(local_server, ada, "print('a'\n")
    assert exit_["reason"] == "error"
    err = rc.output("stderr")
    assert 'main.py", line 1' in err and "SyntaxError" in err and "launcher" not in err, err


# Local only: Ctrl-C is a frame the launcher turns into SIGINT, the same in every kind.
def test_ctrl_c_raises_keyboard_interrupt(local_server):
    ada = student(local_server, "ada")

    async def on(rc, m):
        if m["type"] == "output" and "waiting" in m["data"]:
            await rc.send(type="interrupt")
    exit_, rc = run(local_server, ada, 'import time\nprint("waiting")\ntime.sleep(30)\n', on=on)
    assert exit_["reason"] == "interrupted"
    assert "KeyboardInterrupt" in rc.output("stderr")


def test_kill_stops_a_program_waiting_for_input(sandbox_server):
    ada = student(sandbox_server, "ada")

    async def on(rc, m):
        if m["type"] == "output" and "name?" in m["data"]:
            await rc.send(type="kill")
    exit_, _ = run(sandbox_server, ada, 'input("name? ")\n', on=on)
    assert exit_["reason"] == "killed"


# Local only: the launcher sends the image; each kind's matplotlib is in test_sandboxes.
def test_a_plot_arrives_as_an_image(local_server):
    ada = student(local_server, "ada")
    code = ("import matplotlib.pyplot as plt\nprint('plotting')\nplt.plot([1, 4, 9])\nplt.title('squares')\n"
            "plt.show()\nprint('done')\n")
    exit_, rc = run(local_server, ada, code, timeout=60)
    assert exit_["reason"] == "ok", rc.messages
    kinds = [m["type"] for m in rc.messages]
    image = next(m for m in rc.messages if m["type"] == "image")
    assert image["mime"] == "image/png"
    assert base64.b64decode(image["data"]).startswith(b"\x89PNG\r\n\x1a\n")
    # In order: the text before the plot, the plot, the text after.
    assert kinds.index("image") > kinds.index("output")
    assert rc.output("stdout").endswith("done\r\n")


# Local only: the launcher's savefig hook; each kind writing the home is in test_programs_read_and_write_*.
def test_savefig_also_shows_the_figure_and_writes_the_file(local_server):
    ada = student(local_server, "ada")
    code = "import matplotlib.pyplot as plt\nplt.bar([1, 2], [3, 4])\nplt.savefig('chart.png')\n"
    exit_, rc = run(local_server, ada, code, timeout=60)
    assert exit_["reason"] == "ok", rc.messages
    assert any(m["type"] == "image" for m in rc.messages)
    assert ada.get("/api/files/home/chart.png?download=1").content.startswith(b"\x89PNG")


def test_programs_read_and_write_their_own_data_files(sandbox_server):
    ada = student(sandbox_server, "ada")
    save(ada, "data/numbers.txt", "1 2 3\n")
    code = ("nums = open('data/numbers.txt').read().split()\n"
            "open('data/total.txt', 'w').write(str(sum(map(int, nums))))\nprint('ok')\n")
    exit_, rc = run(sandbox_server, ada, code)
    assert exit_["reason"] == "ok", rc.messages
    assert ada.get("/api/files/home/data/total.txt").json()["content"] == "6"
    # The file the program wrote can be saved over from the editor, and vice versa.
    etag = ada.get("/api/files/home/data/total.txt").json()["etag"]
    r = ada.request("PUT", "/api/files/home/data/total.txt", data=b"7", headers={"If-Match": f'"{etag}"'})
    assert r.status_code == 200
    exit_, _ = run(sandbox_server, ada, "open('data/total.txt', 'a').write('0')\n", path="append.py")
    assert exit_["reason"] == "ok"
    assert ada.get("/api/files/home/data/total.txt").json()["content"] == "70"


# -- limits -------------------------------------------------------------------

def test_infinite_loop_hits_the_cpu_limit(sandbox_server):
    ada = student(sandbox_server, "ada")
    # A hang guard past RUN_WALL_SECONDS (60): the loop runs at idle CPU priority,
    # and on a machine busy with other work its 2 s of CPU take long to come.
    exit_, _ = run(sandbox_server, ada, "while True:\n    pass\n", timeout=90)
    assert exit_["reason"] == "cpu_limit" and "busy for more than" in exit_["message"] and "loop" in exit_["message"]


def test_waiting_for_input_is_not_charged_cpu_but_idle_runs_end(start_server):
    server = start_server(SANDBOX="local", RUN_CPU_SECONDS=1, RUN_IDLE_SECONDS=3)
    ada = student(server, "ada")
    exit_, _ = run(server, ada, 'input("? ")\n')
    assert exit_["reason"] == "timeout" and "nothing was printed or typed for 3 seconds" in exit_["message"]
    assert exit_["duration"] >= 3


def test_memory_bomb_hits_the_memory_limit(sandbox_server):
    ada = student(sandbox_server, "ada")
    exit_, rc = run(sandbox_server, ada, "blocks = []\nwhile True:\n    blocks.append(bytearray(10 ** 7))\n")
    assert exit_["reason"] == "memory_limit", rc.messages
    assert "300 MB" in exit_["message"]


def test_output_flood_hits_the_output_limit(sandbox_server):
    ada = student(sandbox_server, "ada")
    exit_, rc = run(sandbox_server, ada, "while True:\n    print('x' * 100)\n")
    assert exit_["reason"] == "output_limit"
    assert len(rc.output()) <= (512 << 10) + (64 << 10)


def test_a_huge_single_line_arrives_whole(start_server):
    server = start_server(SANDBOX="local", RUN_OUTPUT_KB=8192)
    ada = student(server, "ada")
    exit_, rc = run(server, ada, "print('y' * 3_000_000)\nprint('end')\n", timeout=60)
    assert exit_["reason"] == "ok"
    out = rc.output("stdout")
    assert out == "y" * 3_000_000 + "\r\nend\r\n"
    assert max(len(m.get("data", "")) for m in rc.messages) < 3_000_000  # sent in pieces


def test_fork_bomb_is_contained_and_another_students_run_still_works(isolated_server):
    local_server = isolated_server
    ada = student(local_server, "ada")
    bob = student(local_server, "bob")
    save(ada, "bomb.py", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n")
    save(bob, "hello.py", "print('bob is fine')\n")

    async def go():
        async with RunClient(local_server.url, ada.http.cookies.get_dict()) as bomb, \
                RunClient(local_server.url, bob.http.cookies.get_dict()) as fine:
            await bomb.send(type="run", path="bomb.py")
            await bomb.until("started")
            await asyncio.sleep(1.0)
            bob_exit = await fine.run("hello.py", timeout=30)
            await bomb.send(type="kill")
            bomb_exit = await bomb.until("exit", 30)
            return bob_exit, fine.output(), bomb_exit
    bob_exit, bob_out, bomb_exit = asyncio.run(go())
    assert bob_exit["reason"] == "ok" and bob_out == "bob is fine\r\n"
    assert bomb_exit["reason"] in ("killed", "cpu_limit")
    assert no_processes_of(local_server, ada.username)


# -- attacks that must fail ------------------------------------------------------

def test_attacks_from_student_code_fail(isolated_server):
    server = isolated_server
    data_dir = server.env["DATA_DIR"]
    storage = os.path.join(data_dir, "storage")
    bob = student(server, "bob")
    save(bob, "secret.py", "ANSWER = 'bob-secret-42'\n")
    ada = student(server, "ada")
    port = int(server.url.rsplit(":", 1)[1])
    code = f'''
import os, socket, signal
def attempt(name, fn):
    try:
        result = fn()
        print(name, "SUCCEEDED", repr(result)[:80])
    except Exception as e:
        print(name, "failed", type(e).__name__)
attempt("read-other-home", lambda: open({os.path.join(storage, "home", bob.username, "secret.py")!r}).read())
attempt("read-other-home-relative", lambda: open("../{bob.username}/secret.py").read())
attempt("list-homes", lambda: os.listdir({os.path.join(storage, "home")!r}))
attempt("write-outside", lambda: open("/usr/pwned", "w").write("x"))
attempt("write-etc", lambda: open("/etc/pwned", "w").write("x"))
attempt("write-data-dir", lambda: open({os.path.join(data_dir, "pwned")!r}, "w").write("x"))
attempt("read-cookie-secret", lambda: open({os.path.join(data_dir, "secrets", "cookie_secret")!r}).read())
attempt("read-database", lambda: os.listdir({os.path.join(data_dir, "postgres")!r}))
attempt("read-root", lambda: os.listdir("/root"))
attempt("network-server", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=2))
attempt("network-outside", lambda: socket.create_connection(("1.1.1.1", 53), timeout=2))
attempt("docker-socket", lambda: open("/var/run/docker.sock", "rb"))
attempt("signal-server", lambda: os.kill({server.proc.pid}, signal.SIGKILL))
attempt("signal-init", lambda: os.kill(1, 0) or os.readlink("/proc/1/exe"))
print("secret-in-env", any("secret" in v.lower() or "postgres" in v for v in os.environ.values()))
print("env-keys", sorted(os.environ))
'''
    exit_, rc = run(server, ada, code)
    out = rc.output()
    assert exit_["reason"] == "ok", rc.messages
    assert "SUCCEEDED" not in out.replace("signal-init SUCCEEDED", ""), out
    assert "bob-secret-42" not in out and server.env["COOKIE_SECRET"] not in out
    assert "secret-in-env False" in out
    env_keys = re.search(r"env-keys (\[.*\])", out).group(1)
    for name in ("COOKIE_SECRET", "DATABASE_URL", "ADMIN_PASSWORD", "DATA_DIR", "STORAGE_ROOT"):
        assert name not in env_keys
    # Nothing was written outside, and the server is alive and well.
    assert not os.path.exists(os.path.join(data_dir, "pwned")) and not os.path.exists("/etc/pwned")
    assert server.proc.poll() is None and server.client().get("/healthz").status_code == 200


def test_a_program_cannot_signal_anything_outside_its_sandbox(isolated_server):
    local_server = isolated_server
    ada = student(local_server, "ada")
    victim = subprocess.Popen(["sleep", "60"])
    try:
        code = "import os, signal\nos.kill(-1, signal.SIGKILL)\n"
        exit_, _ = run(local_server, ada, code)
        assert exit_["reason"] in ("error", "killed", "ok")
        assert victim.poll() is None, "a process outside the sandbox was killed"
        assert local_server.proc.poll() is None
        assert local_server.client().get("/healthz").status_code == 200
    finally:
        victim.kill()


def test_process_sandbox_warns_loudly_that_it_isolates_nothing(shared_servers):
    server = shared_servers.get(SANDBOX="process", **LIMITS)  # sandbox_server's: it says so as it starts
    assert "student code is NOT isolated" in server.output()


# -- many students ---------------------------------------------------------------

def test_twenty_students_at_once_each_see_only_their_own_output_in_order(start_server):
    server = start_server(processes=2, SANDBOX="local", RUN_MAX_CONCURRENT=40)
    names = [f"s{i:02d}" for i in range(20)]
    clients = {n: student(server, n) for n in names}
    code = "import sys\nname = sys.argv[1]\nfor i in range(200):\n    print(name, i)\n"
    for n in names:
        save(clients[n], "count.py", code)

    async def one(name):
        async with RunClient(server.url, clients[name].http.cookies.get_dict()) as rc:
            exit_ = await rc.run("count.py", timeout=60, args=[name])
            return exit_, rc.output("stdout")
    async def everyone():
        return await asyncio.gather(*(one(n) for n in names))
    for name, (exit_, out) in zip(names, asyncio.run(everyone())):
        assert exit_["reason"] == "ok"
        assert out == "".join(f"{name} {i}\r\n" for i in range(200))


def test_a_class_opening_at_once_runs_every_program_in_a_lowered_cpu_group(start_server):
    """The kernel lets an unprivileged process lower its group once per
    100 ms machine-wide: 40 sandboxes starting together would need 4 s, and
    run at the server's weight meanwhile. A root server ranks them itself."""
    if os.geteuid() != 0:
        pytest.skip("needs root: otherwise each sandbox lowers its own group, rate-limited")
    # Each worker gets half of RUN_MAX_CONCURRENT, and a burst of sockets may
    # all land on one worker (it accepts many at each wake-up): room for all
    # 40 on either, or the last ones queue behind programs waiting for input.
    server = start_server(processes=2, SANDBOX="local", SANDBOX_CPU="idle", RUN_MAX_CONCURRENT=80)
    names = [f"g{i:02d}" for i in range(40)]
    clients = {n: student(server, n) for n in names}
    for n in names:
        save(clients[n], "wait.py", "input('waiting')\n")
    waiting, inspected = asyncio.Event(), asyncio.Event()
    count = [0]

    async def one(name):
        async with RunClient(server.url, clients[name].http.cookies.get_dict()) as rc:
            await rc.send(type="run", path="wait.py")
            await rc.until("output", 60)
            count[0] += 1
            if count[0] == len(names):
                waiting.set()
            await inspected.wait()
            await rc.send(type="stdin", data="\r")
            return await rc.until("exit", 60)
    def ranks():
        return {n: set(_ranks_of(sandbox_uid(server, clients[n].username)).values()) for n in names}
    async def inspect():
        await waiting.wait()  # every program is running: see where the kernel ranks each
        try:
            return await asyncio.to_thread(ranks)  # the sockets keep answering pings meanwhile
        finally:
            inspected.set()
    async def everyone():
        return await asyncio.gather(*(one(n) for n in names), asyncio.wait_for(inspect(), 120))
    *exits, ranked = asyncio.run(everyone())
    assert [e["reason"] for e in exits] == ["ok"] * len(names)
    assert ranked == {n: {EXPECTED_RANK} for n in names}


@pytest.mark.parametrize("processes", [1, 2])
def test_beyond_the_limit_runs_queue_with_positions_and_all_finish(start_server, processes):
    server = start_server(processes=processes, SANDBOX="local", RUN_MAX_CONCURRENT=4, RUN_QUEUE_MAX=50)
    names = [f"q{i}" for i in range(10)]
    clients = {n: student(server, n) for n in names}
    for n in names:
        save(clients[n], "slow.py", "import time\ntime.sleep(0.8)\nprint('finished')\n")

    async def one(name, delay):
        await asyncio.sleep(delay)
        async with RunClient(server.url, clients[name].http.cookies.get_dict()) as rc:
            exit_ = await rc.run("slow.py", timeout=60)
            return exit_, rc.messages
    async def everyone():
        return await asyncio.gather(*(one(n, i * 0.05) for i, n in enumerate(names)))
    results = asyncio.run(everyone())
    assert all(exit_["reason"] == "ok" for exit_, _ in results)
    positions = [m["position"] for _, msgs in results for m in msgs if m["type"] == "queued"]
    assert positions, "with 10 runs and a limit of 4 some must have waited"
    assert min(positions) == 1
    for _, msgs in results:  # a waiting run only moves forward, in each line (a sandbox's start, a place)
        for line in ("start", "run"):
            mine = [m["position"] for m in msgs if m["type"] == "queued" and m["line"] == line]
            assert mine == sorted(mine, reverse=True), line


def test_one_run_per_student_across_tabs_and_workers(two_workers_server):
    server = two_workers_server
    ada = student(server, "ada")
    save(ada, "wait.py", "input('waiting ')\n")
    save(ada, "other.py", "print('second')\n")

    async def go():
        cookies = ada.http.cookies.get_dict()
        async with RunClient(server.url, cookies) as tab1:
            await tab1.send(type="run", path="wait.py")
            await tab1.until("started")
            answers = []
            for _ in range(4):  # new connections: some land on the other worker
                async with RunClient(server.url, cookies) as tab2:
                    await tab2.send(type="run", path="other.py")
                    answers.append(await tab2.until("error"))
            await tab1.send(type="kill")
            await tab1.until("exit")
            async with RunClient(server.url, cookies) as tab3:
                after = await tab3.run("other.py")
            return answers, after
    answers, after = asyncio.run(go())
    assert all(a["error"] == "already_running" for a in answers)
    assert after["reason"] == "ok"


# -- the socket itself -----------------------------------------------------------

def test_closing_the_socket_kills_the_program_and_leaves_no_process(isolated_server):
    local_server = isolated_server
    ada = student(local_server, "ada")
    save(ada, "forever.py", "import subprocess, time\nsubprocess.Popen(['sleep', '300'])\n"
                            "print('started', flush=True)\ntime.sleep(300)\n")

    async def go():
        async with RunClient(local_server.url, ada.http.cookies.get_dict()) as rc:
            await rc.send(type="run", path="forever.py")
            await rc.until("output")
    asyncio.run(go())
    assert no_processes_of(local_server, ada.username)


def test_sigterm_ends_every_run_with_server_restart(start_server):
    server = start_server(processes=2, SANDBOX="local")
    names = ["r1", "r2", "r3"]
    clients = {n: student(server, n) for n in names}
    for n in names:
        save(clients[n], "loop.py", "import time\nprint('up', flush=True)\ntime.sleep(300)\n")

    async def everyone():
        running = asyncio.Semaphore(0)

        async def one(name):
            async with RunClient(server.url, clients[name].http.cookies.get_dict()) as rc:
                await rc.send(type="run", path="loop.py")
                await rc.until("output", 60)
                running.release()
                exit_ = await rc.until("exit", 30)
                closing = await rc.ws.receive(timeout=10)
                return exit_, closing
        tasks = [asyncio.ensure_future(one(n)) for n in names]
        for _ in names:
            await asyncio.wait_for(running.acquire(), 90)
        server.signal(signal.SIGTERM)
        return await asyncio.gather(*tasks)
    for exit_, closing in asyncio.run(everyone()):
        assert exit_["reason"] == "server_restart" and "restarting" in exit_["message"]
        assert closing.data == 1012 and closing.extra == "server restarting"
    assert server.proc.wait(30) == 0
    for n in names:
        assert no_processes_of(server, clients[n].username)


def test_a_run_waiting_for_its_turn_at_sigterm_is_refused_not_started(start_server):
    server = start_server(SANDBOX="local", RUN_MAX_CONCURRENT=1)
    first, second = student(server, "t1"), student(server, "t2")
    for who in (first, second):
        save(who, "loop.py", "import time\nprint('up', flush=True)\ntime.sleep(300)\n")

    async def story():
        async with RunClient(server.url, first.http.cookies.get_dict()) as running, \
                RunClient(server.url, second.http.cookies.get_dict()) as waiting:
            await running.send(type="run", path="loop.py")
            await running.until("output", 60)
            await waiting.send(type="run", path="loop.py")
            await waiting.until("queued", 60)
            server.signal(signal.SIGTERM)
            return await running.until("exit", 30), await waiting.until("error", 30), waiting
    exit_, refused, waiting = asyncio.run(story())
    assert exit_["reason"] == "server_restart"
    # The place the stopped run gave back did not start the waiting program.
    assert refused["error"] == "server_restart"
    assert not [m for m in waiting.messages if m["type"] in ("started", "output")], waiting.messages
    assert server.proc.wait(30) == 0
    assert no_processes_of(server, second.username)


# Where a root server puts student code: an idle CPU group (each sandbox's
# cgroup under one marked idle) where the machine has one, else an autogroup
# at the lowest nice; with SANDBOX_CPU=low, a group of the sandboxes' own
# at one program's weight.
_GROUPS = cgroups.Groups.detect()
EXPECTED_RANK = "idle group" if _GROUPS and _GROUPS.idle else "nice 19"


def expected_rank(server):
    if _GROUPS and server.env.get("SANDBOX_CPU") == "low":
        return "low group"
    return EXPECTED_RANK


def _cpu_rank(pid):
    """"idle group" if `pid` is in a cgroup under one marked idle, else the
    nice of its autogroup ("nice 19"), as the kernel ranks it; None if the
    process is gone."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            cpu_path = next((line.split(":", 2)[2].strip() for line in f
                             if "cpu" in line.split(":")[1].split(",")), "")
        root = os.path.join("/sys/fs/cgroup/cpu", cpu_path.lstrip("/"))
        while root.startswith("/sys/fs/cgroup/cpu/"):
            if os.path.basename(root) == cgroups.priority("low")["parent"]:
                return "low group"
            try:
                with open(os.path.join(root, "cpu.idle")) as f:
                    if f.read().strip() == "1":
                        return "idle group"
            except FileNotFoundError:
                pass
            root = os.path.dirname(root)
        with open(f"/proc/{pid}/autogroup") as f:
            return f.read().strip().split(" ", 1)[-1]
    except (FileNotFoundError, ProcessLookupError):  # gone meanwhile
        return None


def _ranks_of(uid):
    """{pid: rank} of the student code running as `uid`: the launcher and
    the program it forked (bubblewrap's own short-lived helpers aside)."""
    found = {}
    for pid in pids_of_uid(uid):
        try:
            with open(f"/proc/{pid}/cmdline") as f:
                argv = f.read().split("\0")
            if argv[0].endswith("bwrap") or not any(a.startswith('"""The launcher') for a in argv):
                continue
        except (FileNotFoundError, ProcessLookupError):  # gone meanwhile
            continue
        rank = _cpu_rank(pid)
        if rank:
            found[pid] = rank
    return found


def test_admin_status_counts_open_ides_and_running_programs(start_server):
    from loadtest.harness import ADMIN_PASSWORD
    local_server = start_server(SANDBOX="local", **LIMITS)  # its own: it counts everyone's
    ada = student(local_server, "ada")
    save(ada, "wait.py", "input('waiting ')\n")
    admin = local_server.client()
    admin.login_ok("admin", ADMIN_PASSWORD)

    async def go():
        async with RunClient(local_server.url, ada.http.cookies.get_dict()) as rc:
            await rc.send(type="run", path="wait.py")
            await rc.until("output")
            during = admin.get("/api/status").json()["runs"]
            await rc.send(type="kill")
            await rc.until("exit")
            return during
    during = asyncio.run(go())
    assert during == {"active_runs": 1, "queued_runs": 0, "connected_ides": 1}
    deadline = time.monotonic() + 5
    while admin.get("/api/status").json()["runs"]["connected_ides"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert admin.get("/api/status").json()["runs"] == {"active_runs": 0, "queued_runs": 0, "connected_ides": 0}


def test_student_code_runs_at_a_lower_priority_than_the_server(sandbox_server):
    ada = student(sandbox_server, "ada")
    kind = sandbox_server.env["SANDBOX"]
    seen = {}

    async def on(rc, message):
        if message["type"] == "output" and "waiting" in message["data"] and not seen:
            if kind != "docker" and os.geteuid() == 0:  # look from outside, as the kernel sees it
                seen.update(_ranks_of(sandbox_uid(sandbox_server, ada.username)))
            await rc.send(type="stdin", data="\r")
    # Each sandbox is its own scheduling group (a container its own cgroup):
    # the group is lowered too, or 60 busy loops would get 60 shares of the
    # CPU to the server's one.
    # (The local sandbox has no /proc: its rank is seen from outside.)
    group = "/sys/fs/cgroup/cpu/cpu.shares" if kind == "docker" else "/proc/self/autogroup"
    exit_, rc = run(sandbox_server, ada, "import os\nprint('nice', os.nice(0))\n"
                                         f"try:\n    print(open({group!r}).read().strip())\n"
                                         "except OSError:\n    print('not visible')\n"
                                         "input('waiting')\n", on=on)
    assert exit_["reason"] == "ok", rc.messages
    nice, weight = rc.output("stdout").splitlines()[:2]
    assert nice == "nice 10"
    if kind == "docker":
        assert int(weight) < 1024  # the default weight of a cgroup
    elif os.geteuid() != 0:
        assert weight.endswith("nice 19") or kind == "local"  # the launcher lowered its own group
    else:  # the launcher and the program: in the idle group where there is one
        assert list(seen.values()) == [expected_rank(sandbox_server)] * 2, seen


def test_run_again_right_after_exit_is_not_refused(sandbox_server):
    ada = student(sandbox_server, "ada")
    save(ada, "quick.py", "print('quick')\n")

    async def go():
        async with RunClient(sandbox_server.url, ada.http.cookies.get_dict()) as rc:
            exits = []
            for _ in range(5):  # as fast as a student double-clicking Run
                exits.append(await rc.run("quick.py"))
            return exits
    assert [e["reason"] for e in asyncio.run(go())] == ["ok"] * 5


# -- a sandbox serving several runs -------------------------------------------------

def test_a_reused_sandbox_starts_every_run_clean(isolated_server):
    """Runs share a sandbox (its /tmp shows it), but each is a fresh
    interpreter and nothing a run started outlives it; a stopped run's
    sandbox is never reused."""
    ada = student(isolated_server, "ada")
    save(ada, "probe.py", REUSE_PROBE)

    async def go():
        async with RunClient(isolated_server.url, ada.http.cookies.get_dict()) as rc:
            first = await probe(rc, "leave-a-process")
            second = await probe(rc)
            await rc.send(type="run", path="probe.py", args=["wait"])
            await rc.until("output", 60)
            await rc.send(type="kill")
            killed = await rc.until("exit", 60)
            after_kill = await probe(rc)
            return first, second, killed, after_kill
    first, second, killed, after_kill = asyncio.run(go())
    assert first == ({**first[0], "reason": "ok"}, "run 1 interpreter state from before: False other processes: []")
    assert second == ({**second[0], "reason": "ok"}, "run 2 interpreter state from before: False other processes: []")
    assert killed["reason"] == "killed"
    assert after_kill[1] == "run 1 interpreter state from before: False other processes: []"


def test_a_sandbox_is_replaced_after_its_runs(start_server):
    server = start_server(SANDBOX="local", RUN_SANDBOX_RUNS=2, **LIMITS)
    ada = student(server, "ada")
    save(ada, "probe.py", REUSE_PROBE)

    async def go():
        async with RunClient(server.url, ada.http.cookies.get_dict()) as rc:
            return [(await probe(rc))[1].split(" interpreter")[0] for _ in range(5)]
    assert asyncio.run(go()) == ["run 1", "run 2", "run 1", "run 2", "run 1"]
