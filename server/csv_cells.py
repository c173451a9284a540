"""CSV cells that no spreadsheet runs as a formula (OWASP's CSV injection):
every CSV the server writes (grades.csv, the password lists) passes its
text cells through `safe_cell`.

A spreadsheet reads a cell as a formula when it starts with = + - or @
(or a tab or carriage return), and some do so after characters that show
as nothing (a zero-width space, a byte order mark, other format
characters, spaces) or with the full-width and small forms of those signs
(＝ ＋ － ＠, ﹦ ﹢ ﹣ ﹫), which they fold to the plain ones. Such a cell is
kept as text by a leading apostrophe; the others are written as they are.
"""
import unicodedata

FORMULA_START = ("=", "+", "-", "@")
# What shows as nothing: format and control characters, marks, separators,
# code points not assigned, and the letters and symbols drawn blank.
UNSEEN = ("Cc", "Cf", "Cn", "Co", "Cs", "Mn", "Me", "Zl", "Zp", "Zs")
BLANK = {"\u115f", "\u1160", "\u3164", "\uffa0", "\u2800"}


def safe_cell(value) -> str:
    """`value` as the text of a CSV cell no spreadsheet runs as a formula."""
    text = "" if value is None else str(value)
    return "'" + text if _formula(text) else text


def _formula(text: str) -> bool:
    if text.startswith(("\t", "\r")):
        return True
    for char in text:
        if char in BLANK or unicodedata.category(char) in UNSEEN:
            continue
        return unicodedata.normalize("NFKC", char).startswith(FORMULA_START)  # ＝ is =
    return False
