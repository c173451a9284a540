"""One plain sentence under a traceback: what went wrong, on which line,
and what to try, for the errors beginners meet most.

It reads the end of what the program wrote to stderr, which the program
controls: the text is untrusted, so it is only matched (bounded, anchored
patterns on its last lines), never evaluated, and what is quoted back from
it is cut short. A program that forges a traceback gets a sentence about
the error it forged, shown to itself alone.

Python's own hint ("Did you mean: 'print'?") is kept: it comes from the
interpreter, which knows the names in scope.
"""
import re

QUOTED = 40  # characters of a name or value quoted back
FRAME = re.compile(r'^  File "(?:/home/student/|.*/home/[^/"]+/)([^"]{1,300})", line (\d{1,9})', re.M)
LAST = re.compile(r"^(?P<kind>[A-Za-z_][A-Za-z0-9_.]{0,80}): ?(?P<message>.{0,500})$")
HINT = re.compile(r"\. Did you mean: '([^']{1,80})'\?$")


def _q(text):
    text = str(text)
    return text if len(text) <= QUOTED else text[:QUOTED - 1] + "…"


def _where(frames):
    if not frames:
        return ""
    path, line = frames[-1]
    return f"Line {line} of {_q(path)}: "


def _last_error(text):
    """(kind, message) of the traceback's last line, or None."""
    for line in reversed(text.strip().splitlines()[-40:]):
        if not line.strip():
            continue
        m = LAST.match(line)
        return (m.group("kind").rsplit(".", 1)[-1], m.group("message")) if m else None
    return None


def _syntax(message):
    if message.startswith("expected ':'"):
        return ("a colon (:) is missing at the end of the line. Lines that start with if, elif, else, for, "
                "while, def or class end with a colon.")
    m = re.match(r"'(.)' was never closed", message)
    if m:
        closing = {"(": ")", "[": "]", "{": "}"}.get(m.group(1), "")
        return f"a bracket {m.group(1)} is opened but never closed. Add the missing {closing}."
    m = re.match(r"unmatched '(.)'", message)
    if m:
        return f"there is a closing {m.group(1)} without an opening one. Remove it or add the one that opens it."
    m = re.match(r"closing parenthesis '(.)' does not match opening parenthesis '(.)'", message)
    if m:
        return f"the bracket {m.group(2)} is closed with {m.group(1)}. Use the closing bracket that matches."
    if message.startswith(("unterminated string literal", "EOL while scanning")):
        return "a text (string) starts with a quote but does not end with one. Add the closing quote."
    if message.startswith("unterminated triple-quoted string"):
        return 'a text that starts with """ or \'\'\' never ends. Add the three closing quotes.'
    if "Perhaps you forgot a comma" in message:
        return "Python could not read this line; perhaps a comma is missing between two items."
    if message.startswith("invalid syntax. Maybe you meant '==' or ':='"):
        return "to compare two values use == (a single = gives a name a value)."
    if message.startswith("cannot assign to"):
        return "only a name can be on the left of =. Put the name first, as in total = total + 1."
    if message.startswith("invalid character"):
        return ("the line holds a character Python does not read (often a curly quote or dash copied "
                "from a document). Type it again with the keyboard.")
    if message.startswith("invalid decimal literal"):
        return "a name cannot start with a digit, and a number cannot contain letters."
    if message.startswith("'return' outside function"):
        return "return can only be used inside a function (def). Indent it under the function, or remove it."
    return ("Python could not read this line. Look for a missing bracket, quote, colon or comma on it or the "
            "line before.")


def _indentation(message):
    m = re.match(r"expected an indented block after '?(.{1,40}?)'? (?:statement |definition |clause )?"
                 r"on line (\d+)", message)
    if m:
        return (f"the lines inside the {m.group(1)} on line {m.group(2)} must be indented (moved right, "
                "usually by 4 spaces).")
    if message.startswith("unexpected indent"):
        return "this line is moved to the right but should not be. Remove the spaces at its start."
    if message.startswith("unindent does not match"):
        return "this line is not lined up with the lines above it. Use as many spaces as the block it belongs to."
    if "inconsistent use of tabs and spaces" in message:
        return "this block mixes tabs and spaces. Indent every line of it with spaces only."
    return "the line's indentation (the spaces at its start) is not what Python expects."


def _type(message):
    if re.match(r'can only concatenate str \(not "(int|float)"\) to str', message):
        return "you are adding text and a number. Turn the number into text with str(...), or print them with a comma."
    m = re.match(r"unsupported operand type\(s\) for ([^:]{1,3}): '(int|float)' and 'str'", message)
    if m:
        return (f"you are using {m.group(1)} on a number and a text. If the text holds a number (as input() "
                "gives), turn it into one with int(...) or float(...) first.")
    if re.match(r"unsupported operand type\(s\) for [^:]{1,3}: 'str' and '(int|float)'", message):
        return ("you are using a text where a number is needed. If it holds a number (as input() gives), "
                "turn it into one with int(...) or float(...) first.")
    m = re.match(r"'(\w{1,40})' object is not callable", message)
    if m:
        return (f"a {m.group(1)} is being called like a function (with brackets after it). Check that you did "
                "not give a function's name a value, as in print = 5.")
    m = re.match(r"(\w{1,60})\(\) (?:takes|missing) ", message)
    if m:
        return f"{_q(m.group(1))}() was given the wrong number of values. Check the values in its brackets."
    m = re.match(r"'NoneType' object is not (subscriptable|iterable)", message)
    if m:
        return ("a value is None (nothing). A function without return gives None: check that it returns "
                "what you use.")
    return f"a value of the wrong kind was used: {_q(message)}."


