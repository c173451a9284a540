"""A RunSpec crosses to another host as JSON and comes back the same, and
the launcher's frame it makes says what the spec says (no server, no sandbox)."""
import dataclasses
import json
import struct

from hypothesis import given, strategies as st

from server.config import load
from server.runs.child.launcher import tightened
from server.runs.spec import DebugOptions, Limits, Mode, RunSpec

text = st.text(max_size=20)
small = st.integers(min_value=0, max_value=10 ** 9)
limits = st.builds(Limits, *([small] * 10))
json_values = st.recursive(st.none() | st.booleans() | st.integers() | text,
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
                           max_leaves=10)
specs = st.builds(
    RunSpec, user_id=small, username=text, parts=st.lists(text, min_size=1, max_size=3).map(tuple), limits=limits,
    mode=st.sampled_from(Mode), course=st.none() | text,
    files=st.none() | st.lists(st.tuples(text, st.binary(max_size=30)), max_size=3).map(tuple),
    args=st.lists(text, max_size=3).map(tuple), stdin=st.none() | text, cols=small, rows=small,
    etag=st.none() | text, echo=st.booleans(), nice=st.integers(0, 10), forbid=st.lists(text, max_size=3).map(tuple),
    debug=st.none() | st.builds(DebugOptions.of, st.dictionaries(text, st.lists(small, max_size=3), max_size=3),
                                st.lists(text, max_size=3)),
    tests=st.none() | st.dictionaries(text, json_values, max_size=3))


@given(specs)
def test_a_spec_comes_back_from_json_the_same(spec):
    assert RunSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


def _frames(data):
    out = []
    while data:
        kind, size = data[:1], struct.unpack(">I", data[1:5])[0]
        out.append((kind, data[5:5 + size]))
        data = data[5 + size:]
    return out


def test_the_frame_starts_the_program_the_spec_names():
    limits = Limits.of(load({}))
    spec = RunSpec(1, "ada", ("week1", "add.py"), limits, args=("a",), stdin="3\n", echo=False, nice=5,
                   forbid=("os",), etag="0" * 20)
    (kind, payload), typed, end = _frames(spec.to_frame(channel=False))
    go = json.loads(payload)
    assert kind == b"g" and go["path"] == "week1/add.py" and go["args"] == ["a"] and go["etag"] == "0" * 20
    assert go["echo"] is False and go["nice"] == 5 and go["forbid"]["modules"] == ["os"] and "channel" not in go
    assert typed == (b"d", b"3\n") and end == (b"e", b"")

    served = RunSpec(1, "ada", ("ex", "avg.py"), limits, mode=Mode.SERVE, files=(("avg.py", b"x = 1\n"),))
    (_, payload), end = _frames(served.to_frame(channel=True))
    go = json.loads(payload)
    assert go["mode"] == "serve" and go["options"] == {"file": "avg.py"} and go["path"] == "avg.py"
    assert go["copy"] == {"avg.py": "eCA9IDEK"} and go["writable"] is True and go["channel"] is True
    assert end == (b"e", b"")

    debugged = RunSpec(1, "ada", ("a.py",), limits, mode=Mode.DEBUG, debug=DebugOptions.of({"a.py": [3]}, ["x"]))
    go = json.loads(_frames(debugged.to_frame(channel=True))[0][1])
    assert go["debug"]["breakpoints"] == {"a.py": [3]} and go["debug"]["watches"] == ["x"] and go["debug"]["code"]
    # The kernel's limits travel in the frame: the launcher lowers its own to them (launcher.tightened).
    # (That each reaches the program as its rlimit: tests/test_run_limits.py, in a real sandbox.)
    assert go["limits"] == dataclasses.asdict(limits.program())
    assert set(go["limits"]) == {"cpu_seconds", "memory_bytes", "processes", "file_bytes", "open_files"}


def test_limits_come_from_the_settings_and_a_check_shortens_its_own():
    cfg = load({"RUN_WALL_SECONDS": "30", "RUN_OUTPUT_KB": "7"})
    limits = Limits.of(cfg)
    assert limits.wall_seconds == 30 and limits.output_kb == 7 and limits.quota_bytes == cfg.QUOTA_BYTES
    short = limits.lasting(4)
    assert (short.wall_seconds, short.idle_seconds, short.output_kb) == (4, 4, 7)


def test_a_run_only_lowers_the_sandboxes_limits():
    own = dataclasses.asdict(Limits.of(load({})).program())
    assert tightened(own, {"open_files": 10, "processes": 10 ** 9, "memory_bytes": 0, "file_bytes": -1,
                           "cpu_seconds": True, "nonsense": 1}) == dict(own, open_files=10)
    assert tightened(own, None) == own and tightened(own, "not a dict") == own
    assert tightened({}, {"open_files": 10}) == {"open_files": 10}  # a sandbox without one takes the run's
