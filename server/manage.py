"""Administer PyClassroom accounts from a shell: `python -m server.manage`.

For the jobs a teacher or operator does outside the web UI: create one
account, import a class from a CSV file, reset a forgotten password, lock
or unlock an account, list accounts. It reads the same settings as the
server (DATABASE_URL, DATA_DIR), so with DATABASE_URL unset it works on the
embedded PostgreSQL, whether or not the server is running.

Exit status: 0 done, 1 refused (one clear line on stderr, nothing changed),
2 usage error.
"""
import argparse
import asyncio
import contextlib
import csv
import json
import os
import sys

import asyncpg
import psycopg2
import psycopg2.extras

from . import config, db
from .auth import passwords, roster
from .embedded_postgres import EmbeddedPostgres, EmbeddedPostgresError

ACTOR = "manage"


class Refused(Exception):
    """Bad input or an impossible request; the message is shown as is."""


# --- database -------------------------------------------------------------

async def _migrate(dsn):
    conn = await asyncpg.connect(dsn, timeout=15)
    try:
        async with db.locked(conn):
            await db.migrate(conn)
    finally:
        await conn.close()


def _connect(dsn):
    """Bring the schema up to date, then open the psycopg2 connection."""
    try:
        asyncio.run(_migrate(dsn))
        return psycopg2.connect(dsn, connect_timeout=15)
    except (OSError, asyncio.TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError,
            psycopg2.Error, ValueError) as e:
        raise Refused(f"cannot use the database: {_first_line(e)}") from None


@contextlib.contextmanager
def database(cfg):
    """A psycopg2 connection to DATABASE_URL, or to the embedded PostgreSQL
    under DATA_DIR (stopped again on leaving unless a server still uses it)."""
    if cfg.DATABASE_URL:
        conn = _connect(cfg.DATABASE_URL)
        try:
            yield conn
        finally:
            conn.close()
        return
    pg = EmbeddedPostgres(cfg.DATA_DIR)
    try:
        dsn = pg.start()
    except (EmbeddedPostgresError, OSError, psycopg2.Error) as e:
        with contextlib.suppress(Exception):
            pg.stop()  # releases our share of the cluster even after a partial start
        raise Refused(f"cannot start the embedded PostgreSQL in {cfg.DATA_DIR}: {_first_line(e)}") \
            from None
    try:
        conn = _connect(dsn)
        try:
            yield conn
        finally:
            conn.close()
    finally:
        pg.stop()


def _first_line(error):
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


def audit(cur, action, subject, **detail):
    cur.execute("INSERT INTO audit_log (actor, action, subject, detail) VALUES (%s, %s, %s, %s)",
                (ACTOR, action, subject, psycopg2.extras.Json(detail)))


# --- validation -----------------------------------------------------------

def username_arg(text):
    username = passwords.normalize_username(text)
    problem = passwords.username_problem(username)
    if problem:
        raise Refused(f"{text!r} is not a valid username: {problem}")
    return username


# --- create-user ----------------------------------------------------------

def prepare_create_user(args):
    args.name = (args.name if args.name is not None else args.username).strip()
    problem = roster.display_name_problem(args.name)
    if args.password is not None:
        problem = problem or passwords.password_problem(args.password)
    if problem:
        raise Refused(problem)


def cmd_create_user(conn, args):
    username, name = args.username, args.name
    password = args.password or passwords.generate_password()
    password_hash = passwords.hash_password(password)
    with conn, conn.cursor() as cur:
        cur.execute("""INSERT INTO users (username, display_name, role, password_hash)
                       VALUES (%s, %s, %s, %s) ON CONFLICT (username) DO NOTHING RETURNING id""",
                    (username, name, args.role, password_hash))
        if cur.fetchone() is None:
            raise Refused(f"user {username!r} already exists")
        audit(cur, "create_user", username, role=args.role)
    print(f"created {args.role} {username!r} ({name})")
    if args.password is None:
        print(f"password: {password}")
    return 0


# --- import-users ---------------------------------------------------------

