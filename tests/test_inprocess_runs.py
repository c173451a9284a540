"""What the server decides about a run, proven on the application in this
process (tests/inprocess.py) over scripted sandboxes (tests/scripted_sandbox.py):
the /ws/run messages and their answers, input, stop and interrupt, how a
run's end is reported, its output bound, the line of runs, the one run per
student, sandboxes kept and replaced, and the drain. No server process,
bubblewrap, Docker or root: what a real program does is proven in
test_runs.py."""
import asyncio
import re

import aiohttp

from loadtest.run_client import RunClient
from server.files.store import etag_of
from tests.runs_support import lock_of, run, save, student, user_id, wait_for

TIMEOUT = 30  # a hang guard


def socket_of(server, client):
    return RunClient(server.url, client.http.cookies.get_dict())


def in_loop(coro):
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT * 2))


# -- the messages and their answers --------------------------------------------------

def test_every_answer_names_the_run_it_answers(inprocess_server):
    ada = student(inprocess_server, "ada")
    exit_, rc = run(inprocess_server, ada, "print Hello, world!\nerr a warning\n")
    assert exit_["reason"] == "ok" and exit_["code"] == 0 and exit_["message"] == "finished", rc.messages
    assert [m["type"] for m in rc.messages] == ["started", "output", "output", "exit"]
    assert rc.output("stdout") == "Hello, world!\r\n" and rc.output("stderr") == "a warning\n"
    assert {m.get("re") for m in rc.messages} == {"1"}
    assert exit_["run_id"] == rc.messages[0]["run_id"]


def test_bad_messages_get_clear_errors(inprocess_server):
    """Each answer names the message it answers (`re`), once it had an id."""
    ada = student(inprocess_server, "ada")

    async def go():
        async with socket_of(inprocess_server, ada) as rc:
            out = []
            for raw in ("not json", "[1]", '{"type": "stdin", "data": "x"}', '{"type": "fly", "id": "a"}',
                        '{"type": "stdin", "data": "x", "id": "b"}',
                        '{"type": "run", "path": "../bob/x.py", "id": "c"}', '{"type": "run", "path": "nope.py", "id": "d"}',
                        '{"type": "run", "path": "hello.py", "args": "x", "id": "e"}',
                        '{"type": "run", "path": "hello.py", "cols": true, "id": "f"}',
                        '{"type": "run", "path": "hello.py", "colour": 1, "id": "g"}',
                        '{"type": "kill", "id": "h"}', '{"type": "step", "id": "i"}'):
                await rc.ws.send_str(raw)
                answer = await rc.receive()
                assert answer["type"] == "error" and answer["message"], answer
                out.append((answer["error"], answer.get("re")))
            return out
    assert in_loop(go()) == [("bad_message", None), ("bad_message", None), ("bad_message", None),
                             ("unknown_type", "a"), ("not_running", "b"), ("path_segment", "c"),
                             ("not_found", "d"), ("bad_args", "e"), ("bad_field", "f"), ("bad_field", "g"),
                             ("not_running", "h"), ("not_debugging", "i")]


def test_socket_needs_a_session_and_the_same_origin(inprocess_server):
    ada = student(inprocess_server, "ada")
    ws_url = inprocess_server.url.replace("http://", "ws://") + "/ws/run"

    async def status(headers):
        async with aiohttp.ClientSession() as http:
            try:
                async with http.ws_connect(ws_url, headers=headers):
                    return 101
            except aiohttp.WSServerHandshakeError as e:
                return e.status
    cookie = "; ".join(f"{k}={v}" for k, v in ada.http.cookies.get_dict().items())
    assert in_loop(status({"Origin": inprocess_server.url})) == 401
    assert in_loop(status({"Origin": "http://evil.example", "Cookie": cookie})) == 403
    assert in_loop(status({"Origin": inprocess_server.url, "Cookie": cookie})) == 101


# -- input --------------------------------------------------------------------------

