"""Whatever a client sends on /ws/run, it gets an `error` message or the
thing it asked for, the socket stays open, and nothing is left locked.
Messages are generated with Hypothesis: JSON of every shape, known types
with fields of the wrong kind, text with lone surrogates, NUL, control and
bidi characters, huge numbers, deep nesting, and text that is not JSON."""
import asyncio
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadtest.run_client import RunClient
from tests.runs_support import assert_all_released, lock_of, metric, save, student

TYPES = ["run", "stdin", "interrupt", "kill", "resize", "eof"]  # each with an id (else it is refused for that)
# Text as browsers and attackers send it: any code point, surrogates included.
TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=40) | st.sampled_from(
    ["\ud800", "a\x00b", "\u202e.py", "../x.py", "/etc/passwd", "x" * 5000, "hello.py\x00", ""])
SCALARS = st.none() | st.booleans() | st.integers(-(2 ** 70), 2 ** 70) | st.floats() | TEXT
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                    max_leaves=12)
FIELDS = st.sampled_from(["path", "args", "cols", "rows", "data", "type"])
MESSAGES = (
    st.builds(lambda kind, extra, n: json.dumps({"type": kind, **extra, "id": f"m{n}"}),
              st.sampled_from(TYPES), st.dictionaries(FIELDS, JSON, max_size=4), st.integers(0, 10 ** 6))
    | JSON.map(json.dumps)
    | st.builds(lambda depth: "[" * depth + "]" * depth, st.integers(1, 60_000))  # within the 128 KiB a message may have
    | TEXT.filter(lambda t: _utf8(t))  # a text frame must be UTF-8 (see the test of one that is not)
)


def _object(raw):
    try:
        sent = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    return sent if isinstance(sent, dict) else {}


def _utf8(text):
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def test_any_message_gets_an_answer_and_changes_nothing(local_server):
    server = local_server
    ada = student(server, "ada")
    ada.request("DELETE", "/api/files/home/hello.py")  # nothing to run by accident
    loop = asyncio.new_event_loop()
    rc = RunClient(server.url, ada.http.cookies.get_dict())
    loop.run_until_complete(rc.__aenter__())

    @settings(max_examples=300, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(MESSAGES)
    def one(raw):
        async def exchange():
            await rc.ws.send_str(raw)
            return await rc.receive(timeout=30)
        answer = loop.run_until_complete(exchange())
        assert answer["type"] == "error", answer  # nothing here can be run
        assert isinstance(answer["error"], str) and isinstance(answer["message"], str)
        assert answer["error"] != "internal_error", (raw[:200], answer)
        sent = _object(raw)
        if isinstance(sent.get("type"), str) and isinstance(sent.get("id"), str) and 0 < len(sent["id"]) <= 32:
            assert answer.get("re") == sent["id"], (raw[:200], answer)  # an answer names what it answers

    try:
        one()
    finally:
        loop.run_until_complete(rc.__aexit__(None, None, None))
        loop.close()
    assert lock_of(server, ada.username) is None and metric(server, "pyclassroom_runs_active") == 0
    assert_all_released(server, ada)


def test_typed_text_of_any_kind_reaches_a_running_program(local_server):
    """Half an emoji (a lone surrogate), NUL, bidi and control characters are
    typed into a program waiting for input: it goes on, and so does the
    student (no lock-out)."""
    server = local_server
    ada = student(server, "ada")
    save(ada, "echo.py", "while True:\n    line = input('> ')\n    print('got', ascii(line))\n"
                         "    if line == 'bye':\n        break\n")

    async def go():
        async with RunClient(server.url, ada.http.cookies.get_dict()) as rc:
            await rc.send(type="run", path="echo.py")
            await rc.until("output", 60)
            for typed in ("\ud800", "\udfff\ud83d", "\x00", "\u202e", "\x1b[2J", "x" * 60000):
                await rc.send(type="stdin", data=typed + "\r")
                await rc.until("output", 30, on=None)
            await rc.send(type="stdin", data="bye\r")
            return await rc.until("exit", 60), rc.output("stdout")
    exit_, out = asyncio.run(go())
    assert exit_["reason"] == "ok", out
    assert "got '?'" in out and "got 'bye'" in out
    assert_all_released(server, ada)



def test_a_socket_that_breaks_the_protocol_ends_its_run_and_frees_the_lock(local_server):
    """A text frame that is not UTF-8 makes the server close the socket: the
    program running on it stops and nothing stays locked."""
    import aiohttp
    server = local_server
    ada = student(server, "ada")
    save(ada, "wait.py", "print('waiting', flush=True)\ninput()\n")

    async def go():
        async with RunClient(server.url, ada.http.cookies.get_dict()) as rc:
            await rc.send(type="run", path="wait.py")
            await rc.until("output", 60)
            await rc.ws._writer.send_frame(b"\xff\xfe{", aiohttp.WSMsgType.TEXT)
            msg = await rc.ws.receive(timeout=30)
            while msg.type == aiohttp.WSMsgType.TEXT:
                msg = await rc.ws.receive(timeout=30)
            return msg.type
    assert asyncio.run(go()) in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
    assert_all_released(server, ada)