def read_rows(path):
    """A Row for every non-blank data row of the CSV file."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:  # -sig: spreadsheets add a BOM
            return roster.parse_rows(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise Refused(f"cannot read {path}: {_first_line(e)}") from None


def _open_passwords_out(path):
    """Create the file before any account exists, so that generated passwords
    always have somewhere to go; never overwrite an earlier list."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise Refused(f"{path} already exists; choose a new file for the passwords") from None
    except OSError as e:
        raise Refused(f"cannot create {path}: {e.strerror}") from None
    os.fchmod(fd, 0o600)  # whatever the umask
    return os.fdopen(fd, "w", newline="", encoding="utf-8")


def prepare_import(args):
    """Everything that needs no database: read and check the file."""
    rows = read_rows(args.file)
    if not rows:
        raise Refused(f"{args.file} has no user rows")
    invalid = [r for r in rows if r.problem]
    if invalid:
        for r in invalid:
            print(f"line {r.line}: {r.username or '(no username)'}: {r.problem}", file=sys.stderr)
        raise Refused(f"{len(invalid)} of {len(rows)} rows of {args.file} are invalid; "
                      "nothing was created")
    args.rows = rows


def cmd_import_users(conn, args):
    out = _open_passwords_out(args.passwords_out) if args.passwords_out else None
    try:
        created, report = _import(conn, args.rows, os.path.basename(args.file))
    except BaseException:
        if out:  # nothing was created: leave no empty password list behind
            out.close()
            os.unlink(args.passwords_out)
        raise
    generated = [r for r, outcome in report if outcome == "created" and r.password is None]
    for r, outcome in report:
        note = f" ({r.role})" if outcome == "created" else ""
        if r in generated and not out:
            note += f"  password: {created[r.username]}"
        print(f"line {r.line}: {r.username:<20} {outcome}{note}")
    if out:
        with out:
            writer = csv.writer(out)
            writer.writerow(["username", "display_name", "password"])
            writer.writerows((r.username, r.name, created[r.username]) for r in generated)
        print(f"{len(generated)} generated password(s) written to {args.passwords_out}")
    outcomes = [outcome for _, outcome in report]
    print(f"created {outcomes.count('created')}, skipped {len(outcomes) - outcomes.count('created')}, "
          "invalid 0")
    return 0


def _import(conn, rows, source):
    """Create the rows' accounts in one transaction; return
    ({username: password} of those created, [(row, outcome)])."""
    with conn.cursor() as cur:
        cur.execute("SELECT username FROM users WHERE username = ANY(%s)",
                    ([r.username for r in rows],))
        existing = {u for (u,) in cur.fetchall()}
    conn.rollback()  # hashing takes a while; hold no snapshot meanwhile
    new = [r for r in rows if r.username not in existing]
    plain = {r.username: r.password or passwords.generate_password() for r in new}
    hashes = roster.hash_all([plain[r.username] for r in new])
    inserted = set()
    with conn, conn.cursor() as cur:
        # ON CONFLICT: an account made since the check above is skipped too.
        if new:
            done = psycopg2.extras.execute_values(
                cur, """INSERT INTO users (username, display_name, role, password_hash) VALUES %s
                        ON CONFLICT (username) DO NOTHING RETURNING username""",
                [(r.username, r.name, r.role, h) for r, h in zip(new, hashes)], fetch=True)
            inserted = {u for (u,) in done}
        for r in new:
            if r.username in inserted:
                audit(cur, "create_user", r.username, role=r.role, source=source)
    report = [(r, "created" if r.username in inserted else "skipped: already exists") for r in rows]
    return {u: plain[u] for u in inserted}, report


# --- reset-password, activate, deactivate --------------------------------

def _user_id(cur, username):
    cur.execute("SELECT id, active FROM users WHERE username = %s FOR UPDATE", (username,))
    row = cur.fetchone()
    if row is None:
        raise Refused(f"no user {username!r}")
    return row


def _end_sessions(cur, user_id):
    cur.execute("DELETE FROM sessions WHERE user_id = %s", (user_id,))
    return cur.rowcount


