"""Sentences for a value of the wrong kind or out of range: TypeError,
ValueError, IndexError, KeyError. The traceback's source line (untrusted,
only matched) tells a number called like a function (2(3 + 4)) from a
function's name given a value."""
import re

from .words import NONE, first, kind, quote

FROM_INPUT = "If the text holds a number (as input() gives), turn it into one with {} first."


def type_error(message: str, source: str) -> str:
    for explain in (_operands, _calls, _items):
        said = explain(message, source)
        if said:
            return said
    return f"a value of the wrong kind was used: {quote(message)}."


def _operands(message: str, source: str) -> str | None:
    """+, -, *, <, ... between values that do not go together."""
    if "'NoneType'" in message and message.startswith(("unsupported operand", "can only concatenate")):
        return f"a value is None (nothing). {NONE}"
    if re.match(r'can only concatenate str \(not "(int|float)"\) to str', message):
        return ("you are adding text and a number. To join them as text, turn the number into text with "
                "str(...) (or print them with a comma); if the text holds a number (as input() gives), turn it "
                "into one with int(...).")
    m = re.match(r"unsupported operand type\(s\) for ([^:]{1,3}): '(int|float)' and 'str'", message)
    if m:
        return f"you are using {m.group(1)} on a number and a text. " + FROM_INPUT.format("int(...) or float(...)")
    if re.match(r"unsupported operand type\(s\) for [^:]{1,3}: 'str' and '(int|float)'", message):
        return "you are using a text where a number is needed. " + FROM_INPUT.format("int(...) or float(...)")
    m = re.match(r"unsupported operand type\(s\) for ([^:]{1,3}): 'str' and 'str'", message)
    if m:
        return (f"you cannot use {m.group(1)} on two texts. If they hold numbers (as input() gives), turn them "
                "into numbers with int(...) or float(...) first.")
    m = re.match(r"can't multiply sequence by non-int of type '(\w{1,20})'", message)
    if m:
        by = "a text" if m.group(1) == "str" else kind(m.group(1))
        how = "float(...)" if m.group(1) == "float" else "int(...) or float(...)"
        return f"you multiply a text (or list) by {by}. " + FROM_INPUT.format(how)
    m = re.match(r"'([<>]=?)' not supported between instances of '(\w{1,40})' and '(\w{1,40})'", message)
    if m and {m.group(2), m.group(3)} in ({"str", "int"}, {"str", "float"}):
        return f"you compare a text with a number using {m.group(1)}. " + FROM_INPUT.format("int(...)")
    if m:
        return f"{kind(m.group(2))} and {kind(m.group(3))} cannot be compared with {m.group(1)}."
    return None


def _calls(message: str, source: str) -> str | None:
    """A value called like a function, or a function given the wrong values."""
    m = re.match(r"'(\w{1,40})' object is not callable", message)
    if m and m.group(1) in ("int", "float") and re.search(r"(?<![\w.])\d+(?:\.\d+)?\s*\(", source):
        return "a number is followed by brackets. To multiply, write * between them, as in 2 * (3 + 4)."
    if m and m.group(1) in ("list", "dict", "tuple", "str"):
        return (f"{kind(m.group(1))} is being called like a function (with round brackets after it). To get "
                "one of its items use square brackets, as in items[0].")
    if m:
        return (f"{kind(m.group(1))} is being called like a function (with brackets after it). Check that you "
                "did not give a function's name a value, as in print = 5.")
    m = re.match(r"(\w{1,60})\.(\w{1,60})\(\) missing 1 required positional argument: 'self'", message)
    if m:
        return (f"{m.group(2)} is called on the class {m.group(1)}, not on an object made from it. Make one "
                f"first, as in item = {m.group(1)}(), then call item.{m.group(2)}().")
    m = re.match(r"(?:(\w{1,60})\.__init__|(?:\w{1,60}\.)?(\w{1,60}))\(\) (?:takes|missing|got)", message)
    if m:
        return (f"{quote(m.group(1) or m.group(2))}() was given the wrong number of values. Check the values in "
                "its brackets.")
    m = re.match(r"object of type '(\w{1,40})' has no len\(\)", message)
    if m:
        return f"len() counts the items of a text, list or dictionary, and {kind(m.group(1))} has none."
    m = re.match(r"'(\w{1,40})' object cannot be interpreted as an integer", message)
    if m and m.group(1) == "float":
        return "a whole number is needed here, not a decimal one. Use int(...) or round(...) on it."
    if m:
        return f"a whole number is needed here, not {kind(m.group(1))}. " + FROM_INPUT.format("int(...)")
    return None


