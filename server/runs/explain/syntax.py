"""Sentences for a program Python could not read (SyntaxError, IndentationError).

Python's message says what it expected; the line it quotes (untrusted, only
matched) often says what the student meant, as in `else if` or `print "hi"`."""
import keyword
import re

from .words import first, quote


def syntax_error(message: str, source: str) -> str | None:
    line = source.strip()
    if message.startswith("expected ':'"):
        if re.match(r"else\s+if\b", line):
            return "Python writes else if as one word, elif, as in elif x > 1:."
        return ("a colon (:) is missing at the end of the line. Lines that start with if, elif, else, for, "
                "while, def or class end with a colon.")
    if message.startswith("expected '('") and (m := re.match(r"def\s+(\w{1,40})", line)):
        return f"a function's name is followed by brackets and a colon, as in def {m.group(1)}():."
    if message.startswith("Missing parentheses in call to 'print'"):
        m = re.match(r"print\s+(.{1,40})$", line)
        return f"print needs brackets around what it prints, as in print({m.group(1) if m else '...'})."
    if message.startswith(("unterminated string literal", "EOL while scanning")):
        if re.search(r"\w'\w", line):
            return ("an apostrophe ends the text early. Put a text that holds an apostrophe in double quotes, "
                    "as in \"It's me\".")
        return "a text (string) starts with a quote but does not end with one. Add the closing quote."
    if message.startswith(("'break' outside loop", "'continue' not properly in loop")):
        word = "continue" if message.startswith("'continue'") else "break"
        return f"{word} can only be used inside a loop (for or while)."
    if message.startswith("invalid syntax"):
        said = _invalid(message, line)
        if said:
            return said
    return first(OTHERS, message)


def _invalid(message: str, line: str) -> str | None:
    """Python said only "invalid syntax": the line may say more."""
    if message.startswith("invalid syntax. Maybe you meant '==' or ':='"):
        return "to compare two values use == (a single = gives a name a value)."
    if "Perhaps you forgot a comma" in message:
        return "Python could not read this line; perhaps a comma is missing between two items."
    if re.search(r"=>|=<", line):
        return "to compare, write >= or <=, with the = second."
    m = re.match(r"(\w{1,40})\s*=[^=]", line)
    if m and keyword.iskeyword(m.group(1)):
        return f"{m.group(1)} is a word Python keeps for itself. Choose another name, such as my_{m.group(1)}."
    m = re.match(r"([A-Za-z_]\w{0,30})\s+([A-Za-z_]\w{0,30})\s*=[^=]", line)
    if m and not keyword.iskeyword(m.group(1)):
        return (f"a name cannot hold a space. Join the words with _, as in {m.group(1)}_{m.group(2)}.")
    return None


OTHERS = [
    (r"'\(' was never closed", "a bracket ( is opened but never closed. Add the missing )."),
    (r"'\[' was never closed", "a bracket [ is opened but never closed. Add the missing ]."),
    (r"'\{' was never closed", "a bracket {{ is opened but never closed. Add the missing }}."),
    (r"unmatched '(.)'", "there is a closing {1} without an opening one. Remove it or add the one that opens it."),
    (r"closing parenthesis '(.)' does not match opening parenthesis '(.)'",
     "the bracket {2} is closed with {1}. Use the closing bracket that matches."),
    (r"unterminated triple-quoted string",
     'a text that starts with """ or \'\'\' never ends. Add the three closing quotes.'),
    (r"cannot assign to", "only a name can be on the left of =. Put the name first, as in total = total + 1."),
    (r"invalid character", "the line holds a character Python does not read (often a curly quote or dash copied "
                           "from a document). Type it again with the keyboard."),
    (r"invalid decimal literal", "a name cannot start with a digit, and a number cannot contain letters."),
    (r"'return' outside function",
     "return can only be used inside a function (def). Indent it under the function, or remove it."),
    (r"", "Python could not read this line. Look for a missing bracket, quote, colon or comma on it or the line "
          "before."),
]


def indentation_error(message: str) -> str:
    m = re.match(r"expected an indented block after '?(.{1,40}?)'? (?:statement |definition |clause )?"
                 r"on line (\d+)", message)
    if m:
        return (f"the lines inside the {quote(m.group(1))} on line {m.group(2)} must be indented (moved right, "
                "usually by 4 spaces).")
    if message.startswith("unexpected indent"):
        return "this line is moved to the right but should not be. Remove the spaces at its start."
    if message.startswith("unindent does not match"):
        return "this line is not lined up with the lines above it. Use as many spaces as the block it belongs to."
    if "inconsistent use of tabs and spaces" in message:
        return "this block mixes tabs and spaces. Indent every line of it with spaces only."
    return "the line's indentation (the spaces at its start) is not what Python expects."
