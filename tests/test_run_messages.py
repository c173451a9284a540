"""The /ws/run client messages are written once (server/runs/messages.py):
the server checks every message against the table, the browser builds its
messages from the same table (static/src/run-messages.json, committed), and
the protocol's documentation names the same types. Without a socket."""
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from server.errors import Refused
from server.runs import messages
from server.runs.messages import CLIENT, ID_LENGTH

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "static" / "src"
CODES = {"bad_message", "unknown_type", "bad_field", "bad_args"}


def checked(msg):
    """`msg` through what the handler does: its id, then the table."""
    messages.id_of(msg)
    return messages.validate(msg)


def test_the_committed_json_is_the_table():
    assert (SRC / "run-messages.json").read_text() == messages.exported_text(), \
        "run `python -m server.runs.messages` and commit static/src/run-messages.json"


def test_the_docs_table_names_the_same_types():
    text = (ROOT / "docs" / "run-protocol.md").read_text()
    section = text[text.index("## Client → server"):text.index("## Server → client")]
    documented = {name for row in section.splitlines() if row.startswith("| `")
                  for name in re.findall(r"`(\w+)`", row.split("|")[1])}
    assert documented == set(CLIENT)


def _fields(literal):
    """The field names of a JavaScript object literal's text (`{ a: x, b }`), spreads aside."""
    names = set()
    for part in literal.split(","):
        part = part.strip()
        if part and not part.startswith("..."):
            names.add(re.match(r"(\w+)", part).group(1))
    return names


def _js():
    return {path.name: path.read_text() for path in SRC.glob("*.js")}


def sent_by_the_page():
    """{type: field names} of every message the page's code makes: the
    literal `socket.ask("type", {...})` calls, the console's `input("type", ...)`
    (forwarded by run.js), the debugger's `command("type", ...)` and its
    buttons (forwarded), and Run's `run` / `debug`."""
    js = _js()
    sent = {}

    def add(kind, names):
        sent.setdefault(kind, set()).update(names)
    call = r'\.(?:ask|input|command)\("(\w+)"(?:,\s*(?:\{([^}]*)\}|(this\.size\(\))))?\)'
    for name in ("run-socket.js", "run.js", "check.js", "debugger.js", "console.js", "exercises.js", "ide.js", "recorder.js"):
        found = re.findall(call, js[name])
        assert len(found) == len(re.findall(r'\.(?:ask|input|command)\("', js[name])), f"{name}: a call the scan cannot read"
        for kind, literal, size in found:
            add(kind, {"cols", "rows"} if size else _fields(literal or ""))  # (size(): the terminal's)
    for kind in re.findall(r'"#[\w-]+": "(\w+)"', re.search(r"const COMMANDS = \{[^}]*\}", js["debugger.js"]).group(0)):
        add(kind, set())  # the step buttons: `command(kind)`
    run_fields = _fields(re.search(r'this\.socket\.ask\(kind, \{([^}]*)\}\)', js["run.js"]).group(1)) | {"cols", "rows"}
    add("run", run_fields)  # (`...this.output.size()`: the terminal's cols and rows)
    debug_extra = re.search(r'runControl\.run\("debug", \{([^}]*)\}\)', js["debugger.js"]).group(1)
    add("debug", run_fields | _fields(debug_extra))
    return sent


def test_every_message_the_page_sends_is_in_the_table_with_its_fields():
    sent = sent_by_the_page()
    assert {"watch", "run", "debug", "check", "stdin", "step", "frame", "resize", "viewing", "edits"} <= set(sent)  # found
    for kind, names in sent.items():
        assert kind in CLIENT, kind
        assert names <= set(CLIENT[kind]), (kind, names - set(CLIENT[kind]))


