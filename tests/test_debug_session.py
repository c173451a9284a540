"""The debugger's trusted side without a program (server/runs/debugging.py):
what it takes from the IDE and from the program's lines, its clocks and
the pause rules, its place among the running programs. The program, the
run and the place are fakes; tests/test_debugger.py has the real ones."""
import asyncio

import pytest
from hypothesis import given, strategies as st

from server.errors import Refused
from server.runs import debugging
from server.runs.admission import QueueFull
from server.runs.debugging import DebugSession, clean_breakpoints, clean_pause, clean_watches


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(debugging.time, "monotonic", c)
    return c


class Program:
    """The run as its session reaches it (debugging.Program)."""

    def __init__(self, cpu=0.5):
        self.cpu = cpu
        self.told = []
        self.interrupted = 0

    def cpu_seconds(self):
        return self.cpu

    def tell(self, message):
        self.told.append(message)

    def interrupt(self):
        self.interrupted += 1


class Places:
    """A job's place: held at first; `take` answers with `answer` (or raises it)."""

    def __init__(self, answer=True):
        self.answer = answer
        self.held = True
        self.taken = 0

    def give_back(self):
        assert self.held
        self.held = False

    async def take(self):
        self.taken += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        self.held = self.answer
        return self.answer


def variable(name="x", value="1", **more):
    return {"name": name, "type": "int", "value": value, **more}


def pause(line=3, frame=0, **more):
    return {"type": "paused", "file": "main.py", "line": line, "frame": frame,
            "stack": [{"function": "<module>", "file": "main.py", "line": line}], "variables": [variable()], **more}


def session(places=None, cpu=0.5, **options):
    sent = []

    async def send(message):
        sent.append(message)
    s = DebugSession(send, places or Places(), **options)
    s.attach(Program(cpu))
    return s, sent


# -- what the IDE sends ------------------------------------------------------------------

def test_breakpoints_are_kept_sorted_once_each_and_empty_files_left_out():
    assert clean_breakpoints({"main.py": [9, 3, 3], "lib/util.py": [1], "empty.py": []}) == \
        {"main.py": [3, 9], "lib/util.py": [1]}


@pytest.mark.parametrize("value", [
    [], "main.py:3", {"/etc/passwd": [1]}, {"../x.py": [1]}, {"a//b.py": [1]}, {"./a.py": [1]}, {"": [1]},
    {"a\x00.py": [1]}, {"main.py": 3}, {"main.py": [True]}, {"main.py": [0]}, {"main.py": [10 ** 6 + 1]},
    {"main.py": ["3"]}, {f"f{i}.py": [1] for i in range(debugging.BREAKPOINT_FILES + 1)},
    {"main.py": list(range(1, debugging.BREAKPOINT_LINES + 2))},
])
def test_breakpoints_outside_the_home_or_not_lines_are_refused(value):
    with pytest.raises(Refused) as refused:
        clean_breakpoints(value)
    assert refused.value.code == "bad_field" and refused.value.message.startswith(("'breakpoints'", "At most"))


@pytest.mark.parametrize("value, ok", [
    ([], True), (["x", "len(items) > 3"], True), (["w"] * debugging.WATCHES, True),
    (["w"] * (debugging.WATCHES + 1), False), ([""], False), (["x" * (debugging.WATCH + 1)], False),
    (["a\x00b"], False), ([1], False), ("x", False), (None, False),
])
def test_watches_are_a_short_list_of_short_expressions(value, ok):
    if ok:
        assert clean_watches(value) == value
    else:
        with pytest.raises(Refused, match="'watches' must be a list of at most 10 expressions"):
            clean_watches(value)


# -- what the program writes -------------------------------------------------------------

def test_a_pause_is_rebuilt_field_by_field_and_nothing_else_passes():
    written = pause(variables=[variable("s", "a\x00b" + "x" * 400, changed=True, sneaky="<script>")],
                    extra="ignored", watches=[variable("w", "2")])
    written["stack"][0]["evil"] = 1
    clean = clean_pause(written)
    assert set(clean) == {"type", "file", "line", "stack", "frame", "variables", "watches"}
    assert clean["stack"] == [{"function": "<module>", "file": "main.py", "line": 3}]
    shown = clean["variables"][0]
    assert set(shown) == {"name", "type", "value", "changed"}
    assert shown["value"].startswith("a\\0b") and len(shown["value"]) <= debugging.TEXT + 1


