"""The attempts' code, run inside sandboxes: the server sends this file's
source in the `go` frame of an attempt's run and the launcher calls main(mode, options,
channel_fd) in the program's place, with the run's limits, terminal and
control channel (lines of JSON on fd 3). Two modes, in two sandboxes that
never see each other; the server relays between them:

serve  (the student's sandbox and home) options {"file": "average.py"}:
       imports the file as the module `average` (so `if __name__ ==
       "__main__":` blocks do not run), says
         {"type": "ready"}  or  {"type": "import_failed", "error": ERROR}
       then answers, one at a time, until the channel ends (exit 0):
         <- {"type": "call", "id": n, "function": "average", "args": [VALUE...], "kwargs": VALUE}
         -> {"type": "reply", "id": n, "value": VALUE}  or  {"type": "reply", "id": n, "raised": ERROR}
       ERROR = {"type", "message", "line", "file", "traceback"}: where in
       the student's files (their folder, the home) it happened; frames of
       ours are left out. The student's code owns this process: whatever
       it writes on fd 3 counts as what its function returned, no more.

test   (a checker sandbox whose home holds the teacher's files) options
       {"module", "tests_file", "tests": [names], "source", "code_checks":
       [{"id", "rule"}], "output_checks": [{"id", "compare", "expected",
       "transcript": [[kind, text]]}]}: sends one result per check, code
       checks first, then output checks, then the tests in their order,
       then {"type": "done"}:
         -> {"type": "result", "id", "passed", "message", "line",
             "expected"?, "actual"?, "diff"?, "transcript"?}
       A transcript's kinds: "output", "prompt" (what input() printed
       before it waited) and "typed" (the line it then read).
       A source that does not parse: {"type": "not_gradable", "error":
       {"type", "message", "line"}} then done. The tests file is imported
       with its asserts rewritten (the compared values are shown) and
       with a stand-in for the student's module whose functions ask the
       server:
         -> {"type": "call", "id", "function", "test", "args", "kwargs"}
       (`test`: the test that calls, null while tests.py is loaded)
         <- {"type": "reply", "id", "value" | "raised": ERROR | "failed": {"message"}}
       `raised` becomes a StudentError (also an instance of the built-in
       exception it names, so `except ValueError:` works in a test),
       `failed` (the student's program ended, or took too long) a
       StudentUnavailable.

VALUE is tagged JSON (encode/decode), never pickle: null, true/false,
numbers, strings, arrays (lists) and objects (dicts with str keys) as
themselves; {"$": "tuple"|"set"|"frozenset", "v": [...]}, {"$": "dict",
"v": [[key, value], ...]}, {"$": "bytes", "v": base64}, {"$": "float",
"v": "nan"|"inf"|"-inf"}, anything else {"$": "repr", "type", "v": repr}
and a value too large or too deep {"$": "too_large", "type"}: these two
decode to an Opaque, shown as its repr and equal to nothing.

Self-contained (it is sent as source text), standard library only, for
any Python 3.8+.
"""
import ast
import base64
import builtins
import difflib
import importlib.util
import json
import math
import os
import re
import sys
import traceback
import types

CHANNEL_LINE = 256 << 10  # the longest line the launcher relays
MAX_DEPTH = 32  # nesting of a value
MAX_VALUE = 100000  # characters a value may take, encoded (a call's args and kwargs: two values)
MAX_REPR = 1000  # characters of a repr shown
MAX_TEXT = 4000  # characters of a message, a diff or a traceback
NO_INPUT = ("input() has nothing to read here: a check calls your functions and nobody types. "
            "Keep input() out of the functions, and put the program's own input() calls under "
            "if __name__ == \"__main__\":")


def main(mode, options, channel_fd):
    if channel_fd is None:
        print("a check needs the run's channel (go: \"channel\": true)", file=sys.stderr)
        return 2
    channel = Channel(channel_fd)
    if mode == "serve":
        return serve(options, channel)
    if mode == "test":
        return test(options, channel)
    print("unknown check mode %r" % (mode,), file=sys.stderr)
    return 2


# -- values ---------------------------------------------------------------------

class TooLarge(Exception):
    pass


