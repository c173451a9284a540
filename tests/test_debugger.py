"""The debugger for beginners over the real WebSocket, against the real
server: `debug` a saved program, step over, into and out, breakpoints,
input(), plots and Ctrl-C while debugging (on local: the debugger is the
launcher's, the same in every kind), stop while paused and two runs in a
row (every sandbox kind); a paused program's place among the running
programs, given back and taken again; and the attacks of a program that is
debugged (on docker too where the kind decides: floods, CPU while paused)."""
import asyncio
import base64
import contextlib

import pytest

from loadtest.run_client import RunClient
from tests.conftest import _shared
from tests.runs_support import LIMITS, save, student

TIMEOUT = 60


def debugging(server, client, files, steps, path="main.py", breakpoints=None, watches=None):
    """Save `files` ({name: code}), debug `path` (with `watches`), and let `steps(rc, pause)`
    (async) drive it: it is called with the first pause and returns what the
    test needs. (its result, the RunClient)."""
    for name, code in files.items():
        save(client, name, code)

    async def go():
        async with RunClient(server.url, client.http.cookies.get_dict()) as rc:
            asked = await rc.send(type="debug", path=path, breakpoints=breakpoints or {}, watches=watches or [])
            first = await next_stop(rc)
            assert first["type"] == "paused" and first["re"] == asked, rc.messages
            return await steps(rc, first), rc
    return asyncio.run(go())


async def next_stop(rc, timeout=TIMEOUT):
    """The next `paused` or `exit` message (errors fail the test)."""
    while True:
        message = await rc.receive(timeout)
        assert message["type"] != "error", message
        if message["type"] in ("paused", "exit"):
            return message


async def command(rc, kind, **fields):
    """Send a command; the next stop (a pause names the command, an exit the `debug`)."""
    sent = await rc.send(type=kind, **fields)
    stop = await next_stop(rc)
    assert (stop["re"] == sent) == (stop["type"] == "paused"), (sent, stop)
    return stop


def variable(pause, name, scope="variables"):
    return next((v for v in pause.get(scope, []) if v["name"] == name), None)


# -- what a student does --------------------------------------------------------------

LOOP = "total = 0\nfor i in range(3):\n    total += i\nprint('total', total)\n"


# Local only: stepping is the launcher's debugger, the same in every kind.
def test_stepping_over_a_loop_shows_i_change(local_server):
    ada = student(local_server, "ada")

    async def steps(rc, pause):
        seen = []
        while pause["type"] == "paused":
            assert pause["file"] == "main.py" and [f["function"] for f in pause["stack"]] == ["<module>"]
            i = variable(pause, "i")
            seen.append((pause["line"], i and i["value"], bool(i and i.get("changed"))))
            pause = await command(rc, "step")
        return seen, pause
    (seen, exit_), rc = debugging(local_server, ada, {"main.py": LOOP}, steps)
    assert seen[0] == (1, None, False)  # paused at the first line, before anything ran
    # i is marked as changed on the step that changes it, and only then.
    assert [(v, changed) for line, v, changed in seen if line == 3] == [("0", True), ("1", True), ("2", True)]
    assert (4, "2", False) in seen
    assert exit_["reason"] == "ok" and rc.output("stdout") == "total 3\r\n"


# Local only: stepping is the launcher's debugger, the same in every kind.
def test_stepping_into_a_function_of_another_file_and_out(local_server):
    ada = student(local_server, "ada")
    files = {"helper.py": "def double(x):\n    y = x * 2\n    return y\n",
             "main.py": "from helper import double\nn = double(21)\nprint(n)\n"}

    async def steps(rc, pause):
        pause = await command(rc, "step")  # over the import: not into helper's module
        assert (pause["file"], pause["line"]) == ("main.py", 2)
        inside = await command(rc, "step_in")
        picked = await command(rc, "frame", frame=0)  # the caller's variables, while paused
        out = await command(rc, "step_out")
        end = await command(rc, "continue")
        return inside, picked, out, end
    (inside, picked, out, end), rc = debugging(local_server, ada, files, steps)
    assert (inside["file"], inside["line"]) == ("helper.py", 2)
    assert [(f["function"], f["file"], f["line"]) for f in inside["stack"]] == [
        ("<module>", "main.py", 2), ("double", "helper.py", 2)]
    assert variable(inside, "x")["value"] == "21" and variable(inside, "y") is None
    assert variable(inside, "double", "globals")["value"] == "function double(x)"  # helper's globals
    assert inside["frame"] == 1
    assert picked["frame"] == 0 and variable(picked, "double")["type"] == "function"
    assert (out["file"], len(out["stack"])) == ("main.py", 1) and variable(out, "n")["value"] == "42"
    assert end["reason"] == "ok" and rc.output("stdout") == "42\r\n"


