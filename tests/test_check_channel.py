"""The control channel of a run, and the checks built on it (testing.py):
a student's program, or the checks' code, holds one end at fd 3; the
server (run.py: Run's `channel`, `tell`, `check`) the other. Driven as
tests/test_sandboxes.py drives sandboxes (no HTTP server), in `local`
(bubblewrap), and in `docker` where the kind decides (floods, escapes,
exits, timeouts); the grader is played by a small relay here.

Needs root, as tests/test_sandboxes.py does.
"""
import asyncio
import json
import math
import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings as hypothesis_settings, strategies as st

from server.runs.child import testing
from server.runs.protocol import frame
from server.runs.run import Run
from server.runs.spec import Limits, Mode, RunSpec
from server.runs.starts import ready
from tests.test_sandboxes import UID, home, sandbox, settings, write  # noqa: F401 (home, sandbox: fixtures)

TIMEOUT = 60


# -- the value codec ------------------------------------------------------------------

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary()
hashables = st.recursive(scalars, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
                         max_leaves=8)
values = st.recursive(
    scalars,
    lambda inner: (st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.sets(hashables, max_size=3)
                   | st.frozensets(hashables, max_size=3) | st.dictionaries(st.text(), inner, max_size=3)
                   | st.dictionaries(hashables, inner, max_size=3)),
    max_leaves=30)


def crossed(value):
    """`value` as the other side sees it: encoded, sent as a JSON line, decoded."""
    return testing.decode(json.loads(json.dumps(testing.encode(value), allow_nan=False)))


@given(values)
@hypothesis_settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
def test_values_cross_as_they_were(value):
    back = crossed(value)
    assert back == value and type(back) is type(value)


def test_special_values_cross():
    assert math.isnan(crossed(float("nan")))
    assert crossed([float("inf"), float("-inf")]) == [math.inf, -math.inf]
    assert crossed({"$": 1, "a": 2}) == {"$": 1, "a": 2}  # the tag's own name as a key
    assert crossed(bytearray(b"ab")) == b"ab"
    opaque = crossed(range(3))
    assert repr(opaque) == "range(0, 3)" and opaque != opaque and opaque != range(3)


def test_values_too_large_or_too_deep_cross_as_too_large():
    deep = []
    for _ in range(100):
        deep = [deep]
    for value in (deep, "x" * 10 ** 6, list(range(10 ** 6)), b"\0" * 10 ** 6, 10 ** 5000):
        encoded = testing.encode(value)
        assert encoded["$"] == "too_large"
        assert "too large" in repr(testing.decode(encoded))
    loop = []
    loop.append(loop)
    assert testing.encode(loop)["$"] == "too_large"


@given(st.lists(st.text() | st.binary() | st.integers(), max_size=2000))
@hypothesis_settings(max_examples=50)
def test_an_encoded_value_fits_a_channel_line(value):
    assert len(json.dumps(testing.encode(["\0" * 30000] * 3 + value))) < testing.CHANNEL_LINE // 2


json_data = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5)
    | st.sampled_from(["$", "tuple", "set", "frozenset", "dict", "bytes", "float", "repr", "too_large", "nan"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["$", "v", "type", "x"]), inner,
                                                                 max_size=3),
    max_leaves=20)


@given(json_data)
@hypothesis_settings(max_examples=400)
def test_hostile_data_decodes_or_raises_value_error(data):
    try:
        testing.decode(data)
    except ValueError:
        pass


def test_deeply_nested_data_raises_value_error():
    data = []
    for _ in range(10000):
        data = [data]
    with pytest.raises(ValueError):
        testing.decode(data)
    with pytest.raises(ValueError):
        testing.decode(object())


# -- the checks' sentences (testing.py in this process, a fake student) -------------

