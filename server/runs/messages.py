"""The messages a browser may send on /ws/run, written once (docs/run-protocol.md).

`CLIENT` is the table: each message type, its fields, their JSON types and
bounds. The server validates every incoming message against it (`validate`)
before it acts on one, and the browser's one builder of messages
(static/src/run-socket.js) validates against the same table, exported as
static/src/run-messages.json (`python -m server.runs.messages` writes it;
tests/test_run_messages.py fails when the committed file differs).

What the table cannot say stays where it is meant: a path's segments
(files/paths.py), the breakpoints' paths and lines and the watches'
texts (debugging.py), whether a course folder may be read.

Every message carries an `id` (text the page makes, unique on its socket);
every answer the server sends because of a message names it as `re`.
"""
import json
import re
import sys
from pathlib import Path
from typing import Any

from ..errors import Refused
from ..files.paths import MAX_PATH_BYTES
from ..web import has_lone_surrogate
from ..replay.service import MAX_BASE, MAX_EDITS
from .debugging import BREAKPOINT_FILES, STACK, WATCH, WATCHES

ID_LENGTH = 32
MAX_ARGS = 32
ETAG_PATTERN = "[0-9a-f]{20}"

# A field: "json" (string, integer, array, object), "required", "null"
# (null is allowed: the same as leaving it out), bounds ("max_length" of a
# text, "min"/"max" of a number, "max_items" of a list or an object,
# "items": the field every item of a list is), "pattern" (a text's
# re.fullmatch), "plain" (a text without NUL or half a character), and
# "error" (the refusal's code, when not `bad_field`).
Field = dict[str, Any]

_ETAG: Field = {"json": "string", "pattern": ETAG_PATTERN, "null": True}
_COLS: Field = {"json": "integer", "min": 10, "max": 500}
_ROWS: Field = {"json": "integer", "min": 2, "max": 200}
_RUN: dict[str, Field] = {
    "path": {"json": "string", "required": True, "max_length": MAX_PATH_BYTES},
    "area": {"json": "string", "max_length": 40},
    "args": {"json": "array", "max_items": MAX_ARGS, "error": "bad_args",
             "items": {"json": "string", "max_length": 1000, "plain": True}},
    "cols": _COLS,
    "rows": _ROWS,
    "etag": _ETAG,
}
_BREAKPOINTS: Field = {"json": "object", "max_items": BREAKPOINT_FILES}
_WATCHES: Field = {"json": "array", "max_items": WATCHES, "items": {"json": "string", "max_length": WATCH}}

CLIENT: dict[str, dict[str, Field]] = {
    "watch": {},
    "run": _RUN,
    "debug": {**_RUN, "breakpoints": _BREAKPOINTS, "watches": _WATCHES},
    "step": {},
    "step_in": {},
    "step_out": {},
    "continue": {},
    "frame": {"frame": {"json": "integer", "required": True, "min": 0, "max": STACK - 1}},
    "breakpoints": {"breakpoints": {**_BREAKPOINTS, "required": True}},
    "watches": {"watches": {**_WATCHES, "required": True}},
    "check": {"class": {"json": "integer", "required": True, "min": 1, "max": 2 ** 62},
              "exercise": {"json": "string", "required": True, "max_length": 64},
              "area": {"json": "string", "max_length": 40},
              "etag": _ETAG},
    "prepare_check": {},
    "viewing": {"path": {"json": "string", "max_length": MAX_PATH_BYTES, "null": True}},
    "stdin": {"data": {"json": "string", "required": True, "max_length": 64 << 10}},
    "interrupt": {},
    "eof": {},
    "kill": {},
    "resize": {"cols": {**_COLS, "required": True}, "rows": {**_ROWS, "required": True}},
    # What the editor changed, for replay (server/replay/service.py checks each edit).
    "edits": {"area": {"json": "string", "required": True, "max_length": 40},
              "path": {"json": "string", "required": True, "max_length": MAX_PATH_BYTES},
              "base": {"json": "string", "max_length": MAX_BASE},
              "length": {"json": "integer", "required": True, "min": 0, "max": 1 << 40},
              "sent": {"json": "integer", "required": True, "min": 0, "max": 1 << 53},
              "edits": {"json": "array", "required": True, "max_items": MAX_EDITS}},
}

