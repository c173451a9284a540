"""What an assist process does: completions, signatures and descriptions
(jedi) and diagnostics (pyflakes) on a student's text and copies of the
modules it imports. It runs only in an assist process (__main__.py), never
in a server worker: both are CPU work of unbounded appetite.

Nothing here executes a student's code. jedi parses Python source; the
only modules it imports are compiled ones of the sandbox interpreter's own
library (`load_unsafe_extensions=False`), in a subprocess of that
interpreter, so it knows the numpy and matplotlib the programs will use.
It never sees a student's home: the service reads the modules through the
store (no links followed, nothing that blocks) and they are written here
into a folder of this process's own (`Projects`), which holds only the
modules of the student being answered; `sys.path` changes in the text are
ignored. The process runs walled in (../jail.py), so what a relative import
can walk up to is the jail's read-only system folders and nothing else.

Positions are a 1-based line and a 0-based column counted in characters
(code points), as jedi counts them; lines are split on "\\n" only.
"""
import os
import re
import shutil

import jedi
import jedi.inference.base_value
import jedi.inference.compiled.value
import jedi.inference.sys_path
import pyflakes.api
import pyflakes.messages

from . import ranking

MAX_COMPLETIONS = 400
EXACT_TYPES = 40  # completions whose exact type is worked out (see complete)
MAX_SIGNATURES = 3
DOC_CHARS = 2000
LITERAL_CHARS = 10_000  # a longer sum of string literals is just "a str" to jedi (see _bounded_operation)
MODULE_FILE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\.pyw?")
WORD_BEFORE = re.compile(r"\w*$")
# Only mistakes that stop a program are underlined while typing: an unused
# import is not a mistake while the rest is still being written.
UNDEFINED = (pyflakes.messages.UndefinedName, pyflakes.messages.UndefinedLocal, pyflakes.messages.UndefinedExport)
# Warm-up: the libraries a class uses, so that the first student does not wait for their parsing.
WARM = ("import random\nrandom.", "import math\nmath.", "import numpy as np\nnp.", "import matplotlib.pyplot as plt\nplt.",
        "pri")


def _no_sys_path_changes(module_context):
    return []


# jedi follows `sys.path.append(...)` in the text it reads; that would let a
# student's text name any folder for jedi to read modules from.
jedi.inference.sys_path.check_sys_path_modifications = _no_sys_path_changes


_execute_operation = jedi.inference.compiled.value.CompiledValue.execute_operation


def _bounded_operation(self, other, operator):
    """jedi works out `a + b` of two string literals by really adding them:
    `s = "abcdefgh"` then forty lines of `s = s + s` made it build a
    terabyte-long string. Past LITERAL_CHARS the sum is the left side's
    type, as jedi already answers for `s * n`."""
    if operator == "+":
        left, right = self.get_safe_value(default=None), other.get_safe_value(default=None)
        if isinstance(left, (str, bytes)) and isinstance(right, (str, bytes)) \
                and len(left) + len(right) > LITERAL_CHARS:
            return jedi.inference.base_value.ValueSet([self])
    return _execute_operation(self, other, operator)


jedi.inference.compiled.value.CompiledValue.execute_operation = _bounded_operation


class BadRequest(ValueError):
    """A request this process cannot answer as asked (the service checks first)."""