def test_a_value_is_shown_to_its_depth_and_its_items_to_their_bound():
    deep = variable("d")
    node = deep
    for _ in range(10):
        child = variable("i")
        node["items"] = [child]
        node = child
    wide = variable("w", items=[variable(str(i)) for i in range(80)], more=30)
    clean = clean_pause(pause(variables=[deep, wide]))
    depth, node = 0, clean["variables"][0]
    while "items" in node:
        node, depth = node["items"][0], depth + 1
    assert depth == debugging.DEPTH
    assert len(clean["variables"][1]["items"]) == debugging.ITEMS and clean["variables"][1]["more"] == 30


def test_a_pause_holds_at_most_its_budget_of_values():
    many = [variable(str(i), items=[variable("i") for _ in range(debugging.ITEMS)])
            for i in range(debugging.VARIABLES)]
    assert clean_pause(pause(variables=many)) is None  # past NODES: not a pause a debugger writes


@pytest.mark.parametrize("change", [
    {"type": "pausing"}, {"stack": []}, {"stack": "x"}, {"stack": [1]}, {"frame": 1}, {"frame": True},
    {"frame": -1}, {"file": "/etc/passwd"}, {"file": "../x.py"}, {"line": -1}, {"line": "3"}, {"line": True},
    {"variables": {}}, {"variables": [{"name": "x"}]}, {"variables": [variable(value=3)]},
    {"globals": "x"}, {"watches": [1]},
])
def test_what_is_not_a_pause_the_debugger_writes_is_none(change):
    assert clean_pause(dict(pause(), **change)) is None


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                           max_leaves=30)


@given(st.dictionaries(st.sampled_from(["type", "file", "line", "frame", "stack", "variables", "globals", "watches"]),
                       json_values) | st.builds(lambda extra: dict(pause(), **extra),
                                                st.dictionaries(st.sampled_from(["line", "frame", "variables"]), json_values)))
def test_anything_a_program_writes_is_a_bounded_pause_or_none(message):
    clean = clean_pause(message)
    if clean is not None:
        assert clean["type"] == "paused" and 0 <= clean["frame"] < len(clean["stack"]) <= debugging.STACK
        assert isinstance(clean["line"], int) and not clean["file"].startswith("/")


# -- the session: commands, pauses, clocks and the place --------------------------------

def test_the_first_pause_is_sent_and_its_place_given_to_the_next_in_line(clock):
    places = Places()
    s, sent = session(places)

    async def go():
        assert s.wants(100)
        assert await s.from_program(pause())
    asyncio.run(go())
    assert sent == [clean_pause(pause())] and not places.held and s.waits_for_student
    clock.now += 30
    assert s.paused_seconds(clock.now) == 30


def test_a_program_that_cannot_be_counted_keeps_its_place_while_paused(clock):
    places = Places()
    s, sent = session(places, cpu=None)
    asyncio.run(s.from_program(pause()))
    assert places.held and len(sent) == 1 and not s.working_unplaced(None)


def test_a_step_takes_a_place_then_wakes_the_program_with_the_breakpoints_and_the_clock_ticks_again(clock):
    places = Places()
    s, sent = session(places, breakpoints={"main.py": [5]}, watches=["x"])

    async def go():
        await s.from_program(pause())
        clock.now += 20
        s.command("step", {})
        await s.going_on
    asyncio.run(go())
    assert places.taken == 1 and places.held
    assert s.program.told == [{"type": "step", "breakpoints": {"main.py": [5]}, "watches": ["x"]}]
    assert s.paused_since is None and s.paused_seconds(clock.now + 100) == 20
    assert s.expecting and not s.waits_for_student


def test_a_command_while_the_program_runs_is_refused_with_what_to_do(clock):
    s, _ = session()
    s.expecting = False  # running, no pause asked for
    with pytest.raises(Refused) as refused:
        s.command("step", {})
    assert refused.value.code == "not_paused" and "wait until it stops at a line, or press Stop" in refused.value.message


def test_breakpoints_reach_a_running_program_at_once_and_a_paused_one_with_its_next_step(clock):
    s, _ = session()
    s.command("breakpoints", {"breakpoints": {"main.py": [2]}})
    assert s.program.told == [{"type": "breakpoints", "breakpoints": {"main.py": [2]}}]
    asyncio.run(s.from_program(pause()))
    s.program.told.clear()
    s.command("breakpoints", {"breakpoints": {"main.py": [4]}})
    assert s.program.told == [] and s.breakpoints == {"main.py": [4]}