def test_the_page_makes_messages_in_one_place():
    """Only the builder sends on the run socket; the calls it cannot read are the known forwarders."""
    js = _js()
    for name, text in js.items():
        if name != "run-socket.js" and name != "class-socket.js":
            assert "ws.send(" not in text, name
    dynamic = sorted((name, m) for name in ("run.js", "debugger.js", "check.js", "exercises.js", "ide.js")
                     for m in re.findall(r'\.ask\((?!")([^,)]*)', js[name]))
    assert dynamic == [("debugger.js", "kind"), ("run.js", "e.detail.type"), ("run.js", "kind")]


# -- the server's check --------------------------------------------------------------

def test_a_message_needs_an_id():
    for msg in ({"type": "kill"}, {"type": "kill", "id": ""}, {"type": "kill", "id": 5},
                {"type": "kill", "id": "x" * (ID_LENGTH + 1)}):
        with pytest.raises(Refused) as refused:
            checked(msg)
        assert refused.value.code == "bad_message" and '"id"' in refused.value.message
    assert checked({"type": "kill", "id": "k1"}) == {"type": "kill", "id": "k1"}


@pytest.mark.parametrize("msg, code, field", [
    ({"type": "fly"}, "unknown_type", None),
    ({"type": "run"}, "bad_field", "path"),
    ({"type": "run", "path": "a.py", "colour": 1}, "bad_field", "colour"),
    ({"type": "run", "path": "a.py", "cols": True}, "bad_field", "cols"),
    ({"type": "run", "path": "a.py", "cols": None}, "bad_field", "cols"),
    ({"type": "run", "path": "a.py", "args": "x"}, "bad_args", "args"),
    ({"type": "run", "path": "a.py", "args": ["a\x00b"]}, "bad_args", "args"),
    ({"type": "run", "path": "a.py", "args": ["\ud800"]}, "bad_args", "args"),
    ({"type": "run", "path": "a.py", "etag": "ABC"}, "bad_field", "etag"),
    ({"type": "resize", "cols": 80}, "bad_field", "rows"),
    ({"type": "frame", "frame": 64}, "bad_field", "frame"),
    ({"type": "watches", "watches": ["x"] * 11}, "bad_field", "watches"),
    ({"type": "stdin", "data": "x" * ((64 << 10) + 1)}, "bad_field", "data"),
    ({"type": "check", "class": 0, "exercise": "e"}, "bad_field", "class"),
])
def test_a_wrong_field_is_named(msg, code, field):
    with pytest.raises(Refused) as refused:
        checked({**msg, "id": "1"})
    assert refused.value.code == code
    if field:
        assert f"'{field}'" in refused.value.message and refused.value.message.endswith(".")


@pytest.mark.parametrize("msg", [
    {"type": "run", "path": "a.py", "etag": None, "args": [], "area": "course", "cols": 80, "rows": 24},
    {"type": "debug", "path": "a.py", "breakpoints": {"a.py": [1]}, "watches": ["x + 1"]},
    {"type": "check", "class": 3, "exercise": "swap", "etag": "0123456789abcdef0123"},
    {"type": "viewing", "path": None}, {"type": "viewing"}, {"type": "stdin", "data": "\ud800\x00"},
    {"type": "continue"}, {"type": "watch"},
])
def test_what_the_page_sends_passes(msg):
    assert checked({**msg, "id": "7"})["type"] == msg["type"]


SCALARS = st.none() | st.booleans() | st.integers(-(2 ** 70), 2 ** 70) | st.floats() | st.text(max_size=30)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                             max_size=4), max_leaves=10)
FIELD_NAMES = st.sampled_from(sorted({f for fields in CLIENT.values() for f in fields} | {"id", "other"}))
MESSAGES = st.builds(lambda kind, fields, msg_id: {**fields, "type": kind, **({} if msg_id is None else {"id": msg_id})},
                     st.sampled_from(sorted(CLIENT) + ["nope"]), st.dictionaries(FIELD_NAMES, JSON, max_size=4),
                     st.none() | st.text(max_size=40) | st.integers())


