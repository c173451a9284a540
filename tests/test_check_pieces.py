"""A check's pieces that need no program run (server/checks/): the
transcript of a run's output, prompts and waits, the code rules that
hold while a program runs (code_rules.py) read from the runs' exits, and
the relay between the checker and the student's program."""
import asyncio
from types import SimpleNamespace

import pytest
from hypothesis import given, strategies as st

from server.checks import code_rules
from server.checks.grader import Relay
from server.checks.transcript import MAX_PIECES, OUTPUT, PROMPT, TYPED, Transcript, shown
from server.runs.child import import_guard


def test_prompts_are_the_output_input_was_waiting_after_and_typed_lines_fill_the_waits():
    t = Transcript(1000)
    t.output("Name? ")
    t.waits("Name? ")
    t.output("Hi Ada\r\nAge? ")
    t.waits("Age? ")
    assert t.text() == "Name? Hi Ada\nAge? "
    assert t.pieces("Ada\n36\n") == [[PROMPT, "Name? "], [TYPED, "Ada\n"], [OUTPUT, "Hi Ada\n"],
                                     [PROMPT, "Age? "], [TYPED, "36\n"]]


def test_a_wait_past_the_last_typed_line_shows_nothing_and_a_last_line_without_newline_is_given():
    t = Transcript(1000)
    for _ in range(3):
        t.waits()
    assert t.pieces("only\nlast") == [[TYPED, "only\nlast"]]
    assert t.pieces("") == []


def test_a_prompt_that_is_not_the_end_of_the_output_stays_output():
    t = Transcript(1000)
    t.output("Total: 3\n")
    t.waits("Other prompt: ")
    assert t.pieces("x\n") == [[OUTPUT, "Total: 3\n"], [TYPED, "x\n"]]


def test_a_prompt_that_was_all_the_output_leaves_no_empty_piece():
    t = Transcript(1000)
    t.output("> ")
    t.waits("> ")
    assert t.pieces("go\n") == [[PROMPT, "> "], [TYPED, "go\n"]]


def test_the_text_kept_stops_at_the_limit():
    t = Transcript(10)
    t.output("0123456")
    t.output("789abcdef")
    t.output("more")
    assert t.text() == "0123456789" and t.size == 10


def test_past_the_bound_on_waits_a_prompt_stays_output_and_nothing_more_is_typed():
    t = Transcript(10 ** 6)
    for _ in range(MAX_PIECES):
        t.waits()
    t.output("? ")
    t.waits("? ")
    pieces = t.pieces("y\n" * (MAX_PIECES + 5))
    assert pieces[-1] == [OUTPUT, "? "] and sum(text.count("y") for _, text in pieces) == MAX_PIECES


@given(st.lists(st.tuples(st.booleans(), st.text(alphabet="ab> \n", max_size=6)), max_size=30),
       st.text(alphabet="xy\n", max_size=20))
def test_the_pieces_without_the_typed_lines_are_the_text(events, typed):
    t = Transcript(10 ** 6)
    for is_wait, text in events:
        t.waits(text) if is_wait else t.output(text)
    pieces = t.pieces(typed)
    assert "".join(text for kind, text in pieces if kind != TYPED) == t.text()
    assert all(a[0] != b[0] for a, b in zip(pieces, pieces[1:]))  # neighbours of a kind are joined
    assert "".join(text for kind, text in pieces if kind == TYPED) in typed


@pytest.mark.parametrize("value, ok", [
    ([], True), ([[OUTPUT, "a"], [PROMPT, "b"], [TYPED, "c"]], True), ("text", False), ([["other", "a"]], False),
    ([[OUTPUT]], False), ([[OUTPUT, 3]], False), ([(OUTPUT, "a")], False), (0, False),
])
def test_only_a_transcript_the_checker_could_send_is_shown(value, ok):
    assert (shown(value) is value) == ok and (shown(value) is None) == (not ok)


# -- code rules ----------------------------------------------------------------------

def check(id, rule, kind="code"):
    return SimpleNamespace(id=id, kind=kind, rule=rule)


CHECKS = [check("a", "no_import:random"), check("b", "uses_loop"), check("c", "no_import:math"),
          check("d", "no_import:random"), check("e", "no_import:os", kind="output"), check("f", "no_import:")]