class Projects:
    """The one folder that holds copies of a student's modules: only the
    modules of the student being answered are on disk, so that no relative
    import reaches another student's. Files are written only when their
    text changed (a student typing keeps the folder as it is)."""

    def __init__(self, root):
        self.root = root
        self.key = None
        self.known = {}  # file name -> text, of the folder on disk

    def folder(self, key, files):
        if not re.fullmatch(r"[0-9a-f]{8,64}", key):
            raise BadRequest("bad project key")
        path = os.path.join(self.root, key)
        if key != self.key:
            for name in os.listdir(self.root):  # the last student's folder, and anything left
                shutil.rmtree(os.path.join(self.root, name), ignore_errors=True)
            os.makedirs(path, 0o700, exist_ok=True)
            self.key, self.known = key, {}
        for name in set(self.known) - set(files):
            os.unlink(os.path.join(path, name))
            del self.known[name]
        for name, text in files.items():
            if not MODULE_FILE.fullmatch(name):
                raise BadRequest(f"bad module name {name!r}")
            if self.known.get(name) != text:
                with open(os.path.join(path, name), "w", encoding="utf-8", errors="surrogatepass") as f:
                    f.write(text)
                self.known[name] = text
        return path


class Engine:
    def __init__(self, python, root):
        self.python = python
        self.environment = jedi.create_environment(python, safe=False)
        self.base_path = [p for p in self.environment.get_sys_path() if p]
        self.projects = Projects(os.path.join(root, "projects"))
        os.makedirs(self.projects.root, mode=0o700, exist_ok=True)

    def warm(self):
        """Parse and infer what a class uses first (numpy and matplotlib take seconds cold)."""
        for text in WARM:
            lines = text.split("\n")
            self.handle({"op": "complete", "source": text, "path": "warm.py", "project": "0" * 16, "files": {},
                         "line": len(lines), "column": len(lines[-1])})

    def handle(self, request):
        op = request.get("op")
        if op == "check":
            return check(request["source"])
        if op not in ("complete", "signatures", "describe"):
            raise BadRequest(f"unknown op {op!r}")
        script, line, column = self._script(request)
        if op == "complete":
            return complete(script, line, column, request["source"], request["files"])
        if op == "signatures":
            return signatures(script, line, column)
        return describe(self, request, line, column)

    def _script(self, request, source=None):
        name = request["path"]
        if not MODULE_FILE.fullmatch(name):
            raise BadRequest(f"bad file name {name!r}")
        folder = self.projects.folder(request["project"], request["files"])
        project = jedi.Project(folder, environment_path=self.python, sys_path=[folder, *self.base_path],
                               smart_sys_path=False, load_unsafe_extensions=False)
        source = request["source"] if source is None else source
        script = jedi.Script(source, path=os.path.join(folder, name), project=project,
                             environment=self.environment)
        line, column = request["line"], request["column"]
        lines = source.split("\n")
        if not (isinstance(line, int) and isinstance(column, int)
                and 1 <= line <= len(lines) and 0 <= column <= len(lines[line - 1])):
            raise BadRequest("position outside the text")
        return script, line, column


def complete(script, line, column, source, modules):
    found = [c for c in script.complete(line, column)[:MAX_COMPLETIONS]
             # file names inside strings: the project folder is ours, not the student's
             if c._name.api_type != "path"]
    typed = WORD_BEFORE.search(source.split("\n")[line - 1][:column]).group()
    if not typed.startswith("_"):
        found = [c for c in found if not c.name.startswith("_")]
    # A name's exact type may need the inference of what it was imported
    # from: seconds for numpy's hundreds of names. Short lists get it; long
    # ones what the name itself says (nothing, for an imported name).
    exact = len(found) <= EXACT_TYPES
    items = [{"name": c.name, "type": c.type if exact else _plain_type(c)} for c in found]
    folder = os.path.dirname(str(script.path))
    order = ranking.rank([(item["name"], item["type"]) for item in items], typed,
                         lambda i: _own(found[i], folder, modules))
    return {"completions": [items[i] for i in order],
            "prefix": found[0].get_completion_prefix_length() if found else 0}


def _own(completion, folder, modules):
    """Whether a completion is the student's own: one of their modules, or
    a name defined in their files. Never infers: a module's path would
    mean importing it (seconds for the hundreds that `import ` lists)."""
    name = completion._name
    if name.api_type == "module":
        return completion.name + ".py" in modules
    if name.tree_name is None:  # compiled, or built in
        return False
    path = completion.module_path
    return path is not None and os.path.dirname(str(path)) == folder


