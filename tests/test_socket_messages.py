"""What the WebSocket handlers share (server/sockets.py), without a socket:
a client's message is a JSON object with a text type or one refusal, and
what a message's work raises becomes an `error` message, never a closed
socket."""
import asyncio
import json
import logging

import pytest
from hypothesis import given, strategies as st

from server.errors import Refused
from server.sockets import answering, message_of

REFUSAL = "Messages are JSON objects with a \"type\"."


@pytest.mark.parametrize("text, message", [
    ('{"type": "run", "path": "main.py"}', {"type": "run", "path": "main.py"}),
    ('{"type": ""}', {"type": ""}),
    (b'{"type": "stdin", "data": "\\u00e9"}', {"type": "stdin", "data": "é"}),
])
def test_a_json_object_with_a_text_type_is_a_message(text, message):
    assert message_of(text) == message


@pytest.mark.parametrize("text", ["", "run", "[]", '"type"', "null", '{"type": 3}', '{"type": null}', '{"kind": "run"}',
                                  '{"type": ["run"]}', "{'type': 'run'}", '{"type": "run"', "[" * 100000 + "]" * 100000,
                                  b"\xff\xfe"])
def test_anything_else_is_one_refusal_saying_what_a_message_is(text):
    with pytest.raises(Refused) as refused:
        message_of(text)
    assert (refused.value.status, refused.value.code, refused.value.message) == (400, "bad_message", REFUSAL)


json_values = st.recursive(st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                       max_size=3), max_leaves=10)


@given(st.one_of(st.text(max_size=50), json_values.map(json.dumps)))
def test_any_text_is_a_message_or_the_refusal(text):
    try:
        message = message_of(text)
    except Refused as e:
        assert e.code == "bad_message"
    else:
        assert isinstance(message, dict) and isinstance(message["type"], str)


def answers(act):
    sent = []

    async def send(message):
        sent.append(message)
    asyncio.run(answering(send, act, "a test message"))
    return sent


def test_work_that_succeeds_sends_nothing_of_its_own():
    async def act():
        pass
    assert answers(act) == []


def test_a_refusal_is_sent_as_an_error_message():
    async def act():
        raise Refused(409, "already_running", "You already have a program running. Stop it there first.")
    assert answers(act) == [{"type": "error", "error": "already_running",
                             "message": "You already have a program running. Stop it there first."}]


def test_a_bug_is_logged_and_said_plainly_without_its_details(caplog):
    async def act():
        raise ZeroDivisionError("a detail the student must not see")
    with caplog.at_level(logging.ERROR):
        sent = answers(act)
    assert sent == [{"type": "error", "error": "internal_error",
                     "message": "Something went wrong on the server. It has been logged."}]
    assert [r.getMessage() for r in caplog.records] == ["a test message failed"] and caplog.records[0].exc_info
