"""One plain sentence under a traceback: what went wrong, on which line,
and what to try, for the errors beginners meet most.

It reads the end of what the program wrote to stderr, which the program
controls: the text is untrusted, so it is only matched (bounded, anchored
patterns on its last lines), never evaluated, and what is quoted back from
it is cut short. A program that forges a traceback gets a sentence about
the error it forged, shown to itself alone.

Python's own hint ("Did you mean: 'print'?") is kept: it comes from the
interpreter, which knows the names in scope. The source line the traceback
quotes says how a name was used (called, or standing where text could).
"""
import re

from .names import attribute_error, import_error, module_error, name_error
from .syntax import indentation_error, syntax_error
from .values import index_error, key_error, type_error, value_error
from .words import quote

# A frame in the student's files, and the source line Python quotes under it.
FRAME = re.compile(r'^  File "(?:/home/student/|[^"\n]*/home/[^/"\n]+/)([^"\n]{1,300})", line (\d{1,9})[^\n]{0,300}'
                   r'(?:\n    (?!\s*File ")([^\n]{0,300}))?', re.M)
LAST = re.compile(r"^(?P<kind>[A-Za-z_][A-Za-z0-9_.]{0,80}): ?(?P<message>.{0,500})$")
HINT = re.compile(r"\. Did you mean: '([^']{1,80})'\?$")
UNREAD = ("SyntaxError", "IndentationError", "TabError")  # reported without a "Traceback" line

SENTENCES = {
    "ZeroDivisionError": "your program divides by zero, which cannot be done. Check that the number you divide by "
                         "is never 0.",
    "RecursionError": "a function keeps calling itself and never stops. Make sure it has a case that returns "
                      "without calling itself again.",
    "EOFError": "input() found nothing more to read: the program asked for more input than was typed.",
    "AssertionError": "an assert found its condition False. Check the values it tests on this line.",
}


def _last_error(text: str) -> tuple[str, str] | None:
    """(kind, message) of the traceback's last line, or None."""
    for line in reversed(text.strip().split("\n")[-40:]):  # Python ends lines with \n only
        if not line.strip():
            continue
        m = LAST.match(line)
        if m:
            return m.group("kind").rsplit(".", 1)[-1], m.group("message")
        return (line.strip(), "") if re.fullmatch(r"[A-Z]\w{0,80}Error", line.strip()) else None
    return None


def _sentence(kind: str, message: str, hint: str | None, source: str) -> str | None:
    """What to say, starting in lower case, or "" (or None)."""
    if kind == "NameError":
        m = re.search(r"name '(\w{1,80})' is not defined", message)
        return name_error(m.group(1), hint, source) if m else ""
    if kind == "UnboundLocalError":
        m = re.search(r"'(\w{1,80})'", message)
        return (f"{quote(m.group(1)) if m else 'a name'} is used in a function before it is given a value "
                "there. Give it a value first, or pass it to the function.")
    if kind in ("IndentationError", "TabError"):
        return indentation_error(message)
    if kind == "SyntaxError":
        return syntax_error(message, source)
    if kind == "TypeError":
        return type_error(message, source)
    if kind == "ValueError":
        return value_error(message)
    if kind == "IndexError":
        return index_error(message)
    if kind == "KeyError":
        return key_error(message)
    if kind == "AttributeError":
        return attribute_error(message, hint, source)
    if kind == "ModuleNotFoundError":
        return module_error(message)
    if kind == "ImportError":
        return import_error(message)
    if kind == "FileNotFoundError":
        m = re.search(r"No such file or directory: '([^']{1,200})'", message)
        name = quote(repr(m.group(1))) if m else "the file"
        return f"there is no file {name}. Check its name, and that it is in the same folder as your program."
    return SENTENCES.get(kind, "")


def explain_error(kind: str, message: str, where: str = "", source: str = "") -> str:
    """The sentence for the error `kind: message` raised by the line `source`, or ""."""
    hinted = HINT.search(message)
    hint = hinted.group(1) if hinted else None
    if hint:
        message = message[:-len(f". Did you mean: '{hint}'?")]
    sentence = _sentence(kind, message, hint, source)
    return _join(where, sentence) if sentence else ""


def _join(where: str, sentence: str) -> str:
    """After "Line 3 of main.py: " a sentence goes on in lower case; alone
    it starts with a capital, unless it starts with code (`int()`)."""
    if where or "(" in sentence.split(" ", 1)[0]:
        return where + sentence
    return sentence[:1].upper() + sentence[1:]


def explain(stderr: str) -> str:
    """The sentence for the traceback at the end of `stderr` (untrusted), or ""."""
    text = stderr[-8192:].replace("\r\n", "\n")  # a terminal's line ends
    found = _last_error(text)
    if found is None or "Traceback" not in text and found[0] not in UNREAD:
        return ""
    frames = [(m.group(1), int(m.group(2)), m.group(3) or "") for m in FRAME.finditer(text)]
    if not frames:
        return explain_error(*found)
    path, line, source = frames[-1]
    return explain_error(*found, where=f"Line {line} of {quote(path)}: ", source=source)