def checked(options, answer=None):
    """testing.main('test') here, over a socketpair whose other end
    answers calls with answer(call): the messages it sent."""
    import socket
    import threading
    ours, theirs = socket.socketpair()
    sent = []

    def student():
        with theirs.makefile("rwb") as f:
            for line in f:
                message = json.loads(line)
                sent.append(message)
                if message["type"] == "call":
                    f.write(json.dumps(dict(answer(message), type="reply", id=message["id"])).encode() + b"\n")
                    f.flush()
    thread = threading.Thread(target=student)
    thread.start()
    saved = dict(sys_modules_of(options))
    try:
        assert testing.test(options, testing.Channel(ours.fileno())) == 0
    finally:
        ours.shutdown(socket.SHUT_RDWR)
        thread.join(10)
        ours.close()
        theirs.close()
        restore(saved)
    return sent


def sys_modules_of(options):
    import sys
    return {name: sys.modules.get(name) for name in (options.get("module"), "tests")}


def restore(saved):
    import sys
    for name, module in saved.items():
        if module is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = module


TESTS = """
from average import average
import average as student

def test_pair():
    assert average([1, 2]) == 1.5

def test_expected_first():
    assert 1.5 == student.average([1, 2])

def test_with_a_hint():
    assert average([2, 2]) == 2, "two equal numbers: their average is that number"

def test_raises():
    try:
        average([])
    except ZeroDivisionError:
        return
    assert False, "average([]) should raise ZeroDivisionError"

def test_truthy():
    assert student.is_even(3)

def test_crash():
    return {}["missing"]
"""