# Local only: breakpoints are the launcher's debugger, the same in every kind.
def test_a_breakpoint_in_a_loop_stops_at_each_iteration(local_server):
    ada = student(local_server, "ada")

    async def steps(rc, pause):
        stops = []
        pause = await command(rc, "continue")
        while pause["type"] == "paused":
            stops.append((pause["line"], variable(pause, "i")["value"]))
            pause = await command(rc, "continue")
        return stops, pause
    (stops, end), rc = debugging(local_server, ada, {"main.py": LOOP}, steps, breakpoints={"main.py": [3]})
    assert stops == [(3, "0"), (3, "1"), (3, "2")] and end["reason"] == "ok"


# Local only: breakpoints are the launcher's debugger, the same in every kind.
def test_breakpoints_change_while_paused(local_server):
    ada = student(local_server, "ada")

    async def steps(rc, pause):
        await rc.send(type="breakpoints", breakpoints={"main.py": [4]})  # taken with the next command
        at = await command(rc, "continue")
        return at, await command(rc, "continue")
    (at, end), rc = debugging(local_server, ada, {"main.py": LOOP}, steps, breakpoints={"main.py": [3]})
    assert at["line"] == 4 and variable(at, "total")["value"] == "3" and end["reason"] == "ok"


# Local only: breakpoints are the launcher's debugger, the same in every kind.
def test_a_breakpoint_set_while_it_runs_stops_it(local_server):
    ada = student(local_server, "ada")
    code = "import time\nn = 0\nwhile n < 1000:\n    n += 1\n    time.sleep(0.01)\nprint('n', n)\n"

    async def steps(rc, pause):
        await rc.send(type="continue")  # no breakpoint: it runs untraced
        await asyncio.sleep(0.3)
        await rc.send(type="breakpoints", breakpoints={"main.py": [4]})
        at = await next_stop(rc)
        await rc.send(type="breakpoints", breakpoints={})
        return at, await command(rc, "continue")
    (at, end), rc = debugging(local_server, ada, {"main.py": code}, steps)
    assert at["type"] == "paused" and at["line"] == 4 and 0 < int(variable(at, "n")["value"]) < 1000
    assert end["reason"] == "ok" and rc.output("stdout") == "n 1000\r\n"


# Local only: watches are the launcher's debugger, the same in every kind.
def test_watch_expressions(local_server):
    ada = student(local_server, "ada")
    for name, code in {"main.py": LOOP}.items():
        save(ada, name, code)

    async def go():
        async with RunClient(local_server.url, ada.http.cookies.get_dict()) as rc:
            await rc.send(type="debug", path="main.py", watches=["total * 10", "nope", "exit()"])
            pause = await next_stop(rc)
            for _ in range(2):
                pause = await command(rc, "step")
            now = await command(rc, "watches", watches=["i + 100"])  # while paused: shown at once
            return pause, now, await command(rc, "continue"), rc
    pause, now, end, rc = asyncio.run(go())
    assert pause["line"] == 3
    assert [(w["name"], w["type"], w["value"]) for w in pause["watches"]] == [
        ("total * 10", "int", "0"), ("nope", "error", "NameError: name 'nope' is not defined"),
        ("exit()", "error", "SystemExit: None")]
    assert now["line"] == 3 and now["watches"] == [{"name": "i + 100", "type": "int", "value": "100"}]
    assert end["reason"] == "ok" and rc.output("stdout") == "total 3\r\n"