JSON_FILE = Path(__file__).resolve().parents[2] / "static" / "src" / "run-messages.json"


def exported() -> dict[str, Any]:
    """The table as the browser reads it (run-messages.json)."""
    return {"id": {"json": "string", "required": True, "min_length": 1, "max_length": ID_LENGTH},
            "messages": CLIENT}


def exported_text() -> str:
    return json.dumps(exported(), indent=2, sort_keys=True) + "\n"


def id_of(msg: dict[str, Any]) -> str:
    """The message's id, or the refusal saying that one is needed."""
    value = msg.get("id")
    if not isinstance(value, str) or not 0 < len(value) <= ID_LENGTH:
        raise Refused(400, "bad_message", f"Every message needs an \"id\": a text of 1 to {ID_LENGTH} characters, "
                                          "unique on this socket. Reload the page.")
    return value


def validate(msg: dict[str, Any]) -> dict[str, Any]:
    """`msg` (a JSON object with a text type and an id, sockets.message_of
    and id_of) if the table allows it, else the refusal naming the field."""
    fields = CLIENT.get(msg["type"])
    if fields is None:
        raise Refused(400, "unknown_type", f"Unknown message type {msg['type'][:40]!r}.")
    for name in msg:
        if name not in fields and name not in ("type", "id"):
            raise Refused(400, "bad_field", f"{name[:40]!r} is not a field of a {msg['type']!r} message.")
    for name, field in fields.items():
        value = msg.get(name)
        if value is None:
            if field.get("required") or (name in msg and not field.get("null")):
                raise _bad(name, field)
        elif not _fits(value, field):
            raise _bad(name, field)
    return msg


def _fits(value: Any, field: Field) -> bool:
    kind = field["json"]
    if kind == "string":
        return isinstance(value, str) and len(value) <= field.get("max_length", len(value)) and (
            "pattern" not in field or re.fullmatch(field["pattern"], value) is not None) and (
            not field.get("plain") or _plain(value))
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool) and \
            field.get("min", value) <= value <= field.get("max", value)
    if kind == "array":
        return isinstance(value, list) and len(value) <= field.get("max_items", len(value)) and (
            "items" not in field or all(_fits(v, field["items"]) for v in value))
    if kind == "object":
        return isinstance(value, dict) and len(value) <= field.get("max_items", len(value))
    raise ValueError(f"no such JSON type in the table: {kind}")


def _plain(text: str) -> bool:
    """Text a program can be given: no NUL, no half a character (a lone surrogate)."""
    return "\x00" not in text and not has_lone_surrogate(text)


def _bad(name: str, field: Field) -> Refused:
    return Refused(400, field.get("error", "bad_field"), f"{name!r} must be {_describe(field)}.")


def _describe(field: Field) -> str:
    kind = field["json"]
    if kind == "string":
        what = "the version the editor shows (20 hex digits)" if field.get("pattern") == ETAG_PATTERN else \
            f"text of at most {field['max_length']} characters" if "max_length" in field else "text"
        if field.get("plain"):
            what += ", without NUL"
    elif kind == "integer":
        what = f"a whole number from {field['min']} to {field['max']}"
    elif kind == "array":
        what = f"a list of at most {field['max_items']} items"
        if "items" in field:
            what += f", each {_describe(field['items'])}"
    else:
        what = f"an object of at most {field['max_items']} entries"
    return what + (", or null" if field.get("null") else "")


if __name__ == "__main__":  # python -m server.runs.messages: write static/src/run-messages.json
    JSON_FILE.write_text(exported_text())
    sys.exit(0)