def test_each_input_wait_is_told_once_after_its_prompt(inprocess_server):
    ada = student(inprocess_server, "ada")
    answers = ["Ada", "7"]

    async def on(rc, message):  # answer each `input` message, and only those
        if message["type"] == "input":
            await rc.send(type="stdin", data=answers.pop(0) + "\r")
    exit_, rc = run(inprocess_server, ada, "ask Name? \nprint hello $\nask \nprint got $\n", on=on)
    assert exit_["reason"] == "ok", rc.messages
    assert [m.get("prompt") for m in rc.messages if m["type"] == "input"] == ["Name? ", None]
    assert rc.output("stdout") == "Name? Ada\r\nhello Ada\r\n7\r\ngot 7\r\n"  # no mark shown
    assert {m["re"] for m in rc.messages} == {"1"}  # input answered is not a message of its own


def test_end_of_input_reaches_the_program(inprocess_server):
    ada = student(inprocess_server, "ada")

    async def on(rc, message):
        if message["type"] == "input":
            await rc.send(type="eof")
    exit_, rc = run(inprocess_server, ada, "ask more? \nprint never\n", on=on)
    assert exit_["reason"] == "error" and exit_["code"] == 1
    assert "EOFError" in rc.output("stderr") and "never" not in rc.output("stdout")


def test_input_typed_before_the_prompt_waits_for_it(inprocess_server):
    ada = student(inprocess_server, "ada")
    save(ada, "slow.py", "sleep 0.2\nask ? \nprint got $\n")

    async def go():
        async with socket_of(inprocess_server, ada) as rc:
            await rc.send(type="run", path="slow.py")
            await rc.until("started")
            await rc.send(type="stdin", data="early\r")
            return await rc.until("exit", TIMEOUT), rc.output("stdout")
    exit_, out = in_loop(go())
    assert exit_["reason"] == "ok" and out.endswith("got early\r\n"), out


# -- how a run ends ------------------------------------------------------------------

def test_kill_stops_a_program_and_reports_the_kernels_signal(inprocess_server):
    ada = student(inprocess_server, "ada")

    async def on(rc, m):
        if m["type"] == "input":
            await rc.send(type="kill")
    exit_, _ = run(inprocess_server, ada, "ask name? \n", on=on)
    assert (exit_["reason"], exit_["message"], exit_["code"], exit_["signal"]) == ("killed", "stopped", None, 9)


def test_interrupt_is_ctrl_c(inprocess_server):
    ada = student(inprocess_server, "ada")

    async def on(rc, m):
        if m["type"] == "output" and "waiting" in m["data"]:
            await rc.send(type="interrupt")
    exit_, rc = run(inprocess_server, ada, "print waiting\nhang\n", on=on)
    assert (exit_["reason"], exit_["code"]) == ("interrupted", 130)
    assert "KeyboardInterrupt" in rc.output("stderr")


def test_exit_codes_are_told_in_words(inprocess_server):
    ada = student(inprocess_server, "ada")
    ends = {}
    for code in (0, 1, 3):
        exit_, _ = run(inprocess_server, ada, f"exit {code}\n", path=f"exit{code}.py")
        ends[code] = (exit_["reason"], exit_["code"], exit_["message"])
    assert ends == {0: ("ok", 0, "finished"), 1: ("error", 1, "stopped with an error"),
                    3: ("error", 3, "stopped with an error: it ended itself with the number 3, as sys.exit(3) does")}


def test_a_signal_the_launcher_reports_is_the_end_told(inprocess_server):
    ada = student(inprocess_server, "ada")
    segfault, _ = run(inprocess_server, ada, "signal 11\n", path="a.py")
    cpu, _ = run(inprocess_server, ada, "signal 24\n", path="b.py")  # SIGXCPU: its CPU limit
    assert (segfault["reason"], segfault["code"], segfault["signal"]) == ("error", None, 11)
    assert (cpu["reason"], cpu["signal"]) == ("cpu_limit", 24) and "busy for more than" in cpu["message"]