def test_messages_of_checks(tmp_path):
    (tmp_path / "tests.py").write_text(TESTS)
    source = "import statistics\n\ndef average(xs):\n    total = 0\n    for x in xs:\n        total += x\n" \
             "    return total // len(xs)\n"
    options = {"module": "average", "tests_file": str(tmp_path / "tests.py"), "source": source,
               "tests": ["test_pair", "test_expected_first", "test_with_a_hint", "test_raises", "test_truthy",
                         "test_crash", "test_none_such"],
               "code_checks": [{"id": "loop", "rule": "uses_loop"}, {"id": "def", "rule": "defines:average"},
                               {"id": "stats", "rule": "no_import:statistics"},
                               {"id": "sum", "rule": "uses_call:sum"}, {"id": "odd", "rule": "sorcery"}],
               "output_checks": [{"id": "exact", "compare": "exact", "expected": "Hi\n", "actual": "Hi\r\n"},
                                 {"id": "norm", "compare": "normalized", "expected": "a  B\n\n",
                                  "actual": "A b   \n"},
                                 {"id": "regex", "compare": "regex", "expected": r"Total: \d+",
                                  "actual": "Total: 12\n"},
                                 {"id": "diff", "compare": "exact", "expected": "1\n2\n", "actual": "1\n3\n"}]}

    def student(call):
        xs = testing.decode(call["args"])[0] if call["function"] == "average" else None
        if call["function"] == "is_even":
            return {"value": False}
        if not xs:
            return {"raised": {"type": "ZeroDivisionError", "message": "division by zero", "line": 7,
                               "file": "average.py"}}
        return {"value": testing.encode(sum(xs) // len(xs))}

    sent = checked(options, student)
    results = {m["id"]: m for m in sent if m["type"] == "result"}
    assert sent[-1] == {"type": "done"}
    assert [m["id"] for m in sent if m["type"] == "result"] == \
        ["loop", "def", "stats", "sum", "odd", "exact", "norm", "regex", "diff"] + options["tests"]
    assert results["loop"]["passed"] and results["loop"]["line"] == 5
    assert results["def"]["passed"]
    assert not results["stats"]["passed"]
    assert results["stats"]["message"] == "Line 1 imports statistics, which this exercise does not allow."
    assert results["sum"]["message"] == "The code never calls sum."
    assert not results["odd"]["passed"] and "sorcery" in results["odd"]["message"]
    assert results["exact"]["passed"] and results["norm"]["passed"] and results["regex"]["passed"]
    assert not results["diff"]["passed"] and "-2\n+3" in results["diff"]["diff"]
    pair = results["test_pair"]
    assert pair["message"] == "assert average([1, 2]) == 1.5 failed: average([1, 2]) returned 1."
    assert (pair["expected"], pair["actual"], pair["line"]) == ("1.5", "1", 6)
    first = results["test_expected_first"]
    assert (first["expected"], first["actual"]) == ("1.5", "1")
    assert results["test_with_a_hint"]["passed"]
    assert results["test_raises"]["passed"]  # the student's ZeroDivisionError is one here too
    assert results["test_truthy"]["message"] == "assert student.is_even(3) failed: student.is_even(3) returned False."
    assert results["test_crash"]["message"] == "The test stopped: KeyError: 'missing'."
    assert results["test_crash"]["line"] == 25
    assert results["test_none_such"]["message"] == "The tests file has no test named test_none_such."


def test_a_source_that_does_not_parse_is_not_gradable(tmp_path):
    sent = checked({"source": "def average(xs)\n    return 1\n", "code_checks": [{"id": "x", "rule": "uses_loop"}],
                    "tests": ["test_pair"], "module": "average"})
    assert sent[0]["type"] == "not_gradable"
    assert sent[0]["error"]["line"] == 1 and sent[0]["error"]["type"] == "SyntaxError"
    assert sent[1:] == [{"type": "done"}]


# -- sandboxes ---------------------------------------------------------------------

async def started(kind, home, runs=2):
    """A sandbox that will serve `runs` runs, ready for the first."""
    prepared = await kind.prepare(home, UID, dict(settings(kind), runs=runs))
    assert await ready(prepared), prepared.diagnostics()
    return prepared


async def closed(prepared):
    await prepared.kill()
    await prepared.release()


class Messages:
    """What a run's channel brought, to a bound; optionally slow to take it."""

    def __init__(self, pause=0.0, keep=1000):
        self.pause, self.keep = pause, keep
        self.list, self.count = [], 0
        self.arrived = asyncio.Event()

    async def __call__(self, message):
        self.count += 1
        if len(self.list) < self.keep:
            self.list.append(message)
        self.arrived.set()
        if self.pause:
            await asyncio.sleep(self.pause)


def collect(into):
    async def send(message):
        into.append(message)
    return send


def stdout_of(output):
    return "".join(m["data"] for m in output if m["type"] == "output" and m["stream"] == "stdout")


ECHO = """
import json, os
channel = os.fdopen(int(os.environ["PYCLASSROOM_CHANNEL"]), "r+b", buffering=0)
for line in channel:
    message = json.loads(line)
    channel.write(json.dumps({"type": "echo", "n": message["n"] * 2}).encode() + b"\\n")
    if message["n"] == 3:
        break
"""


def spec_of(cfg, path, **fields):
    """A run of `path` (in the sandbox's home) with the worker's limits."""
    return RunSpec(0, "test", tuple(path.split("/")), Limits.of(cfg), **fields)


async def echo_works(kind, prepared):
    """A run of ECHO (in prepared's home) gets back what it was told."""
    messages = Messages()
    run = Run(spec_of(kind.cfg, "echo.py"), prepared, collect([]), channel=messages)
    going = asyncio.ensure_future(run.go())
    for n in (1, 2, 3):
        await asyncio.sleep(0)
        run.tell({"n": n})
    exit_ = await asyncio.wait_for(going, TIMEOUT)
    assert exit_["reason"] == "ok", exit_
    assert messages.list == [{"type": "echo", "n": 2}, {"type": "echo", "n": 4}, {"type": "echo", "n": 6}]


async def one_run(kind, home, path, channel=None, meanwhile=None, **options):
    """Run `path` in a fresh sandbox, with meanwhile(run, sandbox) once
    its `go` is sent: (exit message, stdout, the Run)."""
    prepared = await started(kind, home, runs=1)
    try:
        output = []
        run = Run(spec_of(kind.cfg, path, **options), prepared, collect(output), channel=channel)
        going = asyncio.ensure_future(run.go())
        await asyncio.sleep(0)
        if meanwhile:
            meanwhile(run, prepared)
        return await asyncio.wait_for(going, TIMEOUT), stdout_of(output), run
    finally:
        await closed(prepared)


@pytest.mark.parametrize("sandbox", ["local"], indirect=True)  # the launcher's channel; docker's in the hostile flood
def test_the_channel_carries_lines_of_json_both_ways(sandbox, home):
    source = """
import os, stat
open_fds = []
for fd in range(64):
    try:
        os.fstat(fd)
        open_fds.append(fd)
    except OSError:
        pass
print(open_fds, os.environ.get("PYCLASSROOM_CHANNEL"), stat.S_ISSOCK(os.fstat(3).st_mode))
""" + ECHO
    write(home, "echo.py", source)
    messages = Messages()

    def tell(run, _):
        for n in (1, 2, 3):
            run.tell({"n": n})
    exit_, text, run = asyncio.run(one_run(sandbox(), home, "echo.py", messages, tell))
    assert exit_["reason"] == "ok", (exit_, text)
    assert "[0, 1, 2, 3] 3 True" in text  # the channel, and nothing else of the launcher's
    assert messages.list == [{"type": "echo", "n": 2}, {"type": "echo", "n": 4}, {"type": "echo", "n": 6}]
    with pytest.raises(ValueError):
        run.tell({"big": "x" * (300 << 10)})


@pytest.mark.parametrize("sandbox", ["local"], indirect=True)  # the launcher's fds, the same in every kind
def test_a_run_without_a_channel_has_no_fd_3(sandbox, home):
    write(home, "prog.py", "import os\ntry:\n    os.write(3, b'{}\\n')\nexcept OSError as e:\n    print('no', e.errno)\n"
                           "print(os.environ.get('PYCLASSROOM_CHANNEL'))\n")

    def stray(_, prepared):
        prepared.send(frame(b"c", b'{"type": "stray"}'))  # dropped by the launcher
    exit_, text, _ = asyncio.run(one_run(sandbox(), home, "prog.py", meanwhile=stray))
    assert exit_["reason"] == "ok" and "no 9" in text and "None" in text


@pytest.mark.parametrize("sandbox", ["local"], indirect=True)  # the launcher's echo and nice, the same in every kind
def test_echo_off_and_nice(sandbox, home):
    write(home, "prog.py", "import os\nname = input()\nprint('nice', os.nice(0), 'hi', name)\n")
    typed = lambda run, _: run.stdin("Ada\r")  # noqa: E731
    exit_, text, _ = asyncio.run(one_run(sandbox(), home, "prog.py", meanwhile=typed, echo=False, nice=5))
    assert exit_["reason"] == "ok"
    assert text.strip() == "nice 15 hi Ada"  # the launcher's 10, plus 5; "Ada" typed is not echoed


HOSTILE = {
    "flood": """
import os, time
line = b'{"type": "flood", "pad": "%s"}\\n' % (b"x" * 1000)
written, end = 0, time.monotonic() + 1
while time.monotonic() < end:
    written += os.write(3, line)
print("written", written, len(line))
""",
    "long_line": """
import os
chunk = b"x" * (1 << 20)
for _ in range(10):
    os.write(3, chunk)
os.write(3, b'\\n{"type": "after"}\\n')
""",
    "garbage": """
import os
os.write(3, os.urandom(200000) + b"\\n")
os.write(3, b"not json\\n[1, 2]\\n\\"text\\"\\n" + b"[" * 100000 + b"\\n\\xff\\xfe\\n")
os.write(3, b'{"type": "after"}\\n{"type": "unfinished"')
""",
    "closed": """
import os
os.close(3)
try:
    os.write(3, b'{"type": "after"}\\n')
except OSError as e:
    print("closed", e.errno)
""",
    "keeper": """
import os, time
if os.fork() == 0:
    os.setsid()
    while True:
        os.write(3, b'{"type": "still here"}\\n')
        time.sleep(0.01)
os.write(3, b'{"type": "after"}\\n')
""",
}


def hostile_channels():
    """Every attack on local; on docker too the flood (through the container's
    stdio, at the server's pace) and the keeper (a setsid escape the kind
    must end). What the launcher reads of a line is the same in every kind."""
    for attack in sorted(HOSTILE):
        yield pytest.param("local", attack, id=f"local-{attack}")
        if attack in ("flood", "keeper"):
            yield pytest.param("docker", attack, id=f"docker-{attack}")


@pytest.mark.parametrize(("sandbox", "attack"), hostile_channels(), indirect=["sandbox"])
def test_a_hostile_channel_does_not_disturb_the_launcher_or_the_server(sandbox, home, attack):
    """Each attack ends as the kernel says, the server's side stays
    bounded, and the next run in the same sandbox talks as it should."""
    write(home, "prog.py", HOSTILE[attack])
    write(home, "echo.py", ECHO)
    kind = sandbox()

    async def scenario():
        prepared = await started(kind, home)
        try:
            output, messages = [], Messages(pause=0.001 if attack == "flood" else 0)
            run = Run(spec_of(kind.cfg, "prog.py"), prepared, collect(output), channel=messages)
            going = asyncio.ensure_future(run.go())
            await asyncio.sleep(0.2)
            for n in range(20):  # told to a program that does not read (or closed its end)
                run.tell({"n": n, "pad": "x" * 100000})
            exit_ = await asyncio.wait_for(going, TIMEOUT)
            held = len(prepared.stdout._buffer)
            assert await ready(prepared)  # the launcher serves its next run
            await echo_works(kind, prepared)
            return exit_, stdout_of(output), messages, run.channel_dropped, held
        finally:
            await closed(prepared)

    exit_, text, messages, dropped, held = asyncio.run(scenario())
    assert exit_["reason"] == "ok", (exit_, text)
    assert held <= 256 << 10
    if attack == "flood":
        # It went at the server's pace (at most a message a millisecond,
        # and what the buffers between them hold), and every line arrived.
        written, size = map(int, text.split()[-2:])
        assert written < 4 << 20
        assert messages.count * size == written
    elif attack == "long_line":
        assert messages.list == [{"type": "overflow"}, {"type": "after"}]
    elif attack == "garbage":
        assert messages.list == [{"type": "after"}]
        assert dropped >= 6
    elif attack == "closed":
        assert "closed 9" in text and messages.list == []
    else:
        assert {"type": "after"} in messages.list


# -- checks, end to end: the student's module in one sandbox, the tests in another ---

CHECK_TESTS = """
from average import average
import average as student

def test_pair():
    assert average([1, 2]) == 1.5

def test_three():
    assert average([1, 2, 6]) == 3

def test_cannot_see_the_tests():
    assert student.probe() == "nothing"
"""

CORRECT = """
def average(xs):
    return sum(xs) / len(xs)

def probe():
    found = []
    try:
        import tests
        found.append(tests.__file__)
    except ImportError:
        pass
    import os
    found += [p for p in ("tests.py", "/home/student/tests.py", CHECKER_HOME) if os.path.exists(p)]
    return found or "nothing"

if __name__ == "__main__":
    print(average([int(input()), 2]))
"""


class Grader:
    """The grader in miniature: a `serve` run of the student's file and a
    `test` run of the teacher's tests, the calls relayed between them with
    a deadline per call. Only the tests' channel says what passed."""

    def __init__(self, kind, student_home, checker_home, call_timeout=5.0):
        self.kind, self.homes, self.call_timeout = kind, (student_home, checker_home), call_timeout
        self.serve_output, self.results = [], []
        self.calls, self.replies = asyncio.Queue(), asyncio.Queue()
        self.imported = None  # the student's side's first word: ready, or import_failed

    async def check(self, options):
        """(the tests' exit, the student's side's exit)"""
        student_box = await started(self.kind, self.homes[0], runs=1)
        checker_box = await started(self.kind, self.homes[1], runs=1)
        try:
            return await self._check(student_box, checker_box, options)
        finally:
            await closed(student_box)
            await closed(checker_box)

    async def _check(self, student_box, checker_box, options):
        cfg = self.kind.cfg
        self.serve = Run(spec_of(cfg, "average.py", mode=Mode.SERVE, nice=5), student_box,
                         collect(self.serve_output), channel=self.replies.put)
        tester = Run(spec_of(cfg, "tests.py", mode=Mode.TEST, nice=5, tests=options), checker_box, collect([]),
                     channel=self._from_tests)
        self.serving = asyncio.ensure_future(self.serve.go())
        self.imported = await self._answer(lambda m: m.get("type") in ("ready", "import_failed"))
        testing = asyncio.ensure_future(tester.go())
        while True:
            getting = asyncio.ensure_future(self.calls.get())
            await asyncio.wait([getting, testing], return_when=asyncio.FIRST_COMPLETED)
            if not getting.done():
                getting.cancel()
                break
            call = getting.result()
            reply = {"failed": {"message": "your file could not be imported"}}
            if self.imported.get("type") == "ready" and not self.serving.done():
                self.serve.tell(call)
                reply = await self._answer(lambda m: m.get("type") == "reply" and m.get("id") == call["id"])
            reply = {k: v for k, v in reply.items() if k in ("value", "raised", "failed")}
            tester.tell(dict(reply, type="reply", id=call["id"]))
        test_exit = await asyncio.wait_for(testing, TIMEOUT)
        self.serve.end_channel()
        return test_exit, await asyncio.wait_for(self.serving, TIMEOUT)

    async def _from_tests(self, message):
        if message.get("type") == "call":
            await self.calls.put(message)
        else:
            self.results.append(message)

    async def _answer(self, wanted):
        """The student's side's next message that `wanted` accepts (it may
        write anything on its channel); `failed` when it ended, or took too
        long (then it is stopped)."""
        deadline = asyncio.get_running_loop().time() + self.call_timeout
        while True:
            getting = asyncio.ensure_future(self.replies.get())
            done, _ = await asyncio.wait([getting, self.serving], return_when=asyncio.FIRST_COMPLETED,
                                         timeout=max(0, deadline - asyncio.get_running_loop().time()))
            if getting not in done:
                break
            if wanted(getting.result()):
                return getting.result()
        getting.cancel()
        if self.serving.done():
            return {"failed": {"message": "your program ended before it answered"}}
        await self.serve.stop("timeout")
        return {"failed": {"message": f"it took longer than {self.call_timeout:g} seconds"}}


def check_homes(data_dir, student_source, tests=CHECK_TESTS):
    """A student's home with average.py, a checker's home with tests.py:
    two folders that share nothing (the student's file is told the
    other's path on the host, to look for it)."""
    homes = [tempfile.mkdtemp(prefix="home-", dir=data_dir) for _ in range(2)]
    for path in homes:
        os.chown(path, UID, UID)
    write(homes[0], "average.py", student_source.replace("CHECKER_HOME", repr(homes[1])))
    write(homes[1], "tests.py", tests)
    return homes


OPTIONS = {"module": "average", "tests_file": "tests.py", "tests": ["test_pair", "test_three",
                                                                     "test_cannot_see_the_tests"],
           "code_checks": [{"id": "defines", "rule": "defines:average"}]}


def checked_in_sandboxes(sandbox, data_dir, student_source, call_timeout=5.0):
    """Check `student_source` with CHECK_TESTS: (results by id, the grader, exits)."""
    student_home, checker_home = check_homes(data_dir, student_source)
    grader = Grader(sandbox(), student_home, checker_home, call_timeout)
    options = dict(OPTIONS, source=student_source)
    exits = asyncio.run(grader.check(options))
    assert grader.results[-1] == {"type": "done"}, grader.results
    return {r["id"]: r for r in grader.results if r["type"] == "result"}, grader, exits


@pytest.mark.parametrize("sandbox", ["local"], indirect=True)  # the grader and the launcher, as in every kind
def test_a_correct_module_passes(sandbox, data_dir):
    results, grader, (test_exit, serve_exit) = checked_in_sandboxes(sandbox, data_dir, CORRECT)
    assert grader.imported == {"type": "ready"}
    assert all(r["passed"] for r in results.values()), results
    assert list(results) == ["defines", "test_pair", "test_three", "test_cannot_see_the_tests"]
    assert test_exit["reason"] == "ok" and serve_exit["reason"] == "ok"  # the channel's end ends serve


@pytest.mark.parametrize("sandbox", ["local"], indirect=True)  # the grader's outcome, the same in every kind
def test_a_wrong_module_fails_with_what_it_returned(sandbox, data_dir):
    results, *_ = checked_in_sandboxes(sandbox, data_dir, CORRECT.replace("sum(xs) / len(xs)", "sum(xs) // len(xs)"))
    pair = results["test_pair"]
    assert not pair["passed"]
    assert pair["message"] == "assert average([1, 2]) == 1.5 failed: average([1, 2]) returned 1."
    assert (pair["expected"], pair["actual"], pair["line"]) == ("1.5", "1", 6)
    assert results["test_three"]["passed"]


@pytest.mark.parametrize("sandbox", ["local"], indirect=True)  # the launcher's checking, the same in every kind
def test_an_exception_in_the_students_function_names_its_line(sandbox, data_dir):
    results, *_ = checked_in_sandboxes(sandbox, data_dir, CORRECT.replace("return sum(xs) / len(xs)",
                                                                         "return xs[10]"))
    assert results["test_pair"]["message"] == \
        "average([1, 2]) raised IndexError: list index out of range (line 3 of average.py)."


def test_exit_in_the_middle_of_a_call_fails(sandbox, data_dir):
    source = CORRECT.replace("return sum(xs) / len(xs)", "import os\n    os._exit(0)")
    results, grader, (_, serve_exit) = checked_in_sandboxes(sandbox, data_dir, source)
    assert not any(r["passed"] for r in results.values() if r["id"].startswith("test_"))
    assert results["test_pair"]["message"] == \
        "average([1, 2]) did not answer: your program ended before it answered."


def test_an_endless_loop_is_stopped(sandbox, data_dir):
    source = CORRECT.replace("return sum(xs) / len(xs)", "while True:\n        pass")
    results, grader, (_, serve_exit) = checked_in_sandboxes(sandbox, data_dir, source, call_timeout=2.0)
    assert results["test_pair"]["message"] == "average([1, 2]) did not answer: it took longer than 2 seconds."
    assert not results["test_three"]["passed"]
    assert serve_exit["reason"] == "timeout"


@pytest.mark.parametrize("sandbox", ["local"], indirect=True)  # the launcher's checking, the same in every kind
def test_a_fake_result_and_patched_builtins_change_nothing(sandbox, data_dir):
    """The student prints results, writes them on the channel, patches
    builtins and assert's exception: the checks are elsewhere."""
    source = """
import builtins, json, os, sys
fake = json.dumps({"type": "result", "id": "test_pair", "passed": True, "message": "passed"})
print(fake)
os.write(3, (fake + "\\n" + json.dumps({"type": "done"}) + "\\n").encode())
builtins.AssertionError = type("Never", (Exception,), {})
builtins.abs = sys.modules["builtins"].round = lambda *a: 0

def average(xs):
    print(fake)
    return 0
""" + CORRECT.split("def probe", 1)[0].replace("def average", "def _unused") + "def probe():\n    return 'nothing'\n"
    results, grader, _ = checked_in_sandboxes(sandbox, data_dir, source)
    assert grader.imported == {"type": "ready"}
    assert not results["test_pair"]["passed"]
    assert results["test_pair"]["message"] == "assert average([1, 2]) == 1.5 failed: average([1, 2]) returned 0."


@pytest.mark.parametrize("sandbox", ["local"], indirect=True)  # the launcher refuses input, as in every kind
def test_input_at_import_fails_with_a_sentence(sandbox, data_dir):
    source = "name = input('Name? ')\n" + CORRECT
    results, grader, _ = checked_in_sandboxes(sandbox, data_dir, source)
    error = grader.imported["error"]
    assert grader.imported["type"] == "import_failed"
    assert (error["type"], error["line"], error["file"]) == ("EOFError", 1, "average.py")
    assert error["message"] == testing.NO_INPUT
    assert "<testing>" not in error["traceback"]
    assert results["test_pair"]["message"] == "average([1, 2]) did not answer: your file could not be imported."