# Local only: values are shown by the launcher's debugger, the same in every kind.
def test_values_show_as_a_beginner_reads_them(local_server):
    ada = student(local_server, "ada")
    code = ("class Dog:\n    def __init__(self, name):\n        self.name = name\n\n"
            "pets = [Dog('Rex'), Dog('<img src=x onerror=alert(1)>')]\nages = {'Rex': 3}\n"
            "big = list(range(10000))\ntext = 'x' * 100000\nprint('ok')\n")

    async def steps(rc, pause):
        for _ in range(5):
            pause = await command(rc, "step")
        return pause
    pause, rc = debugging(local_server, ada, {"main.py": code}, steps)
    assert pause["line"] == 9
    pets = variable(pause, "pets")
    assert pets["type"] == "list" and [p["type"] for p in pets["items"]] == ["Dog", "Dog"]
    assert pets["items"][1]["items"] == [{"name": "name", "type": "str", "value": "'<img src=x onerror=alert(1)>'"}]
    assert variable(pause, "ages")["items"][0] == {"name": "'Rex'", "type": "int", "value": "3"}
    big = variable(pause, "big")
    assert len(big["items"]) < 100 and big["more"] == 10000 - len(big["items"])
    assert len(variable(pause, "text")["value"]) <= 300


# Local only: input crosses in the launcher's frames, the same in every kind.
def test_input_works_while_debugging(local_server):
    ada = student(local_server, "ada")
    code = "name = input('Name? ')\nprint('Hello', name)\n"

    async def steps(rc, pause):
        await rc.send(type="step")
        await rc.until("input", TIMEOUT)  # the step runs input(): the console is the program's terminal
        await rc.send(type="stdin", data="Ada\r")
        after = await next_stop(rc)
        return after, await command(rc, "continue")
    (after, end), rc = debugging(local_server, ada, {"main.py": code}, steps)
    assert after["line"] == 2 and variable(after, "name") == {"name": "name", "type": "str", "value": "'Ada'",
                                                              "changed": True}
    assert end["reason"] == "ok" and rc.output("stdout") == "Name? Ada\r\nHello Ada\r\n"


def test_stop_and_ctrl_c_while_paused(sandbox_server):
    ada = student(sandbox_server, "ada")

    async def stop(rc, pause):
        await rc.send(type="kill")
        return await next_stop(rc)

    async def interrupt(rc, pause):
        await rc.send(type="interrupt")
        return await next_stop(rc)
    stopped, _ = debugging(sandbox_server, ada, {"main.py": LOOP}, stop)
    assert stopped["reason"] == "killed"
    interrupted, rc = debugging(sandbox_server, ada, {"main.py": LOOP}, interrupt)
    assert interrupted["reason"] == "interrupted" and "KeyboardInterrupt" in rc.output("stderr")


# Local only: the traceback is the launcher's, the same in every kind.
def test_an_error_shows_as_in_a_run(local_server):
    ada = student(local_server, "ada")

    async def steps(rc, pause):
        return await command(rc, "continue")
    end, rc = debugging(local_server, ada, {"main.py": "x = 0\ny = 1 / x\n"}, steps)
    err = rc.output("stderr")
    assert end["reason"] == "error" and "ZeroDivisionError" in err and 'main.py", line 2' in err
    assert "debugging" not in err and "bdb" not in err and "launcher" not in err
    assert "Line 2 of main.py" in end["explanation"]


# Local only: stepping is the launcher's debugger, the same in every kind.
def test_never_steps_into_the_standard_library(local_server):
    ada = student(local_server, "ada")
    code = ("import random, json, collections\nrandom.seed(3)\nx = random.randint(1, 6)\n"
            "y = json.dumps(sorted([3, 1, 2], key=lambda v: -v))\nz = collections.Counter('hello')\nprint(y)\n")

    async def steps(rc, pause):
        places = []
        while pause["type"] == "paused":
            places.append((pause["file"], pause["line"], [f["file"] for f in pause["stack"]]))
            pause = await command(rc, "step_in")
        return places, pause
    (places, end), rc = debugging(local_server, ada, {"main.py": code}, steps)
    assert all(file == "main.py" and set(stack) == {"main.py"} for file, _, stack in places), places
    assert [line for _, line, _ in places if line != 4] == [1, 2, 3, 5, 6]  # the lambda's line is 4
    assert end["reason"] == "ok"