def test_a_launcher_that_dies_without_a_word_is_a_lost_sandbox_and_the_next_run_works(inprocess_server):
    """The end comes from the kernel (wait), never from the output ending."""
    ada = student(inprocess_server, "ada")
    save(ada, "ok.py", "print fine\n")

    async def go():
        async with socket_of(inprocess_server, ada) as rc:
            lost = await rc.run("crash.py")
            after = await rc.run("ok.py")
            return lost, after
    save(ada, "crash.py", "print before\ncrash\nprint after\n")
    lost, after = in_loop(go())
    assert (lost["reason"], lost["signal"]) == ("sandbox_lost", 9) and "tell your teacher" in lost["message"]
    assert after["reason"] == "ok"


def test_an_output_flood_ends_at_the_output_limit(start_inprocess):
    server = start_inprocess(RUN_OUTPUT_KB=64)
    ada = student(server, "ada")
    exit_, rc = run(server, ada, "flood 10000000\nprint never\n")
    assert exit_["reason"] == "output_limit" and "more than 64 KB" in exit_["message"]
    assert (64 << 10) - (16 << 10) <= len(rc.output()) <= (64 << 10) and "never" not in rc.output()


def test_an_idle_program_is_stopped_in_words(start_inprocess):
    server = start_inprocess(RUN_IDLE_SECONDS=1)
    ada = student(server, "ada")
    exit_, _ = run(server, ada, "ask ? \n")
    assert exit_["reason"] == "timeout" and "nothing was printed or typed for 1 seconds" in exit_["message"]


def test_run_runs_the_version_the_editor_shows_or_nothing(inprocess_server):
    ada = student(inprocess_server, "ada")
    save(ada, "v.py", "print first\n")
    seen = etag_of(b"print first\n")
    save(ada, "v.py", "print second\n")
    changed, rc = run(inprocess_server, ada, "print second\n", path="v.py", etag=seen)
    assert changed["reason"] == "changed" and "changed somewhere else" in changed["message"]
    assert rc.output() == ""
    current, rc = run(inprocess_server, ada, "print second\n", path="v.py", etag=etag_of(b"print second\n"))
    assert current["reason"] == "ok" and rc.output() == "second\r\n"


# -- one run at a time, the line, the sandboxes ----------------------------------------

def test_one_run_per_student_on_a_socket_and_across_tabs(inprocess_server):
    ada = student(inprocess_server, "ada")
    save(ada, "wait.py", "ask waiting \n")
    save(ada, "other.py", "print second\n")

    async def go():
        async with socket_of(inprocess_server, ada) as tab1, socket_of(inprocess_server, ada) as tab2:
            await tab1.send(type="run", path="wait.py")
            await tab1.until("input")
            same = await tab1.send(type="run", path="other.py")
            here = await tab1.until("error")
            await tab2.send(type="run", path="other.py")
            there = await tab2.until("error")
            await tab1.send(type="kill")
            await tab1.until("exit")
            after = await tab2.run("other.py")
            return same, here, there, after
    same, here, there, after = in_loop(go())
    assert (here["error"], here["re"]) == ("already_running", same)
    assert there["error"] == "already_running" and "Stop it" in there["message"]
    assert after["reason"] == "ok"


def test_closing_the_socket_stops_the_program_and_gives_back_the_lock(inprocess_server):
    ada = student(inprocess_server, "ada")
    save(ada, "forever.py", "print started\nhang\n")

    async def go():
        async with socket_of(inprocess_server, ada) as rc:
            await rc.send(type="run", path="forever.py")
            await rc.until("output")
            return lock_of(inprocess_server, ada.username)
    assert in_loop(go()) is not None  # held while it ran
    assert wait_for(lambda: lock_of(inprocess_server, ada.username) is None)
    assert wait_for(lambda: not inprocess_server.call(_live_jobs(inprocess_server.ctx)))
    assert wait_for(lambda: not inprocess_server.kind.live)  # its sandbox killed, no ready one kept