def cmd_reset_password(conn, args):
    username = args.username
    password = passwords.generate_password()
    password_hash = passwords.hash_password(password)
    with conn, conn.cursor() as cur:
        user_id, _ = _user_id(cur, username)
        cur.execute("UPDATE users SET password_hash = %s, password_changed_at = now() WHERE id = %s",
                    (password_hash, user_id))
        ended = _end_sessions(cur, user_id)
        # A student locked out by failed logins can use the new password at once.
        cur.execute("DELETE FROM login_attempts WHERE username = %s", (username,))
        audit(cur, "reset_password", username, sessions_ended=ended)
    print(f"new password for {username!r}: {password}")
    print(f"{ended} session(s) ended")
    return 0


def cmd_set_active(conn, args):
    username = args.username
    word = "activated" if args.active else "deactivated"
    with conn, conn.cursor() as cur:
        user_id, active = _user_id(cur, username)
        # Deactivating always ends sessions, even if a previous run was interrupted.
        ended = 0 if args.active else _end_sessions(cur, user_id)
        if active != args.active:
            cur.execute("UPDATE users SET active = %s WHERE id = %s", (args.active, user_id))
            audit(cur, "activate" if args.active else "deactivate", username, sessions_ended=ended)
            print(f"{username!r} {word}" + ("" if args.active else f", {ended} session(s) ended"))
        else:
            print(f"{username!r} was already {word}")
    return 0


# --- list-users -----------------------------------------------------------

def cmd_list_users(conn, args):
    with conn, conn.cursor() as cur:
        cur.execute("""SELECT username, display_name, role, active, created_at FROM users
                       WHERE %(role)s IS NULL OR role = %(role)s ORDER BY username""",
                    {"role": args.role})
        rows = cur.fetchall()
    if args.json:
        keys = ("username", "display_name", "role", "active", "created_at")
        print(json.dumps([dict(zip(keys, r[:4] + (r[4].isoformat(),))) for r in rows], indent=2))
        return 0
    table = [("USERNAME", "DISPLAY NAME", "ROLE", "ACTIVE", "CREATED")]
    table += [(u, n, r, "yes" if a else "no", c.strftime("%Y-%m-%d %H:%M")) for u, n, r, a, c in rows]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[4])
    print(f"{len(rows)} user(s)")
    return 0


# --- command line ---------------------------------------------------------

def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m server.manage", description=__doc__.split("\n\n")[0],
        epilog="Uses DATABASE_URL, or the embedded PostgreSQL under DATA_DIR when it is unset.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("create-user", help="create one account")
    p.add_argument("username")
    p.add_argument("--role", required=True, choices=passwords.ROLES)
    p.add_argument("--name", help="display name (default: the username)")
    p.add_argument("--password", help="initial password (default: generate one and print it; "
                   "note that a password given here is visible to other local users)")
    p.set_defaults(func=cmd_create_user, prepare=prepare_create_user)

    p = sub.add_parser("import-users", help="create the accounts listed in a CSV file",
                       description="Columns: username, display name, role, optional password "
                       "(an optional header row names them). Accounts that already exist are "
                       "skipped; if any row is invalid nothing is created.")
    p.add_argument("file", metavar="FILE.csv")
    p.add_argument("--passwords-out", metavar="FILE.csv",
                   help="write generated passwords to this new file (mode 0600) instead of stdout")
    p.set_defaults(func=cmd_import_users, prepare=prepare_import)

    p = sub.add_parser("reset-password", help="set a new generated password and end the sessions")
    p.add_argument("username")
    p.set_defaults(func=cmd_reset_password)

    p = sub.add_parser("deactivate", help="stop an account from logging in and end its sessions")
    p.add_argument("username")
    p.set_defaults(func=cmd_set_active, active=False)

    p = sub.add_parser("activate", help="let a deactivated account log in again")
    p.add_argument("username")
    p.set_defaults(func=cmd_set_active, active=True)

    p = sub.add_parser("list-users", help="list the accounts")
    p.add_argument("--role", choices=passwords.ROLES, help="only accounts with this role")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_list_users)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        cfg = config.load()
        # Check what needs no database first: a typo should not start PostgreSQL.
        if getattr(args, "username", None) is not None:
            args.username = username_arg(args.username)
        if getattr(args, "prepare", None):
            args.prepare(args)
        with database(cfg) as conn:
            return args.func(conn, args)
    except (Refused, config.ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
    except psycopg2.Error as e:
        print(f"error: database: {_first_line(e)}", file=sys.stderr)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 1


if __name__ == "__main__":
    sys.exit(main())