@settings(max_examples=400, deadline=None)
@given(MESSAGES)
def test_any_message_passes_whole_or_gets_one_clear_refusal(msg):
    try:
        out = checked(msg)
    except Refused as e:
        assert e.code in CODES and e.status == 400 and e.message.endswith(".")
        if e.code in ("bad_field", "bad_args"):
            named = re.match(r"'(\w+)'", e.message).group(1)
            assert named in msg or named in CLIENT[msg["type"]]
    else:
        assert out is msg
        fields = CLIENT[msg["type"]]
        assert set(msg) <= set(fields) | {"type", "id"}
        for name, field in fields.items():
            assert (msg.get(name) is not None) or not field.get("required")
            if msg.get(name) is not None:
                assert messages._fits(msg[name], field)


def test_the_json_is_plain_data():
    """The browser's copy: JSON types and bounds, nothing Python-only."""
    data = json.loads((SRC / "run-messages.json").read_text())
    assert set(data["messages"]) == set(CLIENT)
    kinds = {f["json"] for fields in data["messages"].values() for f in fields.values()}
    assert kinds <= {"string", "integer", "array", "object"}


# -- the page's check is the server's ------------------------------------------------

NODE = shutil.which("node")
VALUES = [None, True, 0, 1, 2, 9, 10, 24, 80, 199, 200, 500, 501, 63, 64, -1, 2 ** 40, "", "a.py", "x" * 64, "x" * 65,
          "x" * 1025, "a\x00b", "\ud800", "0123456789abcdef0123", "0123456789ABCDEF0123", "course", "y" * 41,
          [], ["a"], ["a"] * 11, ["x" * 201], [1], ["a\x00"], ["\ud800"], ["a"] * 33, {}, {"a.py": [1]},
          {str(i): [] for i in range(101)}, [[1]], {"k": "v"}]


VALID = {"path": "a.py", "area": "course", "args": ["1"], "cols": 80, "rows": 24, "etag": None, "breakpoints": {},
         "watches": ["x"], "frame": 0, "class": 2, "exercise": "swap", "data": "y\r", "base": "ab", "length": 2,
         "sent": 5, "edits": [[1, [2, [0, "c"]], ""]]}


def _cases():
    """For each type: the message with its required fields, with all of
    them, and with each field (a stranger, the id) set to each of VALUES,
    on either side of the bounds."""
    out = []
    for kind, table in sorted(CLIENT.items()):
        required = {name: VALID[name] for name, field in table.items() if field.get("required")}
        out += [[kind, required, "7"], [kind, {name: VALID[name] for name in table}, "7"]]
        out += [[kind, required, msg_id] for msg_id in ("", "x" * 33, "a7", "x" * 32)]
        out += [[kind, {**required, name: value}, "7"] for name in sorted(table) + ["other"] for value in VALUES]
    return out


@pytest.mark.skipif(NODE is None, reason="node is what builds the page (npm run build); it is not installed here")
def test_the_page_refuses_what_the_server_refuses():
    """run-messages.js (the page's check, under node) and messages.py give
    the same verdict on each message."""
    cases = _cases()
    script = ("import { runMessage } from " + json.dumps((SRC / "run-messages.js").as_uri()) + ";\n"
              "import { readFileSync } from 'node:fs';\n"
              "const out = JSON.parse(readFileSync(0, 'utf8')).map(([t, f, id]) => {\n"
              "  try { runMessage(t, f, id); return true; } catch { return false; } });\n"
              "process.stdout.write(JSON.stringify(out));\n")
    done = subprocess.run([NODE, "--input-type=module", "-e", script], input=json.dumps(cases), capture_output=True,
                          text=True, timeout=60, check=True)
    page = json.loads(done.stdout)
    for (kind, fields, msg_id), passed in zip(cases, page, strict=True):
        try:
            checked({**fields, "type": kind, "id": msg_id})
            server = True
        except Refused:
            server = False
        assert passed == server, (kind, fields, msg_id)
    assert 100 < sum(page) < len(page) - 100  # both sides of the bounds were tried