def _items(message: str, source: str) -> str | None:
    """[...], item assignment and loops over a value that has no items."""
    m = re.match(r"'(\w{1,40})' object is not (subscriptable|iterable)", message)
    if m and m.group(1) == "NoneType":
        return f"a value is None (nothing). {NONE}"
    loop = re.match(r"\s*for\s+\w{1,40}\s+in\s+(\d{1,9})\s*:", source)
    if m and m.group(2) == "iterable" and loop:
        return (f"a for loop goes through items, and a number has none. To repeat {loop.group(1)} times, write "
                f"for i in range({loop.group(1)}):.")
    if m and m.group(2) == "iterable":
        return f"{kind(m.group(1))} has no items to go through; a list, a text or range(...) has."
    if m and m.group(1) == "int":
        return "a whole number (int) has no items to take with [...]. For its digits, turn it into text: str(n)[0]."
    if m:
        return f"{kind(m.group(1))} has no items to take with [...]."
    m = re.match(r"'(\w{1,40})' object does not support item assignment", message)
    if m and m.group(1) == "str":
        return 'a text cannot be changed in place. Make a new one, as in word = "b" + word[1:].'
    if m:
        return f"{kind(m.group(1))} cannot be changed in place. Use a list ([...]) if it must change."
    if re.match(r"(list|tuple|string) indices must be integers", message):
        return ("positions are whole numbers, not text or decimals. If a position comes from input(), turn it "
                "into one with int(...).")
    return None


VALUES = [
    (r"invalid literal for int\(\) with base 10: (?:''|\"\")$",
     "int() was given an empty text: nothing was typed. Type a number with digits, such as 5."),
    (r"invalid literal for int\(\) with base 10: (['\"]\s*-?\d+[.,]\d*\s*['\"])$",
     "int() takes whole numbers only, and {1} has a decimal point. Use float(...) for it, or round it."),
    (r"invalid literal for int\(\) with base 10: (.{1,200})$",
     "int() can only turn text made of digits into a whole number, and {1} is not one. Type a number with "
     "digits, such as 5."),
    (r"could not convert string to float: '(-?\d{1,20}),(\d{1,20})'$",
     "a decimal number is written with a dot, not a comma, as in {1}.{2}."),
    (r"could not convert string to float: (.{1,200})$",
     "float() can only turn text that looks like a number into one, and {1} does not. Type a number such as 3.5."),
    (r"too many values to unpack \(expected (\d{1,9})\)",
     "there are more values on the right of = than the {1} names on its left. Use as many names as values."),
    (r"not enough values to unpack \(expected (\d{1,9}), got (\d{1,9})\)",
     "there are {2} values on the right of = but {1} names on its left. Use as many names as values."),
    (r"list\.remove\(x\): x not in list|.{1,60} is not in list$",
     "the item is not in the list. Check first, as in if x in items:."),
    (r"math domain error",
     "a math function got a value it cannot work with, such as the square root of a negative number."),
]

POSITIONS = [
    (r"pop from empty list",
     "the list is empty, so pop() has nothing to take out. Check that it has items first (if items:)."),
    (r"list assignment index out of range",
     "there is no item at that position to replace. To add an item at the end of a list use append, as in "
     "items.append(5)."),
    (r"string index out of range",
     "there is no character at that position in the text. Positions start at 0, so the last of 3 characters is "
     "at position 2; check the text's length with len(...)."),
    (r"",
     "there is no item at that position. Positions start at 0, so the last of 3 items is at position 2; check "
     "the list's length with len(...)."),
]


def value_error(message: str) -> str:
    return first(VALUES, message) or f"a value was not right for what it was used for: {quote(message)}."


def index_error(message: str) -> str | None:
    return first(POSITIONS, message)


def key_error(message: str) -> str:
    return (f"the dictionary has no key {quote(message)}. Check the spelling, or check with "
            f"`if {quote(message)} in ...` first.")