# Local only: the server refuses them before any sandbox.
def test_commands_need_a_paused_program(local_server):
    ada = student(local_server, "ada")
    save(ada, "main.py", "print(1)\n")

    async def go():
        async with RunClient(local_server.url, ada.http.cookies.get_dict()) as rc:
            await rc.send(type="step")
            refused = await rc.until("error")
            await rc.send(type="debug", path="main.py", breakpoints={"../x.py": [1]})
            bad = await rc.until("error")
            await rc.send(type="debug", path="main.py", breakpoints={"main.py": [True]})
            bad2 = await rc.until("error")
            await rc.send(type="debug", path="main.py")
            await rc.until("paused")
            await rc.send(type="frame", frame=-1)
            bad3 = await rc.until("error")
            await rc.send(type="continue")
            await rc.until("exit")
            return refused, bad, bad2, bad3
    refused, bad, bad2, bad3 = asyncio.run(go())
    assert refused["error"] == "not_debugging"
    assert bad["error"] == bad2["error"] == bad3["error"] == "bad_field"


# -- attacks by the program being debugged ------------------------------------------------

FAKE = ('{"type": "paused", "file": "evil.py", "line": 666, "stack": [{"function": "f", "file": "evil.py", '
        '"line": 666}], "frame": 0, "variables": []}\\n')


# Local only: the launcher leaves the program fds 0-3 only, in every kind.
def test_fake_debugger_messages_on_every_descriptor_reach_nobody(local_server):
    ada, bob = student(local_server, "ada"), student(local_server, "bob")
    code = ("import os\nfor fd in range(64):\n    try:\n        os.write(fd, b'" + FAKE + "')\n"
            "    except OSError:\n        pass\nprint('done')\n")
    save(ada, "main.py", code)
    save(bob, "main.py", LOOP)

    async def go():
        async with RunClient(local_server.url, ada.http.cookies.get_dict()) as a, \
                RunClient(local_server.url, bob.http.cookies.get_dict()) as b:
            await b.send(type="debug", path="main.py")
            bob_first = await next_stop(b)
            await a.send(type="debug", path="main.py")
            ada_end = await next_stop(a)
            while ada_end["type"] == "paused":  # its own pauses (and perhaps one it forged) in its own IDE
                ada_end = await command(a, "continue")
            bob_next = await command(b, "step")
            await command(b, "continue")
            return bob_first, ada_end, bob_next, a, b
    bob_first, ada_end, bob_next, a, b = asyncio.run(go())
    assert ada_end["type"] == "exit" and ada_end["reason"] == "ok" and "done" in a.output("stdout")
    assert [m["line"] for m in b.messages if m["type"] == "paused"] == [1, 2]
    assert bob_first["file"] == bob_next["file"] == "main.py"


def test_a_flood_on_the_debug_channel_ends_at_the_output_limit(isolated_server):
    ada, bob = student(isolated_server, "ada"), student(isolated_server, "bob")
    flood = "import os\nline = b'" + FAKE + "' * 1000\nwhile True:\n    os.write(3, line)\n"

    async def steps(rc, pause):
        while pause["type"] == "paused":  # at most one line it writes is taken per command
            pause = await command(rc, "continue")
        return pause
    end, rc = debugging(isolated_server, ada, {"main.py": flood}, steps)
    assert end["reason"] == "output_limit", end
    # Meanwhile and after, another student debugs as usual.
    (seen, bob_end), _ = debugging(isolated_server, bob, {"main.py": LOOP}, stepping_to_the_end)
    assert bob_end["reason"] == "ok" and seen[-1] == 4


async def stepping_to_the_end(rc, pause):
    lines = []
    while pause["type"] == "paused":
        lines.append(pause["line"])
        pause = await command(rc, "step")
    return lines, pause


# Local only: the debug channel's lines cross the launcher, the same in every kind.
def test_huge_and_malformed_lines_are_dropped(local_server):
    ada = student(local_server, "ada")
    code = ("import os\nos.write(3, b'x' * 300000 + b'\\n')\nos.write(3, b'{not json\\n')\n"
            "os.write(3, b'{\"type\": \"paused\", \"stack\": \"no\"}\\n')\nos.write(3, b'[1, 2]\\n' + b'[' * 100000"
            " + b'\\n')\nos.write(3, b'\\xff\\xfe\\n')\nz = 1\n")
    (lines, end), rc = debugging(local_server, ada, {"main.py": code}, stepping_to_the_end)
    assert lines == [1, 2, 3, 4, 5, 6, 7] and end["reason"] == "ok"


# Local only: tracing is the launcher's debugger, the same in every kind.
def test_a_program_that_replaces_settrace_just_runs_on(local_server):
    ada = student(local_server, "ada")
    code = "import sys\nsys.settrace(None)\nsys.settrace = None\nfor i in range(3):\n    pass\nprint('ran', i)\n"
    (lines, end), rc = debugging(local_server, ada, {"main.py": code}, stepping_to_the_end)
    assert lines == [1, 2] and end["reason"] == "ok" and rc.output("stdout") == "ran 2\r\n"