def _plain_type(completion):
    name = completion._name  # jedi's own name object: its type without inference
    definition = name.tree_name.get_definition() if name.tree_name is not None else None
    if definition is not None and definition.type in ("import_from", "import_name"):
        return ""
    return name.api_type


def signatures(script, line, column):
    out = []
    for sig in script.get_signatures(line, column)[:MAX_SIGNATURES]:
        label = sig.to_string()
        out.append({"label": label, "params": _param_spans(label, [p.to_string() for p in sig.params]),
                    "index": sig.index, "doc": _doc_at(script, *sig.bracket_start)})
    return {"signatures": out}


def _param_spans(label, params):
    """[start, end] of each parameter's text in the label (code points)."""
    spans, at = [], label.find("(") + 1
    for text in params:
        start = label.find(text, at)
        if start < 0:
            break
        spans.append([start, start + len(text)])
        at = start + len(text)
    return spans


def _doc_at(script, line, column):
    """The docstring of what the name ending at (line, column) is: from the
    library's source where there is one (the type stubs have none)."""
    try:
        found = script.infer(line, column, prefer_stubs=False) or script.infer(line, column)
    except Exception:  # jedi on unfinished code: no documentation is an answer
        return ""
    for name in found:
        doc = name.docstring(raw=True).strip()
        if doc:
            return doc[:DOC_CHARS]
    return ""


def describe(engine, request, line, column):
    """The signature and documentation of the completion `name` at the cursor."""
    name = request.get("name")
    if not isinstance(name, str) or not name.isidentifier():
        raise BadRequest("name must be an identifier")
    lines = request["source"].split("\n")
    text = lines[line - 1]
    start = column - len(WORD_BEFORE.search(text[:column]).group())
    lines[line - 1] = text[:start] + name + text[column:]
    end = start + len(name)
    script, _, _ = engine._script(dict(request, column=end), "\n".join(lines))
    signature = ""
    for found in script.infer(line, end, prefer_stubs=True):  # the stubs' signatures have types
        sigs = found.get_signatures()
        if sigs:
            signature = sigs[0].to_string()
            break
    return {"name": name, "signature": signature, "doc": _doc_at(script, line, end)}


class _Collected:
    """A pyflakes reporter that keeps the mistakes as diagnostics."""

    def __init__(self, lines):
        self.lines = lines
        self.found = []

    def _add(self, line, start, end, message):
        line = min(max(line or 1, 1), len(self.lines))
        width = len(self.lines[line - 1])
        start = min(max(start, 0), width)
        if start == width and start > 0 and end <= start + 1:
            start -= 1  # at the end of the line: mark its last character
        self.found.append({"line": line, "column": start, "end_column": min(max(end, start), width),
                           "severity": "error", "message": message})

    def syntaxError(self, filename, msg, lineno, offset, text):  # noqa: N802 - pyflakes' names
        column = (offset or 1) - 1  # 1-based, in characters
        self._add(lineno, column, column + 1, msg[:1].upper() + msg[1:])

    def unexpectedError(self, filename, msg):  # noqa: N802
        self._add(1, 0, 0, str(msg))

    def flake(self, message):
        if not isinstance(message, UNDEFINED):
            return
        line = min(max(message.lineno, 1), len(self.lines))
        # pyflakes counts columns in UTF-8 bytes (the ast's col_offset).
        head = self.lines[line - 1].encode("utf-8", "surrogatepass")[:message.col]
        start = len(head.decode("utf-8", "ignore"))
        name = str(message.message_args[0])
        text = message.message % message.message_args
        self._add(line, start, start + len(name), text[:1].upper() + text[1:])


def check(source):
    lines = source.split("\n")
    found = _Collected(lines)
    pyflakes.api.check(source, "<editor>", found)
    return {"diagnostics": found.found[:200]}
