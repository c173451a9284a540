"""Administer PyClassroom accounts from a shell: `python -m server.manage`.

For the jobs a teacher or operator does outside the web UI: create one
account, import a class from a CSV file, reset a forgotten password, lock
or unlock an account, list accounts. It reads the same settings as the
server (DATABASE_URL, DATA_DIR), so with DATABASE_URL unset it works on the
embedded PostgreSQL, whether or not the server is running. Every command is
the accounts service's (accounts/service.py), as the admin pages use it:
only the arguments and the printing are here.

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

from . import config, db
from .accounts import class_list, rules
from .accounts.service import Accounts
from .csv_cells import safe_cell
from .embedded_postgres import EmbeddedPostgres, EmbeddedPostgresError
from .errors import Refused
from .executor import BoundedExecutor

ACTOR = "manage"


class Usage(Exception):
    """The command cannot be done as asked; the message is shown as is."""


# --- the service, on DATABASE_URL or the embedded PostgreSQL -----------------

@contextlib.contextmanager
def database_url(cfg):
    """DATABASE_URL, or the embedded PostgreSQL under DATA_DIR (stopped again
    on leaving unless a server still uses it)."""
    if cfg.DATABASE_URL:
        yield cfg.DATABASE_URL
        return
    pg = EmbeddedPostgres(cfg.DATA_DIR)
    try:
        dsn = pg.start()
    except (EmbeddedPostgresError, OSError) as e:
        with contextlib.suppress(Exception):
            pg.stop()  # releases our share of the cluster even after a partial start
        raise Usage(f"cannot start the embedded PostgreSQL in {cfg.DATA_DIR}: {_first_line(e)}") from None
    try:
        yield dsn
    finally:
        pg.stop()


@contextlib.asynccontextmanager
async def accounts_on(cfg, dsn):
    """The accounts service on `dsn`, with the schema brought up to date."""
    try:
        conn = await asyncpg.connect(dsn, timeout=15)
        try:
            async with db.locked(conn):
                await db.migrate(conn)
        finally:
            await conn.close()
        pool = await db.create_pool(dsn, 2, acquire_timeout=15, query_timeout=60, connect_timeout=15)
    except (OSError, asyncio.TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError, RuntimeError,
            ValueError) as e:
        raise Usage(f"cannot use the database: {_first_line(e)}") from None
    hasher = BoundedExecutor("hash", os.cpu_count() or 1, max_pending=100_000)  # a class at a time
    try:
        yield Accounts(pool, hasher, cfg)
    finally:
        hasher.shutdown()
        await pool.close()


def _first_line(error):
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


# --- the commands -----------------------------------------------------------------

def username_arg(text):
    username = rules.normalize_username(text)
    problem = rules.username_problem(username)
    if problem:
        raise Usage(f"{text!r} is not a valid username: {problem}")
    return username


def prepare_create_user(args):
    args.name = (args.name if args.name is not None else args.username).strip()
    problems = rules.new_account_problems(args.username, args.name, args.role, args.password)
    if problems:
        raise Usage(problems[0])


async def cmd_create_user(accounts, args):
    _, password = await accounts.create_user(ACTOR, args.username, args.name, args.role, args.password)
    print(f"created {args.role} {args.username!r} ({args.name})")
    if args.password is None:
        print(f"password: {password}")
    return 0


def prepare_import(args):
    """Everything that needs no database: read and validate the file."""
    try:
        with open(args.file, newline="", encoding="utf-8-sig") as f:  # -sig: spreadsheets add a BOM
            rows = class_list.parse_rows(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise Usage(f"cannot read {args.file}: {_first_line(e)}") from None
    if not rows:
        raise Usage(f"{args.file} has no user rows")
    invalid = [r for r in rows if r.problem]
    if invalid:
        for r in invalid:
            print(f"line {r.line}: {r.username or '(no username)'}: {r.problem}", file=sys.stderr)
        raise Usage(f"{len(invalid)} of {len(rows)} rows of {args.file} are invalid; nothing was created")
    args.rows = rows
    args.out = _open_passwords_out(args.passwords_out) if args.passwords_out else None


def _open_passwords_out(path):
    """Create the file before any account exists, so that generated passwords
    always have somewhere to go; never overwrite an earlier list."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise Usage(f"{path} already exists; choose a new file for the passwords") from None
    except OSError as e:
        raise Usage(f"cannot create {path}: {e.strerror}") from None
    os.fchmod(fd, 0o600)  # whatever the umask
    return os.fdopen(fd, "w", newline="", encoding="utf-8")