@pytest.fixture
def idle_debug_server(shared_servers):
    """Short limits: a pause ends after 7 s without a step; a run may last 5 s (pauses not counted)."""
    limits = dict(LIMITS, RUN_WALL_SECONDS=5, RUN_DEBUG_IDLE_SECONDS=7)
    yield from _shared(shared_servers, SANDBOX="local", **limits)


def test_paused_time_is_not_run_time_but_an_idle_pause_ends(idle_debug_server):
    ada = student(idle_debug_server, "ada")

    async def think_then_step(rc, pause):
        await asyncio.sleep(6)  # longer than the run may last: paused, it does not count
        pause = await command(rc, "step")
        return pause, await command(rc, "continue")
    (pause, end), _ = debugging(idle_debug_server, ada, {"main.py": LOOP}, think_then_step)
    assert pause["type"] == "paused" and end["reason"] == "ok"

    async def never_step(rc, pause):
        return await next_stop(rc)
    end, _ = debugging(idle_debug_server, ada, {"main.py": LOOP}, never_step)
    assert end["reason"] == "timeout" and "waited for your next step" in end["message"]


def test_two_debug_runs_in_a_row(sandbox_server):
    ada = student(sandbox_server, "ada")
    for _ in range(2):
        (lines, end), rc = debugging(sandbox_server, ada, {"main.py": LOOP}, stepping_to_the_end)
        assert lines[0] == 1 and end["reason"] == "ok"


# -- its place among the host's running programs ------------------------------------------

@pytest.fixture
def one_place_server(request, shared_servers):
    """One program may run at once (per worker), so who waits for whom shows;
    local unless a test asks for another kind. Who waits is the server's
    admission, the same in every kind."""
    kind = getattr(request, "param", "local")
    if kind == "docker":
        request.getfixturevalue("docker_image")
    yield from _shared(shared_servers, SANDBOX=kind, RUN_MAX_CONCURRENT=1, **LIMITS)


async def ended_without_a_place_in_line(rc, path="main.py"):
    """Run `path` to its end; the messages before its exit (a `queued` among them means it waited)."""
    await rc.send(type="run", path=path)
    await rc.until("exit", TIMEOUT)
    return [m["type"] for m in rc.messages]


def class_of(server, *programs):
    """Students (ada, bob, cy, ...) with `programs` saved as their main.py: their cookies."""
    cookies = []
    for name, code in zip(("ada", "bob", "cy"), programs):
        client = student(server, name)
        save(client, "main.py", code)
        cookies.append(client.http.cookies.get_dict())
    return cookies


@contextlib.asynccontextmanager
async def sockets(server, cookies):
    """A /ws/run socket for each; the first debugs its main.py."""
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(RunClient(server.url, c)) for c in cookies]
        await clients[0].send(type="debug", path="main.py")
        yield clients


def test_a_paused_program_gives_its_place_to_the_class(one_place_server):
    server = one_place_server
    cookies = class_of(server, LOOP, "name = input('name? ')\nprint('hello', name)\n", "print('quick')\n")

    async def go():
        async with sockets(server, cookies) as (a, b, c):
            first = await next_stop(a)
            # Ada's program waits for her: the one place is free for the others.
            alone = await ended_without_a_place_in_line(c)
            await b.send(type="run", path="main.py")
            await b.until("input", TIMEOUT)  # Bob's program holds the place now, waiting for him
            await a.send(type="step")
            waited = await a.receive(TIMEOUT)
            b.messages.clear()
            await b.send(type="stdin", data="Bob\n")
            bob_end = await b.until("exit", TIMEOUT)
            ada_next = await next_stop(a)  # her step goes on once Bob's place is free
            ada_end = await command(a, "continue")
            c.messages.clear()
            after = await ended_without_a_place_in_line(c)  # the place came back each time
            return first, alone, waited, bob_end, ada_next, ada_end, after
    first, alone, waited, bob_end, ada_next, ada_end, after = asyncio.run(go())
    assert first["line"] == 1
    assert "queued" not in alone and "queued" not in after
    assert waited["type"] == "queued" and waited["line"] == "run" and waited["position"] == 1
    assert bob_end["reason"] == "ok"
    assert ada_next["type"] == "paused" and ada_next["line"] == 2
    assert ada_end["reason"] == "ok"


