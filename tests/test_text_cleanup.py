"""Text clean-up without a server: CSV cells no spreadsheet runs as a
formula (server/csv_cells.py), and the exact escapes valid_text and
valid_value give (server/valid_text.py; tests/test_sandbox_text.py holds
their properties over any text)."""
import math
import unicodedata

import pytest
from hypothesis import given, strategies as st

from server.csv_cells import FORMULA_START, safe_cell
from server.valid_text import valid_text, valid_value


@pytest.mark.parametrize("cell", [
    "=1+1", "+1", "-1", "@SUM(A1:A2)", "=HYPERLINK(\"http://x\")",
    "\t=1", "\r=1", "\tplain", "\rplain",
    "\ufeff=1",  # a byte order mark first
    "\u200b=1",  # a zero-width space first
    "\u200e+1",  # a left-to-right mark first
    "  =1",  # spaces first
    "\u00a0-1",  # a no-break space first
    "\u3164=1",  # the Hangul filler, drawn blank
    "\u2800@x",  # a blank Braille pattern
    "\u0301=1",  # a combining mark with nothing under it
    "\uff1d1",  # full-width =
    "\uff0b1", "\uff0d1", "\uff20x",  # full-width + - @
    "\ufe661", "\ufe621", "\ufe631", "\ufe6bx",  # small = + - @
])
def test_a_cell_a_spreadsheet_would_run_is_kept_as_text(cell):
    assert safe_cell(cell) == "'" + cell


@pytest.mark.parametrize("value, written", [
    (None, ""), ("", ""), ("ada", "ada"), ("Ada Lovelace", "Ada Lovelace"), ("a=b", "a=b"), ("1-2", "1-2"),
    (42, "42"), (9.5, "9.5"), ("'=1", "'=1"), ("x@school.org", "x@school.org"), ("   ", "   "),
    ("\u200b", "\u200b"), ("é=1", "é=1"),
])
def test_any_other_cell_is_written_as_it_is(value, written):
    assert safe_cell(value) == written


def test_a_negative_number_is_kept_as_text_too():
    # A spreadsheet would read -3 as a formula as well; the apostrophe keeps its text.
    assert safe_cell(-3) == "'-3"


def _first_seen(text):
    for char in text:
        if unicodedata.category(char) not in ("Cc", "Cf", "Cn", "Co", "Cs", "Mn", "Me", "Zl", "Zp", "Zs") \
                and char not in "\u115f\u1160\u3164\uffa0\u2800":
            return char
    return None


@given(st.text(max_size=12) | st.sampled_from(["=", "+", "-", "@", "\uff1d", "\ufe62"]).flatmap(
    lambda sign: st.tuples(st.text(" \u200b\ufeff\u3164", max_size=3), st.text(max_size=5)).map(
        lambda t: t[0] + sign + t[1])))
def test_a_cell_gains_an_apostrophe_exactly_when_its_first_seen_character_starts_a_formula(text):
    cell = safe_cell(text)
    first = _first_seen(text)
    runs = text.startswith(("\t", "\r")) or (
        first is not None and unicodedata.normalize("NFKC", first).startswith(FORMULA_START))
    assert cell == ("'" + text if runs else text)


@pytest.mark.parametrize("text, valid", [
    ("plain", "plain"),
    ("a\x00b", "a\\0b"),
    ("\ud800", "\\ud800"),
    ("x\udfffy", "x\\udfffy"),
    ("\ud83d\ude00", "\U0001f600"),  # a surrogate pair that arrived apart is its character
    ("\ude00\ud83d", "\\ude00\\ud83d"),  # the halves the wrong way round stay escaped
    ("\\0", "\\0"),
])
def test_text_that_cannot_be_carried_is_escaped_where_it_can_be_seen(text, valid):
    assert valid_text(text) == valid
    valid.encode("utf-8")


def test_a_value_keeps_its_shape_with_every_string_and_key_valid():
    value = {"out\x00": ["a\ud800", {"n": math.nan, "inf": -math.inf}, 1, 2.5, None, True], "ok": "\\u0000"}
    assert valid_value(value) == {"out\\0": ["a\\ud800", {"n": "NaN", "inf": "-Infinity"}, 1, 2.5, None, True],
                                  "ok": "\\u0000"}


def test_a_value_with_nothing_to_clean_comes_back_equal():
    value = {"rows": [[1, "two", 3.0], []], "nested": {"deep": [{"x": "é"}]}, "none": None}
    assert valid_value(value) == value
