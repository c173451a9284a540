"""What an account's fields may be: the one set of rules the web pages, the
admin API, the CSV import and `python -m server.manage` all apply. Pure
functions: each returns why a value is not acceptable, or None."""
import re
import unicodedata
from typing import TypeVar

from ..errors import Refused

USERNAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}\Z")  # as the users table's CHECK constraint
ROLES = ("student", "teacher", "admin")
MIN_PASSWORD = 8
MAX_PASSWORD = 256  # bounds the work one request can ask of the hasher
MAX_DISPLAY_NAME = 200  # as the users table's CHECK constraint
MAX_CLASS_NAME = 100  # as the classes table's CHECK constraint
T = TypeVar("T")
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def normalize_username(username: T) -> T:
    if isinstance(username, str):
        return username.strip().lower()  # type: ignore[return-value]  # str in, str out
    return username


def username_problem(username: object) -> str | None:
    if not isinstance(username, str) or not USERNAME_RE.match(username):
        return ("a username is 1 to 64 lowercase letters, digits, '.', '_' or '-', "
                "starting with a letter or digit")
    return None


def password_problem(password: object) -> str | None:
    """Why `password` is not acceptable as a new password, or None."""
    if not isinstance(password, str):
        return "the password must be text"
    if len(password) < MIN_PASSWORD:
        return f"the password must have at least {MIN_PASSWORD} characters"
    if len(password) > MAX_PASSWORD:
        return f"the password must have at most {MAX_PASSWORD} characters"
    return None


def display_name_problem(name: object) -> str | None:
    return name_problem(name, "the display name", MAX_DISPLAY_NAME)


def class_name_problem(name: object) -> str | None:
    return name_problem(name, "the class name", MAX_CLASS_NAME)


def name_problem(name: object, what: str, max_len: int) -> str | None:
    """Why `name` cannot be a name shown to people (`what`: 'the display
    name'), or None."""
    if not isinstance(name, str) or not name:
        return f"{what} is empty"
    if len(name) > max_len:
        return f"{what} must have at most {max_len} characters"
    for ch in name:
        # Control characters (NUL cannot even be stored), line breaks and the
        # bidi controls that make a name read as another; joiners stay, as
        # some scripts need them.
        if unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp") or ch in BIDI_CONTROLS:
            return f"{what} may not contain the character U+{ord(ch):04X}"
    return None


EMAIL_RE = re.compile(r"^[^@\s,;<>\"]{1,64}@[a-z0-9.-]{1,253}\.[a-z]{2,63}\Z")


def email_problem(email: object) -> str | None:
    """Why `email` (lowercased) cannot be an account's school address, or None."""
    if not isinstance(email, str) or not EMAIL_RE.match(email):
        return f"{email!r} is not an e-mail address such as ada@school.org"
    return None


def role_problem(role: object) -> str | None:
    if role not in ROLES:
        return f"unknown role {role!r} (expected {', '.join(ROLES)})"
    return None


def new_account_problems(username: object, display_name: object, role: object,
                         password: object = None) -> list[str]:
    """Every reason a new account (username already normalized) cannot be
    made; a password of None is generated later."""
    found = [username_problem(username), display_name_problem(display_name), role_problem(role),
             password_problem(password) if password is not None else None]
    return [p for p in found if p]


def check_new_account(username: str, display_name: str, role: str,
                      password: str | None = None) -> tuple[str, str]:
    """(normalized username, trimmed display name), or Refused naming the
    first problem."""
    username, display_name = normalize_username(username), display_name.strip()
    problems = new_account_problems(username, display_name, role, password)
    if problems:
        raise Refused(400, "invalid_account", problems[0][0].upper() + problems[0][1:] + ".")
    return username, display_name