async def _live_jobs(ctx):
    return list(ctx.jobs.live)


async def _held(ctx, user_id):
    """What the worker holds for runs, and the state of the user's latest job."""
    conns = ctx.runs.students[user_id].connections if user_id in ctx.runs.students else []
    return {"live jobs": len(ctx.jobs.live), "run locks": len(ctx.jobs.claims()), "places": ctx.admission.running,
            "ready sandbox": user_id in ctx.jobs.warm.ready,
            "job": conns[0].job.state.name if conns and conns[0].job else None}


def test_a_run_holds_its_lock_and_place_while_it_runs_and_gives_them_back(inprocess_server):
    ada = student(inprocess_server, "ada")
    save(ada, "wait.py", "ask ? \n")
    uid = user_id(inprocess_server, ada.username)

    def held():
        return inprocess_server.call(_held(inprocess_server.ctx, uid))

    async def go():
        async with socket_of(inprocess_server, ada) as rc:
            await rc.send(type="run", path="wait.py")
            await rc.until("input")
            during = await asyncio.to_thread(held)
            await rc.send(type="stdin", data="\r")
            await rc.until("exit")
            assert await asyncio.to_thread(wait_for, lambda: held()["ready sandbox"])  # made again after the run
            return during, await asyncio.to_thread(held)
    during, after = in_loop(go())
    assert during == {"live jobs": 1, "run locks": 1, "places": 1, "ready sandbox": False, "job": "RUNNING"}
    assert after == {"live jobs": 0, "run locks": 0, "places": 0, "ready sandbox": True, "job": "ENDED"}


def test_beyond_the_limit_runs_queue_with_positions_and_all_finish(start_inprocess):
    server = start_inprocess(RUN_MAX_CONCURRENT=2, RUN_QUEUE_MAX=50)
    names = [f"q{i}" for i in range(6)]
    clients = {n: student(server, n) for n in names}
    for n in names:
        save(clients[n], "slow.py", "sleep 0.3\nprint finished\n")

    async def one(name):
        async with socket_of(server, clients[name]) as rc:
            return await rc.run("slow.py", timeout=TIMEOUT), rc.messages
    async def everyone():
        return await asyncio.gather(*(one(n) for n in names))
    results = in_loop(everyone())
    assert [exit_["reason"] for exit_, _ in results] == ["ok"] * len(names)
    positions = [m["position"] for _, msgs in results for m in msgs if m["type"] == "queued" and m["line"] == "run"]
    assert positions and min(positions) == 1, "with 6 runs and 2 places some must have waited"
    for _, msgs in results:  # a waiting run only moves forward
        mine = [m["position"] for m in msgs if m["type"] == "queued" and m["line"] == "run"]
        assert mine == sorted(mine, reverse=True)


def test_beyond_the_queue_the_server_says_it_is_busy_and_keeps_the_sandbox(start_inprocess):
    server = start_inprocess(RUN_MAX_CONCURRENT=1, RUN_QUEUE_MAX=0)
    ada, bob = student(server, "ada"), student(server, "bob")
    save(ada, "wait.py", "ask waiting\n")
    save(bob, "hello.py", "print hello\n")

    async def go():
        async with socket_of(server, ada) as a, socket_of(server, bob) as b:
            await a.send(type="run", path="wait.py")
            await a.until("input")  # ada's program holds the only place
            await b.send(type="run", path="hello.py")
            busy = await b.until("error")
            started = server.kind.started
            await a.send(type="stdin", data="\r")
            await a.until("exit")
            retry = await b.run("hello.py")
            return busy, started, retry, b.output("stdout")
    busy, started, retry, out = in_loop(go())
    assert busy["error"] == "server_busy" and "busy" in busy["message"]
    assert retry["reason"] == "ok" and out == "hello\r\n"
    # bob's retry ran in the sandbox that was ready when he was turned away
    assert server.kind.started == started