def test_stop_while_a_step_waits_for_a_place(one_place_server):
    server = one_place_server
    cookies = class_of(server, LOOP, "input()\n", "print('quick')\n")

    async def go():
        async with sockets(server, cookies) as (a, b, c):
            await next_stop(a)
            await b.send(type="run", path="main.py")
            await b.until("input", TIMEOUT)
            await a.send(type="step")
            await a.until("queued", TIMEOUT)
            await a.send(type="kill")
            ada_end = await a.until("exit", TIMEOUT)
            await b.send(type="eof")
            await b.until("exit", TIMEOUT)
            return ada_end, await ended_without_a_place_in_line(c)
    ada_end, after = asyncio.run(go())
    assert ada_end["reason"] == "killed"
    assert "queued" not in after  # the place her step waited for was not kept by anyone


BURNS_WHILE_PAUSED = {
    "a thread": ("import threading\ndef burn():\n    while True:\n        pass\n"
                 "threading.Thread(target=burn).start()\nx = 1\n"),
    "a forged pause": ("import os\nos.write(3, b'" + FAKE + "')\nwhile True:\n    pass\n"),
}


def burns_while_paused():
    """Each on local; the thread on docker too, where the CPU it burns is
    read from the container's cgroup (the forged pause is the launcher's)."""
    for how in BURNS_WHILE_PAUSED:
        yield pytest.param("local", how, id=f"local-{how}")
    yield pytest.param("docker", "a thread", id="docker-a thread")


@pytest.mark.parametrize(("one_place_server", "how"), burns_while_paused(), indirect=["one_place_server"])
def test_a_program_that_works_while_paused_is_stopped(one_place_server, how):
    """A pause is the program's word: one that keeps the CPU busy without a
    place (a thread, or a pause it made up) is stopped, and the place is free."""
    server = one_place_server
    ada, cy = student(server, "ada"), student(server, "cy")
    save(cy, "main.py", "print('quick')\n")

    async def steps(rc, pause):
        while pause["type"] == "paused" and pause["file"] == "main.py" and pause["line"] < 6:  # x = 1
            pause = await command(rc, "step" if how == "a thread" else "continue")
        return await next_stop(rc) if pause["type"] == "paused" else pause
    end, rc = debugging(server, ada, {"main.py": BURNS_WHILE_PAUSED[how]}, steps)
    assert end["type"] == "exit" and end["reason"] == "cpu_limit", end
    assert "while it was paused in the debugger" in end["message"]

    async def other():
        async with RunClient(server.url, cy.http.cookies.get_dict()) as c:
            return await ended_without_a_place_in_line(c)
    assert "queued" not in asyncio.run(other())


def test_a_step_with_the_line_full_stays_paused_and_says_so(shared_servers):
    server = next(_shared(shared_servers, SANDBOX="local", RUN_MAX_CONCURRENT=1, RUN_QUEUE_MAX=0, **LIMITS))
    cookies = class_of(server, LOOP, "input()\n")

    async def go():
        async with sockets(server, cookies) as (a, b):
            await next_stop(a)
            await b.send(type="run", path="main.py")
            await b.until("input", TIMEOUT)  # the one place is Bob's, and nobody may wait for it
            await a.send(type="step")
            notice = await a.until("notice", TIMEOUT)
            again = await next_stop(a)
            await b.send(type="eof")
            await b.until("exit", TIMEOUT)
            return notice, again, await command(a, "step")
    notice, again, stepped = asyncio.run(go())
    assert "busy" in notice["message"] and "stays paused" in notice["message"]
    assert again["type"] == "paused" and again["line"] == 1
    assert stepped["type"] == "paused" and stepped["line"] == 2