def test_the_forbidden_modules_are_named_once_each_in_order():
    assert code_rules.forbidden(CHECKS) == ("random", "math")
    assert code_rules.forbidden([check("b", "uses_loop")]) == ()


def test_an_exit_that_says_a_module_was_imported_fails_every_rule_naming_it():
    forbid = code_rules.forbidden(CHECKS)
    exits = [{"type": "exit", "code": 0}, {"type": "exit", "code": import_guard.exit_code(0)}, None]
    verdicts = code_rules.broken_while_running(CHECKS, forbid, exits)
    assert set(verdicts) == {"a", "d"}
    assert verdicts["a"] == {"type": "result", "id": "a", "passed": False, "line": None, "seen": "while the program ran",
                             "message": "Your program imported random while it ran (itself, or through a module it "
                                        "imported), which this exercise does not allow."}


def test_an_exit_that_hid_its_imports_fails_every_rule_with_a_sentence_saying_why():
    forbid = code_rules.forbidden(CHECKS)
    verdicts = code_rules.broken_while_running(CHECKS, forbid, [{"type": "exit", "code": import_guard.EXIT_HIDDEN}])
    assert set(verdicts) == {"a", "c", "d"}
    assert "cannot tell whether it imported math" in verdicts["c"]["message"]


@pytest.mark.parametrize("exits", [[], [None], ["exit"], [{"type": "error", "code": 200}], [{"type": "exit", "code": 1}],
                                   [{"type": "exit"}]])
def test_exits_that_say_nothing_of_imports_break_no_rule(exits):
    assert code_rules.broken_while_running(CHECKS, ("random", "math"), exits) == {}


def test_each_module_has_its_own_exit_code():
    forbid = ("random", "math", "os")
    verdicts = code_rules.broken_while_running(
        [check("r", "no_import:random"), check("m", "no_import:math"), check("o", "no_import:os")], forbid,
        [{"type": "exit", "code": import_guard.exit_code(2)}])
    assert set(verdicts) == {"o"}


class Told:
    """The checker run's side of the channel: what the relay tells it."""

    def __init__(self):
        self.told = []

    def tell(self, message):
        if message.get("value") == "huge":
            raise ValueError("over the channel's bound")
        self.told.append(message)


def test_the_relay_answers_the_checkers_calls_and_keeps_its_first_verdict_per_test():
    asked = []

    async def answer(call):
        asked.append(call)
        return {"type": "reply", "id": call["id"], "value": call["args"][0] * 2}
    relay = Relay(answer, {"test_double": SimpleNamespace(id="double")})
    relay.job = SimpleNamespace(run=Told())

    async def go():
        await relay.channel({"type": "call", "id": 1, "function": "double", "args": [21]})
        await relay.channel({"type": "result", "id": "test_double", "passed": True})
        await relay.channel({"type": "result", "id": "test_double", "passed": False})  # a second word: not kept
        await relay.channel({"type": "result", "id": "code-1", "passed": False, "message": "a\x00b"})
        await relay.channel({"type": "result", "id": 7})  # not a check's id: dropped
        await relay.send({"type": "output", "stream": "stdout", "data": "tests ran\n"})
    asyncio.run(go())
    assert [c["id"] for c in asked] == [1] and relay.job.run.told == [{"type": "reply", "id": 1, "value": 42}]
    assert relay.verdicts["double"]["passed"] is True and set(relay.verdicts) == {"double", "code-1"}
    assert relay.verdicts["code-1"]["message"] == "a\\0b"  # a NUL the program wrote, as it is stored
    assert relay.collected.text == "tests ran\n"


def test_a_reply_too_large_for_the_channel_fails_that_call_and_not_gradable_is_kept():
    async def answer(call):
        return {"type": "reply", "id": call["id"], "value": "huge"}
    relay = Relay(answer, {})
    relay.job = SimpleNamespace(run=Told())

    async def go():
        await relay.channel({"type": "call", "id": 3, "function": "f", "args": []})
        await relay.channel({"type": "not_gradable", "error": {"type": "SyntaxError", "line": 2}})
    asyncio.run(go())
    [reply] = relay.job.run.told
    assert reply["id"] == 3 and reply["failed"]["message"] == "The value your function returned is too large to check."
    assert relay.verdicts == {"not_gradable": {"type": "SyntaxError", "line": 2}}
