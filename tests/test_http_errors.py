"""How the handlers translate what a service raised into HTTP (server/web.py),
without a server: a refusal keeps its status, code, sentence and extras, a
full executor or line is a 503 with Retry-After, and anything else is not
an expected outcome (a bug, which the handler logs); and a JSON body with
a lone surrogate anywhere is found without recursion."""
import json

import pytest
from hypothesis import given, strategies as st

from server.db import DatabaseUnavailable
from server.errors import Refused
from server.executor import Busy
from server.fifo import Full
from server.web import ApiError, expected_error, has_lone_surrogate


def test_a_refusal_keeps_its_status_code_sentence_and_extras():
    answer = expected_error(Refused(409, "conflict", "The file changed since you opened it. Reload it.",
                                    retry_after=None, etag="abc"))
    assert isinstance(answer, ApiError)
    assert (answer.status_code, answer.code, answer.message, answer.extra) == \
        (409, "conflict", "The file changed since you opened it. Reload it.", {"etag": "abc"})


def test_an_api_error_is_answered_as_it_is():
    error = ApiError(404, "not_found", "There is no such file.")
    assert expected_error(error) is error


@pytest.mark.parametrize("busy", [Busy("hashing"), Full("requests")])
def test_a_full_executor_or_line_is_a_503_saying_to_try_again(busy):
    answer = expected_error(busy)
    assert (answer.status_code, answer.code, answer.retry_after) == (503, "server_busy", 1)
    assert answer.message == "The server is busy. Try again in a moment."


def test_the_database_unavailable_is_a_refusal_with_a_retry():
    answer = expected_error(DatabaseUnavailable())
    assert answer.status_code == 503 and answer.retry_after and answer.message.endswith(".")


@pytest.mark.parametrize("error", [KeyError("x"), ValueError("bad"), RuntimeError(), ZeroDivisionError()])
def test_a_bug_is_no_expected_outcome(error):
    assert expected_error(error) is None


@pytest.mark.parametrize("value, lone", [
    ("plain", False), ("é李😀", False), ("\ud800", True), ({"k": ["a", {"\udfff": 1}]}, True),
    ([1, 2.5, None, True, {"a": "b"}], False), ({"a": [[[["\udc00"]]]]}, True),
])
def test_a_lone_surrogate_is_found_in_keys_and_values(value, lone):
    assert has_lone_surrogate(value) is lone


def test_a_deep_body_is_walked_without_recursion():
    value = "\ud800"
    for _ in range(100000):
        value = {"x": [value]}
    assert has_lone_surrogate(value)


@given(st.recursive(st.text(max_size=5), lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=20))
def test_a_body_is_flagged_exactly_when_it_cannot_be_written_as_utf8(value):
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
        writable = True
    except UnicodeEncodeError:
        writable = False
    assert has_lone_surrogate(value) is not writable