class Opaque(object):
    """A value that crossed as its repr only: shown as it, equal to nothing."""

    def __init__(self, type_name, text):
        self.type_name, self.text = type_name, text

    def __eq__(self, other):
        return False

    def __ne__(self, other):
        return True

    __hash__ = object.__hash__

    def __repr__(self):
        return self.text


def encode(value):
    """`value` as tagged JSON data (see the module's docstring), at most
    MAX_VALUE characters once dumped and MAX_DEPTH deep."""
    try:
        return _encode(value, 0, [MAX_VALUE])
    except TooLarge:
        return {"$": "too_large", "type": _type_name(value)}


def _encode(value, depth, budget):
    def spend(n):
        budget[0] -= n
        if budget[0] < 0 or depth > MAX_DEPTH:
            raise TooLarge()
    spend(2)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        value = int(value)
        if value.bit_length() > 13000:  # over 4000 digits: more than int() reads back from text (3.11+)
            raise TooLarge()
        spend(value.bit_length() // 3 + 1)  # at least its decimal digits
        return value
    if isinstance(value, float):
        value = float(value)
        spend(25)
        if math.isfinite(value):
            return value
        return {"$": "float", "v": "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"}
    if isinstance(value, str):
        spend(len(value))  # before dumping a string too large to send
        value = str.__str__(value)
        spend(len(json.dumps(value)) - len(value))
        return value
    if isinstance(value, (bytes, bytearray)):
        spend(len(value) * 4 // 3 + 20)
        return {"$": "bytes", "v": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, list):
        return [_encode(item, depth + 1, budget) for item in list(value)]
    if isinstance(value, dict):
        pairs = list(value.items())
        if all(isinstance(k, str) and k != "$" for k, _ in pairs):
            return {str.__str__(k): _encode(v, depth + 1, budget) for k, v in pairs}
        spend(20)
        return {"$": "dict", "v": [[_encode(k, depth + 1, budget), _encode(v, depth + 1, budget)]
                                   for k, v in pairs]}
    for kind, tag in ((tuple, "tuple"), (frozenset, "frozenset"), (set, "set")):
        if isinstance(value, kind):
            spend(20)
            return {"$": tag, "v": [_encode(item, depth + 1, budget) for item in list(value)]}
    text = shown(value)
    spend(len(text) + 40)
    return {"$": "repr", "type": _type_name(value), "v": text}


def decode(data):
    """The value that `encode` made `data` (parsed JSON). Whatever `encode`
    could not have made raises ValueError, and nothing else."""
    try:
        return _decode(data, 0)
    except (TypeError, KeyError, AttributeError, OverflowError, RecursionError) as e:
        raise ValueError("not an encoded value (%s)" % type(e).__name__)


FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _decode(data, depth):
    if depth > MAX_DEPTH + 1:
        raise ValueError("nested too deep")
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [_decode(item, depth + 1) for item in data]
    if not isinstance(data, dict):
        raise ValueError("not an encoded value")
    if "$" not in data:
        return {_text(k): _decode(v, depth + 1) for k, v in data.items()}
    tag, v = data["$"], data.get("v")
    if tag in ("tuple", "set", "frozenset"):
        items = [_decode(item, depth + 1) for item in _array(v)]
        return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
    if tag == "dict":
        pairs = [_array(pair) for pair in _array(v)]
        if any(len(pair) != 2 for pair in pairs):
            raise ValueError("a dict's item is not a pair")
        return {_decode(k, depth + 1): _decode(item, depth + 1) for k, item in pairs}
    if tag == "bytes":
        return base64.b64decode(_text(v), validate=True)
    if tag == "float":
        return FLOATS[_text(v)]
    if tag == "repr":
        return Opaque(_text(data.get("type")), _text(v))
    if tag == "too_large":
        name = _text(data.get("type"))
        return Opaque(name, "<a %s too large to send>" % name)
    raise ValueError("unknown tag")


def _array(v):
    if not isinstance(v, list):
        raise ValueError("expected an array")
    return v


def _text(v):
    if not isinstance(v, str):
        raise ValueError("expected a string")
    return v


def _type_name(value):
    return str(getattr(type(value), "__name__", "object"))[:100]


def shown(value, limit=MAX_REPR):
    """repr(value), cut to `limit` characters; never raises."""
    try:
        text = repr(value)
    except Exception:
        text = "<a %s that cannot be shown>" % _type_name(value)
    if not isinstance(text, str):
        text = "<a %s>" % _type_name(value)
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


# -- the channel ------------------------------------------------------------------

class Channel:
    """Lines of JSON on the channel's socket (fd 3), one object each."""

    def __init__(self, fd):
        self.fd = fd
        self.buffer = b""

    def send(self, message):
        """ValueError if the line would be longer than the launcher relays."""
        data = json.dumps(message, separators=(",", ":"), allow_nan=False).encode() + b"\n"
        if len(data) > CHANNEL_LINE:
            raise ValueError("a message of %d bytes is too long for the channel" % len(data))
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]

    def receive(self):
        """The next message (a dict); None at the channel's end. Lines that
        are not JSON objects are skipped."""
        while True:
            end = self.buffer.find(b"\n")
            if end < 0:
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    return None
                self.buffer += chunk
                continue
            line, self.buffer = self.buffer[:end], self.buffer[end + 1:]
            try:
                message = json.loads(line.decode("utf-8"))
            except (ValueError, RecursionError):
                continue
            if isinstance(message, dict):
                return message


# -- serve: the student's module, in the student's sandbox ------------------------

def serve(options, channel):
    path = os.path.abspath(str(options.get("file", "")))
    name = os.path.splitext(os.path.basename(path))[0]
    home = os.getcwd()
    sys.path.insert(0, os.path.dirname(path))
    sys.argv = [path]
    builtins.input = _no_input
    try:
        module = import_file(name, path)
    except BaseException as e:  # exit() at import too: it did not import
        channel.send({"type": "import_failed", "error": describe_error(e, home)})
        return 1
    channel.send({"type": "ready"})
    while True:
        request = channel.receive()
        if request is None:
            return 0
        if request.get("type") == "call":
            reply = answer(module, request, home)
            try:
                channel.send(reply)
            except ValueError:  # a value that passed its budget but not the line's (escapes)
                reply["value"] = {"$": "too_large", "type": reply["value"].get("$", "value")
                                  if isinstance(reply["value"], dict) else "value"}
                channel.send(reply)


def _no_input(prompt=""):
    raise EOFError(NO_INPUT)


def import_file(name, path):
    """The file at `path` as the module `name` (not __main__)."""
    if not os.path.isfile(path):
        raise FileNotFoundError("there is no file %s" % os.path.basename(path))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def answer(module, request, home):
    """The reply to one call request."""
    reply = {"type": "reply", "id": request.get("id")}
    name = request.get("function")
    function = vars(module).get(name) if isinstance(name, str) else None
    file = os.path.basename(getattr(module, "__file__", "") or "")
    if not callable(function):
        what = "no function named %s" % name if function is None else \
            "%s, but it is a %s, not a function" % (name, _type_name(function))
        reply["raised"] = {"type": "MissingFunction", "message": "%s has %s" % (file, what),
                           "line": None, "file": file}
        return reply
    try:
        args, kwargs = decode(request.get("args", [])), decode(request.get("kwargs", {}))
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise ValueError("args must be a list and kwargs a dict")
    except ValueError as e:
        reply["raised"] = {"type": "BadCall", "message": "the call could not be read: %s" % e,
                           "line": None, "file": None}
        return reply
    try:
        value = function(*args, **kwargs)
    except BaseException as e:  # exit() in a function too: it did not return
        reply["raised"] = describe_error(e, home)
        return reply
    finally:
        _flush()
    reply["value"] = encode(value)
    return reply


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def describe_error(e, home):
    """An exception as the student should see it: type, message, and the
    line and file in their own files (their folder: `home`) where it
    happened; frames outside it (ours, the standard library's) left out."""
    def mine(filename):  # ours are "<testing>", "<frozen importlib._bootstrap>"...: not paths
        return bool(filename) and os.path.isabs(filename) and filename.startswith(home.rstrip(os.sep) + os.sep)
    frames = [f for f in traceback.extract_tb(e.__traceback__) if mine(f.filename)]
    line, file = None, None
    if isinstance(e, SyntaxError) and mine(e.filename):
        line, file = e.lineno, e.filename
    elif frames:
        line, file = frames[-1].lineno, frames[-1].filename
    try:
        message = str(e)
        listed = "".join(traceback.format_list(frames)) + "".join(traceback.format_exception_only(type(e), e))
    except Exception:
        message = listed = "<a message that cannot be shown>"
    return {"type": _type_name(e), "message": message[:MAX_TEXT], "line": line,
            "file": os.path.relpath(file, home) if file else None,
            "traceback": ("Traceback (most recent call last):\n" + listed if frames else listed)[-MAX_TEXT:]}


# -- test: the teacher's checks, in a checker sandbox -----------------------------

def test(options, channel):
    source = str(options.get("source", ""))
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        channel.send({"type": "not_gradable", "error": {
            "type": _type_name(e), "message": str(getattr(e, "msg", None) or e)[:MAX_TEXT],
            "line": getattr(e, "lineno", None)}})
        channel.send({"type": "done"})
        return 0
    for check in options.get("code_checks", []):
        channel.send(result(check.get("id"), *check_code(tree, str(check.get("rule", "")))))
    for check in options.get("output_checks", []):
        channel.send(check_output(check))
    caller = Caller(channel)
    for message in run_tests(options, caller):
        channel.send(message)
    channel.send({"type": "done"})
    return 0


def result(check_id, passed, message, line=None, **shown_values):
    message = message[:MAX_TEXT]
    if message:  # a sentence, as the student reads it; code ("assert ...", "average([])") keeps its case
        first = message.split(" ", 1)[0]
        code = first == "assert" or any(c in first for c in "()[]._=")
        message = (message if code else message[0].upper() + message[1:]) + \
            ("" if message.endswith((".", "!", "?")) else ".")
    out = {"type": "result", "id": check_id, "passed": bool(passed), "message": message,
           "line": line}
    for key, text in shown_values.items():
        if text is not None:
            out[key] = text[:MAX_TEXT]
    return out


# -- code checks --------------------------------------------------------------------

LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def check_code(tree, rule):
    """(passed, message, line) of one rule on the student's code:
    uses_loop (for, while or a comprehension), defines:NAME (at the top
    level), no_import:MODULE, uses_call:NAME, no_call:NAME (a call of a
    function or method of that name)."""
    kind, _, name = rule.partition(":")
    if kind == "uses_loop":
        loop = _first(n for n in ast.walk(tree) if isinstance(n, LOOPS))
        if loop:
            return True, "the code uses a loop (line %d)" % loop.lineno, loop.lineno
        return False, "the code has no loop (no for or while)", None
    if kind == "defines" and name:
        found = _first(n for n in tree.body if name in _defined(n))
        if found:
            return True, "the code defines %s (line %d)" % (name, found.lineno), found.lineno
        return False, "the code does not define %s" % name, None
    if kind == "no_import" and name:
        found = _first(n for n in ast.walk(tree) if _imports(n, name))
        if found:
            return False, "line %d imports %s, which this exercise does not allow" % (found.lineno, name), \
                found.lineno
        return True, "the code does not import %s" % name, None
    if kind in ("uses_call", "no_call") and name:
        found = _first(n for n in ast.walk(tree) if isinstance(n, ast.Call) and _called_name(n) == name)
        if kind == "uses_call":
            if found:
                return True, "the code calls %s (line %d)" % (name, found.lineno), found.lineno
            return False, "the code never calls %s" % name, None
        if found:
            return False, "line %d calls %s, which this exercise does not allow" % (found.lineno, name), \
                found.lineno
        return True, "the code does not call %s" % name, None
    return False, "this check's rule %r is not one PyClassroom knows" % rule, None


def _first(nodes):
    """The node that comes first in the file."""
    return min(nodes, key=lambda n: (n.lineno, n.col_offset), default=None)


def _defined(node):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    targets = node.targets if isinstance(node, ast.Assign) else \
        [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
    return {t.id for t in targets if isinstance(t, ast.Name)}


def _imports(node, module):
    def names(name):
        return name == module or name.startswith(module + ".")
    if isinstance(node, ast.Import):
        return any(names(alias.name) for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and bool(node.module) and names(node.module)
    if isinstance(node, ast.Call) and _called_name(node) in ("__import__", "import_module") and node.args:
        first = node.args[0]
        return isinstance(first, ast.Constant) and isinstance(first.value, str) and names(first.value)
    return False


def _called_name(call):
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


# -- output checks ------------------------------------------------------------------

# How an output check compares ("output", the default, leaves input()'s prompts
# out), and the end of its sentence when the output differs.
COMPARES = {
    "output": "; what input() shows before you type is left out",
    "exact": "; every character counts, what input() shows before you type too",
    "normalized": "; spaces, capital letters and what input() shows before you type do not matter here",
    "regex": "; what input() shows before you type is left out",
}


def check_output(check):
    """Compare a program's output with the expected text: as printed
    (line endings and the final newlines aside; "output" leaves input()'s
    prompts out, "exact" keeps them), normalized (prompts, whitespace
    runs, case, trailing spaces and blank lines ignored) or regex (the
    whole output, prompts left out, ^ and $ at each line). The failed
    result shows the transcript, a prompt as output where it was compared."""
    compare = check.get("compare", "output")
    if compare not in COMPARES:
        return result(check.get("id"), False, "this check's comparison %r is not one PyClassroom knows" % compare)
    pieces = _transcript(check, prompts_compared=compare == "exact")
    expected = _lines(check.get("expected", ""))
    actual = _lines("".join(text for kind, text in pieces if kind == "output"))
    shown = _shown_transcript(pieces)
    if compare == "regex":
        try:
            passed = re.fullmatch(expected, actual, re.MULTILINE) is not None
        except re.error as e:
            return result(check.get("id"), False, "the expected pattern is not a valid regular expression: %s" % e)
        if passed:
            return result(check.get("id"), True, "your output is as expected")
        return result(check.get("id"), False, "your output does not match the expected pattern" + COMPARES[compare],
                      expected=expected, actual=actual, transcript=shown)
    same = _normalized(expected) == _normalized(actual) if compare == "normalized" else expected == actual
    if same:
        return result(check.get("id"), True, "your output is as expected")
    # Shown as written, not as compared: the student sees their own output.
    diff = "\n".join(difflib.unified_diff(expected.split("\n"), actual.split("\n"), "expected", "your output",
                                          lineterm=""))
    said = "your output differs from the expected output (lines with - are expected, lines with + are yours)"
    return result(check.get("id"), False, said + COMPARES[compare], expected=expected, actual=actual, diff=diff,
                  transcript=shown)


def _transcript(check, prompts_compared):
    """The run's [[kind, text]] (a prompt as output when it is compared);
    a check without one has its "actual" text as output."""
    pieces = check.get("transcript")
    if not isinstance(pieces, list):
        pieces = [["output", str(check.get("actual", ""))]]
    out = []
    for kind, text in pieces:
        kind = "output" if kind == "prompt" and prompts_compared else kind
        if out and out[-1][0] == kind:
            out[-1][1] += text
        else:
            out.append([kind, text])
    return out


def _shown_transcript(pieces):
    """The transcript cut to MAX_TEXT characters in all."""
    out, room = [], MAX_TEXT
    for kind, text in pieces:
        if room <= 0:
            break
        out.append([kind, text[:room]])
        room -= len(text)
    return out


def _lines(text):
    return str(text).replace("\r\n", "\n").rstrip("\n")


def _normalized(text):
    lines = [" ".join(line.split()).casefold() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


# -- function tests -----------------------------------------------------------------

class StudentError(Exception):
    """The student's function raised an exception (its sentence says which,
    with its message and line)."""

    def __init__(self, sentence, raised=None):
        Exception.__init__(self, sentence)
        self.sentence, self.raised = sentence, raised or {}

    def __str__(self):
        return self.sentence


class StudentUnavailable(Exception):
    """The student's program could not answer: it ended, or took too long."""


class CheckFailed(AssertionError):
    """An assert of the tests failed: what it compared, in words."""

    def __init__(self, message, line, expected=None, actual=None):
        AssertionError.__init__(self, message)
        self.message, self.line, self.expected, self.actual = message, line, expected, actual


class Caller:
    """Calls of the student's functions, over the channel, one at a time."""

    def __init__(self, channel):
        self.channel = channel
        self.last_id = 0
        self.test = None  # the test running now: the server sends its calls to the program serving its checks

    def call(self, function, args, kwargs):
        self.last_id += 1
        call = call_text(function, args, kwargs)
        request = {"type": "call", "id": self.last_id, "function": function, "test": self.test,
                   "args": encode(list(args)), "kwargs": encode(dict(kwargs))}
        if not isinstance(request["args"], list) or request["kwargs"].get("$") == "too_large":
            raise ValueError("the arguments of %s are too large to send" % call)
        self.channel.send(request)
        while True:
            reply = self.channel.receive()
            if reply is None:
                raise StudentUnavailable("the check was stopped before %s answered" % call)
            if reply.get("type") == "reply" and reply.get("id") == self.last_id:
                break
        if "value" in reply:
            try:
                return decode(reply["value"])
            except ValueError:
                return Opaque("value", "<a value that could not be read>")
        if isinstance(reply.get("raised"), dict):
            raise student_error(call, reply["raised"])
        failed = reply.get("failed")
        why = failed.get("message") if isinstance(failed, dict) else None
        raise StudentUnavailable("%s did not answer: %s" % (call, why if isinstance(why, str) else "it stopped"))


def call_text(function, args, kwargs):
    """How the call reads in Python: average([1, 2])."""
    parts = [shown(a, 200) for a in args] + ["%s=%s" % (k, shown(v, 200)) for k, v in kwargs.items()]
    return "%s(%s)" % (function, ", ".join(parts))[:MAX_REPR]


def student_error(call, raised):
    """A StudentError for what the student's side reported (untrusted
    data: only its strings and numbers are used). Where the exception is a
    built-in one, the error is also one of those, so that a test can catch
    the ValueError it expects."""
    kind = raised.get("type") if isinstance(raised.get("type"), str) else "an error"
    message = raised.get("message") if isinstance(raised.get("message"), str) else ""
    line, file = raised.get("line"), raised.get("file")
    sentence = "%s raised %s" % (call, kind[:100]) + (": %s" % message[:MAX_REPR] if message else "")
    if isinstance(line, int) and not isinstance(line, bool):
        sentence += " (line %d%s)" % (line, " of %s" % file[:200] if isinstance(file, str) else "")
    base = getattr(builtins, kind, None) if kind.isidentifier() else None
    cls = StudentError
    if isinstance(base, type) and issubclass(base, Exception) and base is not Exception:
        try:
            cls = type(kind, (StudentError, base), {})
        except TypeError:
            pass  # a built-in exception that cannot be mixed in
    return cls(sentence, raised)


def student_module(name, caller):
    """Stands for the student's module in the checker (`import average`,
    `from average import average`): each function is a call over the channel."""
    module = types.ModuleType(name, "the student's module, whose functions run in their own sandbox")

    def __getattr__(attribute):
        if attribute.startswith("__"):  # what import machinery looks for: not a function
            raise AttributeError(attribute)
        return StudentFunction(attribute, caller)
    module.__getattr__ = __getattr__
    return module


class StudentFunction:
    def __init__(self, name, caller):
        self.__name__ = self.name = name
        self.caller = caller

    def __call__(self, *args, **kwargs):
        return self.caller.call(self.name, args, kwargs)

    def __repr__(self):
        return "<the student's function %s>" % self.name


def run_tests(options, caller):
    """A result per test named in options["tests"], in their order."""
    names = [str(name) for name in options.get("tests", [])]
    if not names:
        return
    sys.modules[str(options.get("module"))] = student_module(str(options.get("module")), caller)
    path = os.path.abspath(str(options.get("tests_file", "tests.py")))
    sys.path.insert(0, os.path.dirname(path))
    try:
        tests = load_tests(path)
    except BaseException as e:
        sentence = "the tests could not be loaded: %s" % error_sentence(e)
        for name in names:
            yield result(name, False, sentence, _line_in(e, path))
        return
    for name in names:
        caller.test = name
        yield run_test(tests, name, path)
        caller.test = None


def run_test(tests, name, path):
    function = vars(tests).get(name)
    if not callable(function):
        return result(name, False, "the tests file has no test named %s" % name)
    line = getattr(getattr(function, "__code__", None), "co_firstlineno", None)
    try:
        function()
    except CheckFailed as e:
        return result(name, False, e.message, e.line, expected=e.expected, actual=e.actual)
    except (StudentError, StudentUnavailable) as e:
        return result(name, False, str(e), _line_in(e, path) or line)
    except BaseException as e:
        return result(name, False, "the test stopped: %s" % error_sentence(e), _line_in(e, path) or line)
    return result(name, True, "passed", line)


def error_sentence(e):
    try:
        text = str(e)
    except Exception:
        text = ""
    return "%s: %s" % (_type_name(e), text) if text else _type_name(e)


def _line_in(e, path):
    """The line of `path` where `e` was raised (its innermost frame there)."""
    if isinstance(e, SyntaxError) and e.filename == path:
        return e.lineno
    lines = [f.lineno for f in traceback.extract_tb(e.__traceback__) if f.filename == path]
    return lines[-1] if lines else None


def load_tests(path):
    """The tests file as a module, its asserts rewritten (AssertRewriter)."""
    with open(path, "rb") as f:
        source = f.read()
    text = source.decode("utf-8", "replace")
    tree = AssertRewriter(text).visit(ast.parse(source, path))
    ast.fix_missing_locations(tree)
    name = os.path.splitext(os.path.basename(path))[0]
    module = types.ModuleType(name)
    module.__file__ = path
    module.__dict__["@fail"] = assert_failed
    sys.modules[name] = module
    exec(compile(tree, path, "exec"), module.__dict__)
    return module


class AssertRewriter(ast.NodeTransformer):
    """`assert left == right` becomes, as pytest does in a simple form:

        @left = left; @right = right
        if not (@left == right): @fail(<what to say>, @left, @right, message)

    so a failure says what each side was; evaluation order is unchanged.
    Other asserts keep their value the same way (`@left`)."""

    def __init__(self, source):
        self.source = source

    def visit_Assert(self, node):
        test = node.test
        compare = isinstance(test, ast.Compare) and len(test.ops) == 1
        sides = [test.left, test.comparators[0]] if compare else [test]
        names = ["@left", "@right"][:len(sides)]
        statements = [ast.Assign(targets=[ast.Name(id=n, ctx=ast.Store())], value=side, type_comment=None)
                      for n, side in zip(names, sides)]
        loads = [ast.Name(id=n, ctx=ast.Load()) for n in names]
        check = ast.Compare(left=loads[0], ops=test.ops, comparators=[loads[1]]) if compare else loads[0]
        about = {"text": self.segment(test), "line": node.lineno,
                 "op": type(test.ops[0]).__name__ if compare else None,
                 "sides": [{"text": self.segment(s), "literal": _is_literal(s), "call": isinstance(s, ast.Call),
                            "named": isinstance(s, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))}
                           for s in sides]}
        args = [ast.Constant(value=json.dumps(about)), ast.List(elts=list(loads), ctx=ast.Load()),
                node.msg or ast.Constant(value=None)]
        fail = ast.Expr(value=ast.Call(func=ast.Name(id="@fail", ctx=ast.Load()), args=args, keywords=[]))
        statements.append(ast.If(test=ast.UnaryOp(op=ast.Not(), operand=check), body=[fail], orelse=[]))
        return [ast.copy_location(s, node) for s in statements]

    def segment(self, node):
        return ast.get_source_segment(self.source, node) or "the assertion"


def _is_literal(node):
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


OPERATORS = {"Eq": "==", "NotEq": "!=", "Lt": "<", "LtE": "<=", "Gt": ">", "GtE": ">=", "In": "in",
             "NotIn": "not in", "Is": "is", "IsNot": "is not"}


def assert_failed(about, values, message):
    """Called by a rewritten assert that failed: raise CheckFailed, whose
    sentence says what was compared (`about`: made by AssertRewriter)."""
    about = json.loads(about)
    sides = about["sides"]
    actual, expected = 0, 1
    if about["op"] == "Eq" and sides[0]["literal"] and not sides[1]["literal"]:
        actual, expected = 1, 0  # assert 1.5 == average(...): the call is what is checked
    order = [actual, expected] if about["op"] else [0]
    said = [_said(sides[i], values[i]) for i in order if not sides[i]["literal"] and sides[i]["named"]]
    sentence = "assert %s failed" % about["text"] + (": " + ", and ".join(said) if said else "")
    if message is not None:
        sentence = str(message)
    shown_values = {}
    if about["op"] == "Eq":
        shown_values = {"expected": shown(values[expected]), "actual": shown(values[actual])}
    raise CheckFailed(sentence, about["line"], **shown_values)


def _said(side, value):
    verb = "returned" if side["call"] else "is"
    return "%s %s %s" % (side["text"], verb, shown(value, 200))