@pytest.mark.parametrize("frame", [-1, debugging.STACK, "1", True, None])
def test_a_frame_out_of_the_stack_is_refused(clock, frame):
    s, _ = session()
    asyncio.run(s.from_program(pause()))
    with pytest.raises(Refused, match="'frame' must be a whole number from 0 to 63"):
        s.command("frame", {"frame": frame})


def test_new_watches_while_paused_work_the_same_pause_out_again_on_a_deadline(clock):
    s, _ = session()

    async def go():
        await s.from_program(pause())
        s.command("watches", {"watches": ["y"]})
        await s.going_on
    asyncio.run(go())
    assert s.program.told == [{"type": "frame", "breakpoints": {}, "watches": ["y"], "frame": 0}]
    assert not s.overdue(clock.now + debugging.PAUSE_SECONDS)
    assert s.overdue(clock.now + debugging.PAUSE_SECONDS + 1)


def test_a_full_line_leaves_the_program_paused_and_says_so(clock):
    s, sent = session(Places(answer=QueueFull()))

    async def go():
        await s.from_program(pause())
        s.command("continue", {})
        await s.going_on
    asyncio.run(go())
    assert sent[1]["type"] == "notice" and "stays paused. Try the step again in a moment." in sent[1]["message"]
    assert sent[2] == sent[0] and s.program.told == [] and s.waits_for_student


def test_only_the_lines_asked_for_are_parsed_and_a_pause_only_once_per_command(clock):
    s, sent = session()
    assert not s.wants(debugging.LINE_BYTES + 1)
    taken = [s.wants(10) for _ in range(debugging.PARSED_PER_COMMAND + 2)]
    assert taken == [True] * debugging.PARSED_PER_COMMAND + [False, False]

    async def go():
        assert await s.from_program(pause())
        assert not await s.from_program(pause(line=4))  # not asked for: counted as output
    asyncio.run(go())
    assert len(sent) == 1


def test_a_paused_program_idle_past_the_limit_is_ended_and_one_with_a_command_on_its_way_is_not(clock):
    s, _ = session(Places(answer=True))

    async def go():
        await s.from_program(pause())
        assert not s.idle(clock.now + 59, 60) and s.idle(clock.now + 61, 60)
        s.command("step", {})
        assert not s.idle(clock.now + 1000, 60)
        await s.going_on
    asyncio.run(go())


def test_a_program_paused_without_a_place_may_not_keep_computing(clock):
    s, _ = session(cpu=2.0)
    asyncio.run(s.from_program(pause()))
    assert not s.working_unplaced(2.0 + debugging.PAUSED_CPU_SECONDS)
    assert s.working_unplaced(2.0 + debugging.PAUSED_CPU_SECONDS + 0.1)


def test_what_was_slow_is_named_in_the_students_words(clock):
    s, _ = session(watches=["total / count"])

    async def go(line):
        assert await s.from_program({"type": "pausing"})
        assert await s.from_program(line)
    asyncio.run(go({"type": "slow", "watch": 0}))
    assert "your watch 'total / count'" in s.slow_words() and s.overdue(clock.now + debugging.PAUSE_SECONDS + 1)
    s.slow = None
    asyncio.run(s.from_program({"type": "slow", "value": "grid"}))
    assert "the value of 'grid' (its __repr__" in s.slow_words()
    s.slow = {"watch": 5}  # not one of the watches: said in general
    assert "the values to show at the pause" in s.slow_words()


def test_ctrl_c_reaches_a_running_program_at_once_and_a_paused_one_with_a_place(clock):
    s, _ = session()
    s.expecting = False
    s.interrupt()
    assert s.program.interrupted == 1

    async def go():
        s.expecting = True
        await s.from_program(pause())
        s.interrupt()
        assert s.program.interrupted == 1  # not before its place
        await s.going_on
    asyncio.run(go())
    assert s.program.interrupted == 2


def test_closing_gives_up_a_command_still_waiting_for_a_place(clock):
    class Slow(Places):
        async def take(self):
            await asyncio.sleep(60)

    s, _ = session(Slow())

    async def go():
        await s.from_program(pause())
        s.command("step", {})
        await asyncio.sleep(0)
        assert s.waiting_for_place
        await asyncio.wait_for(s.close(), 5)
        assert s.going_on.cancelled() and s.program.told == []
    asyncio.run(go())


def test_the_options_of_a_debug_message_are_checked():
    assert debugging.options({"breakpoints": {"a.py": [2, 1]}, "watches": ["x"]}) == \
        {"breakpoints": {"a.py": [1, 2]}, "watches": ["x"]}
    assert debugging.options({}) == {"breakpoints": {}, "watches": []}