# Local only: the launcher sends the image; each kind's matplotlib is in test_sandboxes.
def test_a_plot_shows_while_debugging(local_server):
    ada = student(local_server, "ada")
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.show()\nprint('after the plot')\n"

    async def steps(rc, pause):
        lines = []
        while pause["type"] == "paused" and pause["line"] < 4:  # over the import, the plot, the show
            lines.append(pause["line"])
            pause = await command(rc, "step")
        # The figure comes while the program waits at the next line (perhaps just after its pause).
        image = next((m for m in rc.messages if m["type"] == "image"), None) or await rc.until("image", TIMEOUT)
        return lines, pause, image, await command(rc, "continue")
    (lines, after_show, image, end), rc = debugging(local_server, ada, {"main.py": code}, steps)
    assert lines == [1, 2, 3] and (after_show["type"], after_show["line"]) == ("paused", 4)
    assert image["mime"] == "image/png" and base64.b64decode(image["data"]).startswith(b"\x89PNG\r\n\x1a\n")
    assert [m["type"] for m in rc.messages].count("image") == 1
    assert end["reason"] == "ok" and rc.output("stdout") == "after the plot\r\n"


# -- what the student's values and watches do at a pause -------------------------------------

HOSTILE_VALUES = """\
class NoLen(list):
    def __len__(self):
        raise ValueError('no len')
class Loud:
    def __repr__(self):
        print('repr called')
        return 'Loud()'
class Odd:
    @property
    def __class__(self):
        raise RuntimeError('no class')
class NoIter(list):
    def __iter__(self):
        raise SystemExit(3)
class Quits:
    def __repr__(self):
        raise KeyboardInterrupt
a = NoLen([1, 2])
b = Loud()
c = Odd()
d = NoIter([1])
e = Quits()
print('ran to the end')
"""


# Local only: values and watches are the launcher's debugger, the same in every kind.
def test_values_that_raise_or_print_at_a_pause_show_as_their_error(local_server):
    """A value whose __len__, __repr__, __iter__ or __class__ raises (even
    SystemExit or KeyboardInterrupt), a __repr__ that prints, a watch that
    calls os._exit, input() or exit(): each shows as what it did, and the
    program runs on as it does under Run."""
    ada = student(local_server, "ada")
    watches = ["__import__('os')._exit(3)", "input()", "exit(4)", "len(a)"]

    async def steps(rc, pause):
        while pause["type"] == "paused" and pause["line"] < 23:  # every value made, and shown at each pause
            pause = await command(rc, "step")
        if pause["type"] == "exit":
            return pause, pause  # (it ended at a pause: under Run it does not)
        last = await command(rc, "watches", watches=watches)
        return last, await command(rc, "continue")
    (last, end), rc = debugging(local_server, ada, {"main.py": HOSTILE_VALUES}, steps)
    assert end["reason"] == "ok", (end, rc.output("stderr"))
    assert rc.output("stdout") == "ran to the end\r\n"  # the __repr__'s print wrote nowhere, at every pause
    assert last["type"] == "paused" and last["line"] == 23
    shown = {name: variable(last, name) for name in "abcde"}
    assert shown["a"]["type"] == "NoLen" and [i["value"] for i in shown["a"]["items"]] == ["1", "2"]
    assert shown["b"]["value"] == "Loud()"
    assert shown["c"]["type"] == "Odd" and "RuntimeError" in shown["c"]["value"]
    assert shown["d"]["type"] == "NoIter" and shown["e"]["type"] == "Quits"
    assert "KeyboardInterrupt" in shown["e"]["value"]
    assert [(w["type"], w["value"]) for w in last["watches"]] == [
        ("error", "SystemExit: os._exit() is not run by a watch"), ("error", "EOFError: EOF when reading a line"),
        ("error", "SystemExit: 4"), ("error", "ValueError: no len")]
    assert "debugging" not in rc.output("stderr") and "bdb" not in rc.output("stderr")


SLOW_AT_A_PAUSE = {
    "a watch that sleeps": ("import time\nx = 1\nprint('end')\n", ["time.sleep(60)"], "time.sleep(60)"),
    "a watch that spins": ("def spin():\n    while True:\n        pass\nx = 1\nprint('end')\n", ["spin()"],
                           "spin()"),
    "a slow __repr__ after Step": ("import time\nclass Slow:\n    def __repr__(self):\n        time.sleep(60)\n"
                                   "s = Slow()\nx = 1\nprint('end')\n", [], "s"),
}


