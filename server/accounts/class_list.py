"""A class list: the CSV format a class's accounts are imported from
(username, display_name, role[, password[, class]]), read into rows each
validated against the account rules (rules.py). The password column may
name the person's school address instead (it has an @): that account signs
in with the school account (server/signin/), and gets no password. Pure
functions, for the admin API and `python -m server.manage` alike."""
import csv
import io
from collections import namedtuple

from . import rules

HEADER = ["username", "display_name", "role", "password", "class"]
# One data row of an import file; password None = generate one (unless
# email: a school address), class_name None = in no class (the default
# one), problem None = valid.
Row = namedtuple("Row", "line username name role password problem class_name email", defaults=(None, None))


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
        username = rules.normalize_username(cells[0])
        name = cells[1].strip() if len(cells) > 1 else ""
        role = cells[2].strip().lower() if len(cells) > 2 else ""
        password = cells[3].strip() if len(cells) > 3 else ""
        email, password = (password.lower(), "") if "@" in password else ("", password)
        class_name = cells[4].strip() if len(cells) > 4 else ""
        problems = []
        if not 3 <= len(cells) <= 5:
            problems.append(f"expected 3 to 5 columns ({', '.join(HEADER)}), found {len(cells)}")
        else:
            problems += rules.new_account_problems(username, name, role, password or None)
            problems.append(email and rules.email_problem(email))
            if class_name:
                problems.append(rules.class_name_problem(class_name))
                if role == "admin":
                    problems.append("an admin is in no class (admins reach every class)")
        for key, what in ((username, "username"), (email, "address")):
            if not key:
                continue
            if key in first_line:
                problems.append(f"{what} {key!r} is also on line {first_line[key]}")
            first_line.setdefault(key, line)
        problem = "; ".join(p for p in problems if p) or None
        rows.append(Row(line, username, name, role, password or None, problem, class_name or None, email or None))
    return rows


def _is_header(cells):
    names = [c.strip().lower().replace(" ", "_") for c in cells]
    return names[:1] == ["username"] and names[2:3] == ["role"]
