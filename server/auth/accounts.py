"""Logging in, changing one's password, and the accounts a new server starts
with. Knows nothing of HTTP: refusals are `Refused` exceptions that the
handlers turn into JSON errors.
"""
import json
import logging

from ..errors import Refused
from . import passwords, sessions, throttle

log = logging.getLogger(__name__)

DEMO_ACCOUNTS = [
    ("teacher", "Demo Teacher", "teacher"),
    ("student1", "Ada Lovelace", "student"),
    ("student2", "Alan Turing", "student"),
    ("student3", "Grace Hopper", "student"),
]


WRONG_CREDENTIALS = (401, "invalid_credentials", "Wrong username or password.")


async def audit(conn, actor, action, subject="", **detail):
    await conn.execute("INSERT INTO audit_log (actor, action, subject, detail) VALUES ($1, $2, $3, $4)",
                       actor, action, subject, json.dumps(detail))


async def login(ctx, username, password, address):
    """Check the credentials and open a session; return (user, token, expires)."""
    cfg, pool = ctx.cfg, ctx.pool
    username = passwords.normalize_username(username)
    if passwords.username_problem(username):
        raise Refused(*WRONG_CREDENTIALS)  # no such account can exist: nothing to check or count
    wait = await throttle.claim(pool, username, address, cfg)
    if wait:
        raise Refused(429, "too_many_attempts",
                      f"Too many failed logins. Try again in {wait} seconds.", retry_after=wait)
    row = await pool.fetchrow(
        "SELECT id, username, display_name, role, active, password_hash FROM users WHERE username = $1",
        username)
    if row is None:
        await ctx.hasher.run(passwords.verify_unknown_user, password)
        ok = False
    else:
        ok = await ctx.hasher.run(passwords.verify_password, row["password_hash"], password)
    if not ok:  # already counted by the claim
        raise Refused(*WRONG_CREDENTIALS)
    if not row["active"]:
        # Said only to someone who knows the password.
        raise Refused(403, "account_deactivated", "This account is deactivated. Ask your teacher.")
    async with pool.transaction() as conn:
        await throttle.succeeded(conn, username, address)
        token, expires = await sessions.create(conn, row["id"], cfg.SESSION_TTL, address)
        await audit(conn, username, "login", address=address)
    if passwords.needs_rehash(row["password_hash"]):
        new_hash = await ctx.hasher.run(passwords.hash_password, password)
        await pool.execute("UPDATE users SET password_hash = $2 WHERE id = $1", row["id"], new_hash)
    user = {k: row[k] for k in ("id", "username", "display_name", "role")}
    return user, token, expires


async def change_password(ctx, user, old, new, keep_token):
    """Set a new password; every other session of the user ends."""
    problem = passwords.password_problem(new)
    if problem:
        raise Refused(400, "weak_password", problem[0].upper() + problem[1:] + ".")
    current = await ctx.pool.fetchval("SELECT password_hash FROM users WHERE id = $1", user["id"])
    if not await ctx.hasher.run(passwords.verify_password, current, old):
        raise Refused(403, "wrong_password", "The current password is not right.")
    new_hash = await ctx.hasher.run(passwords.hash_password, new)
    async with ctx.pool.transaction() as conn:
        await conn.execute("UPDATE users SET password_hash = $2, password_changed_at = now() WHERE id = $1",
                           user["id"], new_hash)
        await sessions.delete_for_user(conn, user["id"], keep_token=keep_token)
        await audit(conn, user["username"], "change_password")


async def bootstrap(ctx, conn, admin_password, demo):
    """On an empty database, create `admin` (and the demo accounts); return
    [(username, role, password)] so the caller can print them once.

    The caller holds the migration lock, so two workers never both do it."""
    if await conn.fetchval("SELECT count(*) FROM users"):
        return []
    wanted = [("admin", "Administrator", "admin", admin_password or passwords.generate_password())]
    if demo:
        wanted += [(u, d, r, passwords.generate_password()) for u, d, r in DEMO_ACCOUNTS]
    created = []
    for username, display, role, password in wanted:
        password_hash = await ctx.hasher.run(passwords.hash_password, password)
        await conn.execute(
            "INSERT INTO users (username, display_name, role, password_hash) VALUES ($1, $2, $3, $4)",
            username, display, role, password_hash)
        await audit(conn, "server", "create_user", username, role=role)
        created.append((username, role, password))
    return created