async def cmd_import_users(accounts, args):
    out = args.out
    try:
        report = await accounts.import_rows(ACTOR, args.rows, source=os.path.basename(args.file))
    except BaseException:
        if out:  # nothing was created: leave no empty password list behind
            out.close()
            os.unlink(args.passwords_out)
        raise
    for r in report:
        note = f" ({r.role}{', class ' + r.class_name if r.class_name else ''})" if r.created else ""
        if r.password and not out:
            note += f"  password: {r.password}"
        if r.email and r.created:
            note += f"  signs in with the school account {r.email}"
        print(f"line {r.line}: {r.username:<20} {'created' if r.created else 'skipped: already exists'}{note}")
    generated = [r for r in report if r.password]
    if out:
        with out:
            writer = csv.writer(out)
            writer.writerow(["username", "display_name", "class", "password"])  # as the admin page's download
            writer.writerows([safe_cell(c) for c in (r.username, r.name, r.class_name or "", r.password)]
                             for r in generated)
        print(f"{len(generated)} generated password(s) written to {args.passwords_out}")
    created = sum(r.created for r in report)
    print(f"created {created}, skipped {len(report) - created}, invalid 0")
    return 0


async def cmd_reset_password(accounts, args):
    password, ended = await accounts.reset_password(ACTOR, args.username)
    print(f"new password for {args.username!r}: {password}")
    print(f"{ended} session(s) ended")
    return 0


async def cmd_set_active(accounts, args):
    word = "activated" if args.active else "deactivated"
    changed, ended = await accounts.set_active(ACTOR, args.username, args.active)
    if changed:
        print(f"{args.username!r} {word}" + ("" if args.active else f", {ended} session(s) ended"))
    else:
        print(f"{args.username!r} was already {word}")
    return 0


async def cmd_list_users(accounts, args):
    users = await accounts.list_users(role=args.role, limit=None)
    if args.json:
        keys = ("username", "display_name", "role", "active", "created_at")
        print(json.dumps([{k: u[k] for k in keys} for u in users], indent=2))
        return 0
    table = [("USERNAME", "DISPLAY NAME", "ROLE", "ACTIVE", "CREATED")]
    table += [(u["username"], u["display_name"], u["role"], "yes" if u["active"] else "no",
               u["created_at"][:16].replace("T", " ")) for u in users]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[4])
    print(f"{len(users)} user(s)")
    return 0


# --- command line ---------------------------------------------------------

def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m server.manage", description=__doc__.split("\n\n")[0],
        epilog="Uses DATABASE_URL, or the embedded PostgreSQL under DATA_DIR when it is unset.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("create-user", help="create one account")
    p.add_argument("username")
    p.add_argument("--role", required=True, choices=rules.ROLES)
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
    p.add_argument("--role", choices=rules.ROLES, help="only accounts with this role")
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
        with database_url(cfg) as dsn:
            return asyncio.run(_run(cfg, dsn, args))
    except (Usage, config.ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
    except Refused as e:
        print(f"error: {e.message}", file=sys.stderr)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 1


async def _run(cfg, dsn, args):
    async with accounts_on(cfg, dsn) as accounts:
        return await args.func(accounts, args)


if __name__ == "__main__":
    sys.exit(main())
