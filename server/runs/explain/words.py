"""Small pieces every part of the sentence uses: quoting untrusted text back,
naming a kind of value in plain words, and what to say about None."""
import re
from typing import Iterable

QUOTED = 40  # characters of a name or value quoted back

KINDS = {"str": "text (str)", "int": "whole number (int)", "float": "decimal number (float)", "list": "list",
         "dict": "dictionary", "tuple": "tuple", "bool": "True or False (bool)", "NoneType": "None"}

NONE = ("A function without return gives None, and so does a method that changes a list in place, such as "
        "sort(): use the list itself, or return what you use.")


def quote(text: object) -> str:
    text = str(text)
    return text if len(text) <= QUOTED else text[:QUOTED - 1] + "…"


def kind(name: str) -> str:
    """'a list', 'a text (str)', or the class's own name."""
    return "a " + KINDS.get(name, quote(name))


def first(rules: Iterable[tuple[str, str]], text: str) -> str | None:
    """The sentence of the first (pattern, sentence) rule whose pattern
    matches the start of `text`, with {1}, {2}... its groups quoted short;
    or None."""
    for pattern, sentence in rules:
        m = re.match(pattern, text)
        if m:
            return sentence.format(None, *(quote(g or "") for g in m.groups()))
    return None
