"""Sentences about names: a NameError, an AttributeError, a module not found.

A name that is called is a function, so a misspelt one is compared with the
functions Python has and the names the traceback's source line shows (the
server does not hold the program, only the end of its stderr); any other
name may be a word the student meant as text. Names are only compared as
strings: nothing of the program is imported or evaluated."""
from typing import Iterable
import builtins
import difflib
import keyword
import re
import sys

from .words import NONE, kind, quote

FUNCTIONS = frozenset(n for n in dir(builtins) if n[0].islower() and callable(getattr(builtins, n)))
MODULES = frozenset(n for n in sys.stdlib_module_names if not n.startswith("_")) | {"numpy", "matplotlib"}
# Words of other languages, or of Python 2, that Python spells otherwise.
STAND_INS = {"true": "True", "false": "False", "null": "None", "nil": "None", "none": "None",
             "raw_input": "input", "echo": "print", "puts": "print", "length": "len", "strlen": "len"}
# Functions beginners call without importing the module that has them.
ELSEWHERE = {"sqrt": "math", "floor": "math", "ceil": "math", "randint": "random", "choice": "random",
             "shuffle": "random", "uniform": "random", "sleep": "time"}
ELSEWHERE_VALUES = {"pi": "math"}  # used, not called
# Methods of other languages, by the Python way to do the same.
METHODS = {"push": "append", "add": "append", "length": "len", "size": "len", "len": "len"}
WORD = re.compile(r"[A-Za-z_]\w{0,79}")


def _use(name: str, source: str) -> str:
    """How the line uses `name`: "called", "module" (name.x), "assigned"
    (it is changed from its own value), "text" (it stands alone, where a
    word in quotes could), or "value"."""
    n = re.escape(name)
    if re.search(rf"(?<![\w.]){n}\s*\(", source):
        return "called"
    if re.search(rf"(?<![\w.]){n}\s*\.", source):
        return "module"
    if re.match(rf"\s*{n}\s*(?:[-+*/%]|//|\*\*)=", source) or re.match(rf"\s*{n}\s*=[^=].*(?<![\w.]){n}\b",
                                                                         source):
        return "assigned"
    if re.search(rf"(?:^|[(,]|[=!]=|(?<![=!<>])=|\bin|\breturn)\s*{n}\s*(?:$|[),:]|[=!]=)", source):
        return "text"
    return "value"


def _close(name: str, candidates: Iterable[str]) -> str | None:
    found = difflib.get_close_matches(name, sorted(c for c in candidates if c != name), 1)
    return found[0] if found else None


def _names_in(source: str) -> set[str]:
    return {w for w in WORD.findall(source) if not keyword.iskeyword(w)}


def name_error(name: str, hint: str | None, source: str) -> str:
    """`name` is not defined; `hint` is Python's own suggestion, if any."""
    use = _use(name, source)
    if name in STAND_INS and (use == "called") == (STAND_INS[name] in FUNCTIONS):
        return (f"Python does not know the name {quote(name)}. Did you mean {STAND_INS[name]}? That is how "
                "Python writes it.")
    if use == "module" and name in MODULES:
        return f"{name} is a module: add import {name} at the top of your program."
    module = ELSEWHERE.get(name) if use == "called" else ELSEWHERE_VALUES.get(name)
    if module:
        return (f"{name} is in the {module} module: add from {module} import {name} at the top of your program "
                f"(or import {module}, then write {module}.{name}).")
    if hint and use != "called" and hint in FUNCTIONS:
        hint = None  # a value spelt like a function (help for hello) is no suggestion
    if use == "called":
        hint = hint or _close(name, FUNCTIONS | _names_in(source))
    else:
        hint = hint or _close(name, _names_in(source))
    if hint:
        return f"Python does not know the name {quote(name)}. Did you mean {quote(hint)}? Check the spelling."
    if use == "called":
        return (f"Python does not know the function {quote(name)}. Check its spelling here and on its def line, "
                "and that it is defined (or imported) above this line.")
    if use == "assigned":
        return (f"{quote(name)} is changed before it has a value. Give it one before this line, as in "
                f"{quote(name)} = 0.")
    said = (f"Python does not know the name {quote(name)}. Check its spelling, and that it is given a value "
            "(or imported) before this line.")
    if use == "text":
        said += f' If you meant the text {quote(name)}, put quotes around it: "{quote(name)}".'
    return said


def attribute_error(message: str, hint: str | None, source: str) -> str:
    m = re.match(r"(?:partially initialized )?module '([\w.]{1,60})' has no attribute '(\w{1,80})'", message)
    if m and message.startswith("partially"):
        return (f"your own file is probably named {m.group(1)}.py, like the module {m.group(1)}, so Python "
                f"imports your file instead. Rename your file.")
    if m:
        said = f"the module {m.group(1)} has no {quote(m.group(2))}."
    elif (m := re.match(r"type object '(\w{1,60})' has no attribute '(\w{1,80})'", message)):
        return (f"{m.group(1)} is the class itself, not an object made from it. Make one first, as in "
                f"item = {m.group(1)}(), then use item.{quote(m.group(2))}.")
    elif (m := re.match(r"'(\w{1,60})' object has no attribute '(\w{1,80})'", message)):
        return _method(m.group(1), m.group(2), hint, source)
    else:
        said = f"{quote(message)}."
    if hint:
        return f"{said} Did you mean {quote(hint)}?"
    return said + " Check the spelling of the name after the dot."


def _method(of: str, name: str, hint: str | None, source: str) -> str:
    """`of` (a type) has no attribute `name`."""
    if of == "NoneType":
        return f"a value is None (nothing), so it has no {quote(name)}. {NONE}"
    if of == "str" and name in ("append", "add", "insert", "remove"):
        return 'a text cannot be changed, only replaced: make a new one with +, as in word = word + "s".'
    if METHODS.get(name) == "len" or difflib.get_close_matches(name, ["length"], 1, 0.8):
        before = re.search(rf"(\w{{1,40}})\.{re.escape(name)}\b", source)
        return f"to count the items of {kind(of)}, use len({before.group(1) if before else '...'})."
    if METHODS.get(name) == "append" and of == "list":
        return f"a list has no {name}: to add an item at its end use append, as in items.append(3)."
    said = f"{kind(of)} has no {quote(name)}."
    if hint:
        return f"{said} Did you mean {quote(hint)}?"
    return said + " Check the spelling of the name after the dot."


def module_error(message: str) -> str:
    m = re.search(r"No module named '([\w.]{1,80})'", message)
    if not m:
        return "there is no such module here. Check the spelling of the name after import."
    name = m.group(1)
    close = difflib.get_close_matches(name.lower(), sorted(MODULES), 1)
    if close and close[0] != name:
        return f"there is no module named {quote(name)}. Did you mean {close[0]}?"
    return (f"there is no module named {quote(name)} here. Check the spelling; the standard library, numpy "
            "and matplotlib are installed, and your own files can be imported by their name.")


def import_error(message: str) -> str:
    m = re.match(r"cannot import name '(\w{1,80})' from '([\w.]{1,60})'", message)
    if m:
        return (f"the module {m.group(2)} has no {quote(m.group(1))}. Check the spelling of the name after "
                "import.")
    return f"an import failed: {quote(message)}."