def _value(message):
    m = re.match(r"invalid literal for int\(\) with base 10: (.{1,200})$", message)
    if m:
        return (f"int() can only turn text made of digits into a whole number, and {_q(m.group(1))} is not one. "
                "Type a number with digits, such as 5.")
    m = re.match(r"could not convert string to float: (.{1,200})$", message)
    if m:
        return (f"float() can only turn text that looks like a number into one, and {_q(m.group(1))} does not. "
                "Type a number such as 3.5.")
    if message.startswith("math domain error"):
        return "a math function got a value it cannot work with, such as the square root of a negative number."
    return f"a value was not right for what it was used for: {_q(message)}."


def _attribute(message, hint):
    m = re.match(r"module '([\w.]{1,60})' has no attribute '(\w{1,80})'", message)
    if m:
        said = f"the module {m.group(1)} has no {_q(m.group(2))}."
    else:
        m = re.match(r"'(\w{1,60})' object has no attribute '(\w{1,80})'", message)
        said = f"a {m.group(1)} has no {_q(m.group(2))}." if m else f"{_q(message)}."
    if hint:
        return f"{said} Did you mean {_q(hint)}?"
    return said + " Check the spelling of the name after the dot."


def explain_error(kind, message, where=""):
    """The sentence for the error `kind: message`, or ""."""
    hint = HINT.search(message)
    hint = hint.group(1) if hint else None
    if hint:
        message = message[:-len(f". Did you mean: '{hint}'?")]
    if kind in ("NameError", "UnboundLocalError"):
        m = re.search(r"name '(\w{1,80})' is not defined", message) or re.search(r"'(\w{1,80})'", message)
        name = _q(m.group(1)) if m else "a name"
        if hint:
            return f"{where}Python does not know the name {name}. Did you mean {_q(hint)}? Check the spelling."
        if kind == "UnboundLocalError":
            return (f"{where}{name} is used in a function before it is given a value there. Give it a value "
                    "first, or pass it to the function.")
        return (f"{where}Python does not know the name {name}. Check its spelling, and that it is given a value "
                "(or imported) before this line. Text needs quotes around it.")
    if kind in ("IndentationError", "TabError"):
        return _join(where, _indentation(message))
    if kind == "SyntaxError":
        return _join(where, _syntax(message))
    if kind == "TypeError":
        return _join(where, _type(message))
    if kind == "ValueError":
        return _join(where, _value(message))
    if kind == "ZeroDivisionError":
        return f"{where}Your program divides by zero, which cannot be done. Check that the number you divide by is never 0."
    if kind == "IndexError":
        return (f"{where}There is no item at that position. Positions start at 0, so the last of 3 items is at "
                "position 2; check the list's length with len(...).")
    if kind == "KeyError":
        return (f"{where}The dictionary has no key {_q(message)}. Check the spelling, or check with "
                f"`if {_q(message)} in ...` first.")
    if kind == "AttributeError":
        return _join(where, _attribute(message, hint))
    if kind == "ModuleNotFoundError":
        m = re.search(r"No module named '([\w.]{1,80})'", message)
        name = _q(m.group(1)) if m else "this one"
        return (f"{where}There is no module named {name} here. Check the spelling; the standard library, "
                "numpy and matplotlib are installed, and your own files can be imported by their name.")
    if kind == "RecursionError":
        return (f"{where}A function keeps calling itself and never stops. Make sure it has a case that "
                "returns without calling itself again.")
    if kind == "FileNotFoundError":
        m = re.search(r"No such file or directory: '([^']{1,200})'", message)
        name = _q(repr(m.group(1))) if m else "the file"
        return f"{where}There is no file {name}. Check its name, and that it is in the same folder as your program."
    return ""


def _join(where, sentence):
    """After "Line 3 of main.py: " a sentence goes on in lower case; alone
    it starts with a capital, unless it starts with code (`int()`)."""
    if where or "(" in sentence.split(" ", 1)[0]:
        return where + sentence
    return sentence[:1].upper() + sentence[1:]


def explain(stderr):
    """The sentence for the traceback at the end of `stderr` (untrusted), or ""."""
    text = stderr[-8192:]
    found = _last_error(text)
    if found is None or "Traceback" not in text and found[0] not in ("SyntaxError", "IndentationError", "TabError"):
        return ""
    frames = [(m.group(1), int(m.group(2))) for m in FRAME.finditer(text)]
    return explain_error(*found, where=_where(frames))