@pytest.mark.parametrize("how", SLOW_AT_A_PAUSE)
def test_a_slow_watch_or_value_shows_as_too_slow_and_the_program_goes_on(shared_servers, how):
    """The debugger gives the student's code at a pause a second: then it is
    interrupted and shown as such, and stepping goes on (not a CPU limit's
    'loop that never ends', nor an idle limit's 'nothing typed'). A watch
    that spins spends its second of CPU at each of the three pauses: the
    default CPU limit (10 s) holds that, the run tests' 2 s would not on a
    quiet machine."""
    server = next(_shared(shared_servers, SANDBOX="local", **dict(LIMITS, RUN_CPU_SECONDS=10)))
    ada = student(server, "ada")
    code, watches, slow = SLOW_AT_A_PAUSE[how]
    (lines, end), rc = debugging(server, ada, {"main.py": code}, stepping_to_the_end, watches=watches)
    assert end["reason"] == "ok", end
    assert rc.output("stdout") == "end\r\n"
    last = [m for m in rc.messages if m["type"] == "paused"][-1]
    shown = last["watches"][0] if watches else variable(last, slow)
    assert shown["name"] == slow and "took more than" in shown["value"], shown


STUCK = """\
import time
def stuck():
    while True:
        try:
            time.sleep(60)
        except BaseException:
            pass
x = 1
print('end')
"""


def test_a_watch_that_never_finishes_ends_the_run_and_frees_its_place(one_place_server):
    """A watch that swallows the debugger's interruption holds the program,
    and the place its command took: past the pause's deadline the run ends,
    saying which watch, and a classmate queued behind it runs."""
    server = one_place_server
    cookies = class_of(server, STUCK, "print('quick')\n")

    async def go():
        async with sockets(server, cookies) as (a, c):
            pause = await next_stop(a)
            while pause["line"] < 8:  # x = 1: stuck is defined
                pause = await command(a, "step")
            await a.send(type="watches", watches=["x", "stuck()"])  # worked out at once: it takes the place
            await asyncio.sleep(1)  # (the command has its place by now: no answer comes to say so)
            await c.send(type="run", path="main.py")
            ada_end = await next_stop(a)
            cy_end = await c.until("exit", TIMEOUT)
            return ada_end, cy_end, [m["type"] for m in c.messages]
    ada_end, cy_end, cy_saw = asyncio.run(go())
    assert ada_end["type"] == "exit" and ada_end["reason"] == "timeout", ada_end
    assert "your watch 'stuck()'" in ada_end["message"] and "took too long" in ada_end["message"]
    assert "queued" in cy_saw and cy_end["reason"] == "ok"


def test_a_watch_that_ends_the_process_says_so(local_server):
    """os._exit is refused to a watch; one that ends the process another way is named as the cause."""
    ada = student(local_server, "ada")
    save(ada, "main.py", "x = 1\nprint('end')\n")

    async def go():
        async with RunClient(local_server.url, ada.http.cookies.get_dict()) as rc:
            await rc.send(type="debug", path="main.py", watches=["__import__('posix')._exit(0)"])
            return await next_stop(rc)
    end = asyncio.run(go())
    assert end["type"] == "exit" and "a watch" in end["message"] and "ended the program" in end["message"], end


FLOODS_WHILE_AWAITED = "import os\nline = b'{\"type\": \"step\"}\\n' * 1000\nwhile True:\n    os.write(3, line)\n"


def test_lines_on_the_channel_while_a_pause_is_awaited_count_as_output(isolated_server):
    """Lines that parse but are not a pause, written while the server waits
    for one (after Continue), are output: the run ends at its output limit,
    not after minutes of the server parsing them."""
    ada = student(isolated_server, "ada")

    async def steps(rc, pause):
        return await command(rc, "continue")
    end, rc = debugging(isolated_server, ada, {"main.py": FLOODS_WHILE_AWAITED}, steps)
    assert end["type"] == "exit" and end["reason"] == "output_limit", end


FORKS = """\
import os
pid = os.fork()
if pid == 0:
    child = 'copy'
    os._exit(0)
os.waitpid(pid, 0)
print('parent done')
"""


# Local only: the launcher's debugger leaves the fork untraced, the same in every kind.
def test_after_fork_only_the_first_process_is_debugged(local_server):
    """The copy fork() makes runs on untraced: it never pauses, so it
    neither takes the first process's steps nor stalls it."""
    ada = student(local_server, "ada")
    (lines, end), rc = debugging(local_server, ada, {"main.py": FORKS}, stepping_to_the_end)
    assert lines == [1, 2, 3, 6, 7] and end["reason"] == "ok", (lines, end)
    assert rc.output("stdout") == "parent done\r\n"
