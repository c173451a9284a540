"""Account administration for the admin pages (asyncpg): list, create,
import a class, reset a password, deactivate. The checks are the same as
the admin CLI's (auth/roster.py); refusals are `Refused`."""
from ..auth import passwords, roster, sessions, throttle
from ..auth.accounts import audit
from ..errors import Refused

LIST_LIMIT = 500


def _public(row):
    return {"username": row["username"], "display_name": row["display_name"], "role": row["role"],
            "active": row["active"], "created_at": row["created_at"].isoformat(),
            "last_save_at": row["last_save_at"].isoformat() if row["last_save_at"] else None}


async def list_users(pool, query="", role=None):
    rows = await pool.fetch(
        """SELECT username, display_name, role, active, created_at, last_save_at FROM users
           WHERE ($1 = '' OR username ILIKE '%' || $1 || '%' OR display_name ILIKE '%' || $1 || '%')
             AND ($2::text IS NULL OR role = $2)
           ORDER BY username LIMIT $3""",
        query, role, LIST_LIMIT)
    return [_public(r) for r in rows]


def check_new(username, display_name, role, password):
    """The normalized username, or Refused naming the first problem."""
    username = passwords.normalize_username(username)
    problem = (passwords.username_problem(username) or roster.display_name_problem(display_name.strip())
               or roster.role_problem(role) or (password and passwords.password_problem(password)))
    if problem:
        raise Refused(400, "invalid_account", problem[0].upper() + problem[1:] + ".")
    return username


async def create_user(ctx, actor, username, display_name, role, password=None):
    """Create one account; returns (user, the password to show once)."""
    username = check_new(username, display_name, role, password)
    password = password or passwords.generate_password()
    password_hash = await ctx.hasher.run(passwords.hash_password, password)
    async with ctx.pool.transaction() as conn:
        row = await conn.fetchrow(
            """INSERT INTO users (username, display_name, role, password_hash) VALUES ($1, $2, $3, $4)
               ON CONFLICT (username) DO NOTHING
               RETURNING username, display_name, role, active, created_at, last_save_at""",
            username, display_name.strip(), role, password_hash)
        if row is None:
            raise Refused(409, "exists", f"There is already an account named {username}.")
        await audit(conn, actor, "create_user", username, role=role)
    return _public(row), password


async def import_users(ctx, actor, csv_text):
    """Create the accounts of a class list. Every row is checked first: if
    one is invalid nothing is created and the answer lists the bad rows.
    Existing usernames are skipped. Returns the per-row report."""
    rows = roster.parse_csv(csv_text)
    if not rows:
        raise Refused(400, "empty_import", "The file has no account rows.")
    invalid = [{"line": r.line, "username": r.username, "problem": r.problem} for r in rows if r.problem]
    if invalid:
        raise Refused(400, "invalid_rows", f"{len(invalid)} of {len(rows)} rows are invalid; "
                      "nothing was created.", rows=invalid)
    existing = {r["username"] for r in await ctx.pool.fetch(
        "SELECT username FROM users WHERE username = ANY($1::text[])", [r.username for r in rows])}
    new = [r for r in rows if r.username not in existing]
    plain = {r.username: r.password or passwords.generate_password() for r in new}
    hashes = {}
    for r in new:  # one at a time through the bounded hasher: logins keep their turn
        hashes[r.username] = await ctx.hasher.run(passwords.hash_password, plain[r.username])
    async with ctx.pool.transaction() as conn:
        created = {rec["username"] for rec in await conn.fetch(
            """INSERT INTO users (username, display_name, role, password_hash)
               SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
               ON CONFLICT (username) DO NOTHING RETURNING username""",
            [r.username for r in new], [r.name for r in new], [r.role for r in new],
            [hashes[r.username] for r in new])}
        for r in new:
            if r.username in created:
                await audit(conn, actor, "create_user", r.username, role=r.role, source="import")
    report = []
    for r in rows:
        entry = {"line": r.line, "username": r.username}
        if r.username in created:
            entry["outcome"] = "created"
            if r.password is None:
                entry["password"] = plain[r.username]  # shown once, never stored
        else:
            entry["outcome"] = "skipped: already exists"
        report.append(entry)
    return {"created": len(created), "skipped": len(rows) - len(created), "rows": report}


async def reset_password(ctx, actor, username):
    """A new generated password (shown once); the user's sessions end and a
    lock-out from failed logins is lifted."""
    password = passwords.generate_password()
    password_hash = await ctx.hasher.run(passwords.hash_password, password)
    async with ctx.pool.transaction() as conn:
        user_id = await conn.fetchval(
            "UPDATE users SET password_hash = $2, password_changed_at = now() WHERE username = $1 RETURNING id",
            username, password_hash)
        if user_id is None:
            raise Refused(404, "no_such_user", f"There is no account named {username}.")
        await sessions.delete_for_user(conn, user_id)
        await throttle.lift(conn, username)
        await audit(conn, actor, "reset_password", username)
    return password


async def set_active(ctx, actor, username, active):
    async with ctx.pool.transaction() as conn:
        user_id = await conn.fetchval("UPDATE users SET active = $2 WHERE username = $1 RETURNING id",
                                      username, active)
        if user_id is None:
            raise Refused(404, "no_such_user", f"There is no account named {username}.")
        if not active:
            await sessions.delete_for_user(conn, user_id)
        await audit(conn, actor, "activate" if active else "deactivate", username)

