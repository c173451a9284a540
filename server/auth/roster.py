"""Lists of accounts: the checks a new account passes and the CSV format a
class is imported from. Pure functions, shared by the admin CLI
(`manage.py`, psycopg2) and the admin pages' API (asyncpg)."""
import csv
import io
import os
import unicodedata
from collections import namedtuple
from concurrent.futures import ThreadPoolExecutor

from . import passwords

MAX_DISPLAY_NAME = 200  # as the users table's CHECK constraint
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
HEADER = ["username", "display_name", "role", "password"]
# One data row of an import file; password None = generate one, problem None = valid.
Row = namedtuple("Row", "line username name role password problem")


def display_name_problem(name):
    if not name:
        return "the display name is empty"
    if len(name) > MAX_DISPLAY_NAME:
        return f"the display name must have at most {MAX_DISPLAY_NAME} characters"
    for ch in name:
        # Control characters (NUL cannot even be stored), line breaks and the
        # bidi controls that make a name read as another; joiners stay, as
        # some scripts need them.
        if unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp") or ch in BIDI_CONTROLS:
            return f"the display name may not contain the character U+{ord(ch):04X}"
    return None


def role_problem(role):
    if role not in passwords.ROLES:
        return f"unknown role {role!r} (expected {', '.join(passwords.ROLES)})"
    return None


def parse_csv(text):
    """A Row for every non-blank data row of CSV text (a header row is optional)."""
    return parse_rows(csv.reader(io.StringIO(text.lstrip("\ufeff"))))


def parse_rows(reader):
    """A Row for every non-blank data row a csv.reader gives."""
    rows, first_line = [], {}
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as e:  # a field over csv's size limit: that line is wrong, the next are read
            rows.append(Row(reader.line_num, "", "", "", None, f"not readable as CSV: {e}"))
            continue
        if not any(c.strip() for c in cells):
            continue
        if not rows and _is_header(cells):
            continue
        line = reader.line_num
        username = passwords.normalize_username(cells[0])
        name = cells[1].strip() if len(cells) > 1 else ""
        role = cells[2].strip().lower() if len(cells) > 2 else ""
        password = cells[3].strip() if len(cells) > 3 else ""
        problems = []
        if not 3 <= len(cells) <= 4:
            problems.append(f"expected 3 or 4 columns ({', '.join(HEADER)}), found {len(cells)}")
        else:
            problems += [passwords.username_problem(username), display_name_problem(name),
                         role_problem(role), password and passwords.password_problem(password)]
        if username in first_line:
            problems.append(f"username {username!r} is also on line {first_line[username]}")
        first_line.setdefault(username, line)
        problem = "; ".join(p for p in problems if p) or None
        rows.append(Row(line, username, name, role, password or None, problem))
    return rows


def _is_header(cells):
    names = [c.strip().lower().replace(" ", "_") for c in cells]
    return names[:1] == ["username"] and names[2:3] == ["role"]


def hash_all(plain):
    """argon2 releases the GIL, so threads hash a class in parallel."""
    if len(plain) < 2:
        return [passwords.hash_password(p) for p in plain]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return list(pool.map(passwords.hash_password, plain))
