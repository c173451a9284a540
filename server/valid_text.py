"""Text that came out of a sandbox, made valid for wherever it goes next.

A program writes any bytes (decoded with U+FFFD for what is not UTF-8) and
its JSON can name any code point, but PostgreSQL's text and jsonb refuse
NUL, UTF-8 (the database's, the page's) has no lone surrogate, and JSON has
no NaN. Dropping them would let a program hide what it wrote (and an output check
compare text the student never saw), so they are escaped where they can
be seen: NUL as the two characters \\0, a lone surrogate as \\ud800, NaN and
the infinities as their names in a string. A surrogate pair (two halves
that arrived apart) is joined into the character it stands for.
"""
import json
import re
from typing import Any

_INVALID = re.compile(r"[\x00\ud800-\udfff]")
_PAIR = re.compile(r"[\ud800-\udbff][\udc00-\udfff]")
# In a JSON document as json.dumps writes it (all ASCII): the same two, as
# escapes not preceded by an odd number of backslashes (then they would be text).
_ESCAPED = re.compile(r"(?<!\\)((?:\\\\)*)\\u(0000|d[89ab][0-9a-f]{2}\\ud[c-f][0-9a-f]{2}|d[89a-f][0-9a-f]{2})")


def _visible(code: int) -> str:
    """How a code point that cannot be carried is shown instead."""
    return "\\0" if code == 0 else f"\\u{code:04x}"


def _joined(pair: re.Match) -> str:
    high, low = (ord(c) for c in pair[0])
    return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))


def valid_text(text: str) -> str:
    """`text` with NUL and lone surrogates escaped visibly; itself when it has none."""
    if not _INVALID.search(text):
        return text
    return _INVALID.sub(lambda c: _visible(ord(c[0])), _PAIR.sub(_joined, text))


def _escape(found: re.Match) -> str:
    backslashes, code = found[1], found[2]
    if len(code) > 4:  # a pair: a character of its own, valid as it is
        return found[0]
    # The escape's backslash, itself escaped: the document then holds the visible text.
    return backslashes + json.dumps(_visible(int(code, 16)))[1:-1]


def valid_value(value: Any) -> Any:
    """A JSON-able value (dicts, lists, strings, numbers) with every string
    in it, keys too, made valid as valid_text does, and NaN and the
    infinities as strings: a copy that PostgreSQL's jsonb and any JSON
    parser accept. Not recursive in Python (the json module's C code walks
    it), so a deep value costs no stack here."""
    document = json.dumps(value, default=str)  # ASCII: every NUL or surrogate is an escape
    if "\\u" in document:
        document = _ESCAPED.sub(_escape, document)
    return json.loads(document, parse_constant=str)