def test_a_sandbox_serves_its_runs_then_is_replaced_and_a_stopped_one_never_serves_again(start_inprocess):
    server = start_inprocess(RUN_SANDBOX_RUNS=2)
    ada = student(server, "ada")
    save(ada, "count.py", "runs\n")
    save(ada, "wait.py", "runs\nask ? \n")

    async def go():
        async with socket_of(server, ada) as rc:
            seen = []
            for _ in range(3):
                await rc.run("count.py")
                seen.append(re.findall(r"run \d", rc.output("stdout"))[-1])
            await rc.send(type="run", path="wait.py")
            await rc.until("input")
            await rc.send(type="kill")
            assert (await rc.until("exit"))["reason"] == "killed"
            await rc.run("count.py")
            seen.append(re.findall(r"run \d", rc.output("stdout"))[-1])
            return seen
    # run 2 of the second sandbox was killed: the next run is the first of a new one
    assert in_loop(go()) == ["run 1", "run 2", "run 1", "run 1"]


def test_a_logout_stops_the_program_and_closes_every_socket_in_words(inprocess_server):
    ada = student(inprocess_server, "ada")
    save(ada, "wait.py", "print waiting\nhang\n")

    async def go():
        async with socket_of(inprocess_server, ada) as tab1, socket_of(inprocess_server, ada) as tab2:
            await tab1.send(type="run", path="wait.py")
            await tab1.until("output")
            r = await asyncio.to_thread(ada.post, "/api/logout")
            assert r.status_code == 200, r.text
            exit_ = await tab1.until("exit")
            codes = []
            for tab in (tab1, tab2):
                msg = await tab.ws.receive(timeout=TIMEOUT)
                while msg.type == aiohttp.WSMsgType.TEXT:
                    msg = await tab.ws.receive(timeout=TIMEOUT)
                codes.append(tab.ws.close_code)
            return exit_, codes
    exit_, codes = in_loop(go())
    assert exit_["reason"] == "logged_out" and "Sign in again" in exit_["message"]
    assert codes == [4401, 4401]
    assert lock_of(inprocess_server, ada.username) is None


def test_beyond_the_tabs_allowed_the_oldest_idle_one_gives_way_never_a_running_one(start_inprocess):
    server = start_inprocess(RUN_SOCKETS_PER_USER=2)
    ada = student(server, "ada")
    save(ada, "wait.py", "ask waiting \n")

    async def closing(tab):
        msg = await tab.ws.receive(timeout=TIMEOUT)
        return msg.type, tab.ws.close_code

    async def go():
        cookies = ada.http.cookies.get_dict()
        async with RunClient(server.url, cookies) as busy, RunClient(server.url, cookies) as idle:
            await busy.send(type="run", path="wait.py")
            await busy.until("input")
            async with RunClient(server.url, cookies) as third:
                first_closed = await closing(idle)
                async with RunClient(server.url, cookies) as fourth:
                    second_closed = await closing(third)
                    await busy.send(type="stdin", data="\r")
                    finished = await busy.until("exit")
                    return first_closed, second_closed, finished, fourth.ws.closed
    first_closed, second_closed, finished, fourth_closed = in_loop(go())
    assert first_closed == second_closed == (aiohttp.WSMsgType.CLOSE, 4002)
    assert finished["reason"] == "ok" and not fourth_closed


def test_a_worker_that_drains_ends_every_run_in_words_and_gives_back_the_lock(inprocess_server):
    ada = student(inprocess_server, "ada")
    save(ada, "forever.py", "print started\nhang\n")

    async def go():
        async with socket_of(inprocess_server, ada) as rc:
            await rc.send(type="run", path="forever.py")
            await rc.until("output")
            await asyncio.to_thread(inprocess_server.stop)
            return await rc.until("exit")
    exit_ = in_loop(go())
    assert exit_["reason"] == "server_restart" and "run it again in a moment" in exit_["message"]
    assert lock_of(inprocess_server, ada.username) is None
