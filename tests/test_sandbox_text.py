"""Text that came out of a sandbox is made valid before it reaches
PostgreSQL, JSON or the page (server/valid_text.py), over arbitrary bytes
and all of Unicode: nothing dropped (NUL and lone surrogates escaped where
they can be seen), and an attempt whose every text is hostile is recorded
in a real PostgreSQL all the same."""
import asyncio
import codecs
import json
import re
from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from server.runs.debugging import clean_pause
from server.runs.events import run_error
from server.valid_text import valid_text, valid_value
from tests.live_support import a_class, user_of
from tests.test_exercises import grader_side, put_exercise

# All of Unicode, lone surrogates included, with the dangerous ones often.
any_char = st.one_of(st.characters(codec=None, categories=None), st.sampled_from("\x00\ud800\udbff\udc00\udfff"))
any_text = st.text(any_char, max_size=40)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), any_text),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4), max_leaves=12)
ESCAPE = re.compile(r"\\(0|u[0-9a-f]{4})")
NUL_ESCAPE = re.compile(r"(?<!\\)(\\\\)*\\u0000")  # in JSON: not after an escaped backslash
FAST = settings(max_examples=300, deadline=None, derandomize=True, database=None)


def unescaped(text):
    """valid_text's escapes read back (for text that had no backslash of its own)."""
    return ESCAPE.sub(lambda m: "\x00" if m[1] == "0" else chr(int(m[1][1:], 16)), text)


def joined(text):
    """`text` with its surrogate pairs as the characters they stand for."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def carried(text):
    """What PostgreSQL's text, UTF-8 and JSON all carry."""
    text.encode("utf-8")  # no lone surrogate
    return "\x00" not in text


def jsonb_carries(document):
    """A JSON document (written with ensure_ascii=False) PostgreSQL's jsonb takes: no NUL as an escape either."""
    return carried(document) and not NUL_ESCAPE.search(document)


@FAST
@given(text=any_text)
def test_any_text_is_made_valid_and_nothing_is_dropped(text):
    made = valid_text(text)
    assert carried(made)
    if "\x00" not in text and not re.search("[\ud800-\udfff]", text):
        assert made is text  # valid text is left as it is
    if "\\" not in text:
        assert unescaped(made) == joined(text)  # every NUL and half is there, visibly


@FAST
@given(data=st.binary(max_size=200), cut=st.integers(0, 200))
def test_any_bytes_a_program_writes_become_valid_text(data, cut):
    """As a run decodes its output (an incremental decoder, frames cut anywhere)."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    text = valid_text(decoder.decode(data[:cut])) + valid_text(decoder.decode(data[cut:], final=True))
    assert carried(text)
    assert text.count("\\0") >= data.count(b"\x00")


@FAST
@given(value=json_values)
def test_any_json_value_becomes_one_postgresql_and_browsers_accept(value):
    made = valid_value(value)
    document = json.dumps(made, allow_nan=False, ensure_ascii=False)  # no NaN: a browser's JSON.parse refuses it
    assert jsonb_carries(document)
    if isinstance(value, str) and "\\" not in value:
        assert unescaped(made) == joined(value)


def test_a_deep_value_costs_no_stack_here():
    deep = ["\x00"]
    for _ in range(500):
        deep = [deep]
    made = valid_value(deep)
    for _ in range(500):
        made = made[0]
    assert made == ["\\0"]


def test_a_traceback_with_a_nul_names_its_error_without_it():
    """What the class view stores of a failed run (run_activity's error_*)."""
    error = run_error('Traceback (most recent call last):\n  File "/home/student/a\x00.py", line 3, in <module>\n'
                      "ValueError: bad \x00 value \ud800\n", "ann")
    assert error["kind"] == "ValueError" and error["message"] == "bad \\0 value \\ud800"
    assert all(carried(v) for v in error.values() if isinstance(v, str)), error


def test_a_forged_pause_reaches_the_page_as_valid_text():
    """A program holds its debugger channel: what it says there is rebuilt (debugging.clean_pause), texts made valid."""
    pause = clean_pause({"type": "paused", "file": "a.py", "line": 1, "frame": 0,
                         "stack": [{"function": "f\x00", "file": "a.py", "line": 1}],
                         "variables": [{"name": "x\ud800", "type": "str\x00", "value": "'\x00\udfff'"}]})
    assert pause["variables"] == [{"name": "x\\ud800", "type": "str\\0", "value": "'\\0\\udfff'"}]
    assert jsonb_carries(json.dumps(pause, ensure_ascii=False))


check_results = st.lists(st.fixed_dictionaries(
    {"id": st.sampled_from(["shown", "two", "loop", "later"]),
     "passed": st.booleans(), "message": any_text},
    optional={"shown": st.dictionaries(st.sampled_from(["input", "expected", "actual", "diff"]), any_text),
              "details": json_values}), max_size=4)


@pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")
def test_any_attempt_is_recorded_in_postgresql_whatever_its_texts(server, people):
    """attempts.record, as the grader calls it, with a real PostgreSQL: every
    text of the results, the details and the message from all of Unicode."""
    teacher, ann = people.teacher("mrs-u"), people.student("ann")
    number = a_class(server, teacher, ann)
    put_exercise(teacher, number)
    user = user_of(server, ann.username)
    loop = asyncio.new_event_loop()
    side = grader_side(server)
    exercises = loop.run_until_complete(side.__aenter__())
    try:
        @settings(max_examples=60, deadline=None, derandomize=True, database=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
        @given(results=check_results, message=any_text, not_gradable=st.booleans(), printed=st.binary(max_size=80))
        def record(results, message, not_gradable, printed):
            # What a program printed, as a run decodes it, compared by an output check.
            output = codecs.getincrementaldecoder("utf-8")("replace").decode(printed, final=True)
            results = [{"id": "shown", "passed": False, "message": "Your output differs.",
                        "shown": {"actual": valid_text(output)}}] + results
            attempt = loop.run_until_complete(exercises.record_attempt(
                user, number, "average", datetime.now(timezone.utc), results, not_gradable, message))
            assert jsonb_carries(json.dumps(attempt, allow_nan=False, ensure_ascii=False))
            if not_gradable and message and "\\" not in message:
                assert unescaped(attempt["note"]).endswith(": " + joined(message))  # told, not dropped
        record()
    finally:
        loop.run_until_complete(side.__aexit__(None, None, None))
        loop.close()
    latest = teacher.get(f"/api/classes/{number}/exercises/average/attempts/{ann.username}")
    assert latest.status_code == 200 and isinstance(latest.json()["message"], str), latest.text  # read back
