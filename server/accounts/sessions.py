"""Sessions stored in PostgreSQL, so any worker or instance honours them.

The browser holds a random 256-bit token; the table holds only its SHA-256.
A session expires after SESSION_TTL seconds without use; a request made in
the second half of that time renews it, so an active student is never
logged out mid-class, while a renewal costs one write per half-TTL, not one
per request.
"""
import hashlib
import secrets
from datetime import timedelta


def new_token():
    return secrets.token_urlsafe(32)


def token_hash(token):
    return hashlib.sha256(token.encode()).digest()


async def create(conn, user_id, ttl, client_address):
    token = new_token()
    expires = await conn.fetchval(
        """INSERT INTO sessions (token_hash, user_id, expires_at, client_address)
           VALUES ($1, $2, now() + make_interval(secs => $3), $4) RETURNING expires_at""",
        token_hash(token), user_id, ttl, client_address)
    return token, expires


class Lookup:
    """The answer to "who sends this token?": `user` is None when `problem`
    says why (`session_expired`, `session_invalid`)."""

    def __init__(self, user=None, problem=None, renewed_until=None):
        self.user, self.problem, self.renewed_until = user, problem, renewed_until


async def lookup(pool, token, ttl):
    row = await pool.fetchrow(
        """SELECT u.id, u.username, u.display_name, u.role, u.active, s.expires_at,
                  s.expires_at <= now() AS expired, now() AS now
           FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.token_hash = $1""",
        token_hash(token))
    if row is None or not row["active"]:
        return Lookup(problem="session_invalid")
    if row["expired"]:
        await pool.execute("DELETE FROM sessions WHERE token_hash = $1", token_hash(token))
        return Lookup(problem="session_expired")
    user = {k: row[k] for k in ("id", "username", "display_name", "role")}
    renewed = None
    if row["expires_at"] - row["now"] < timedelta(seconds=ttl / 2):
        renewed = await pool.fetchval(
            """UPDATE sessions SET expires_at = now() + make_interval(secs => $2)
               WHERE token_hash = $1 RETURNING expires_at""", token_hash(token), ttl)
    return Lookup(user=user, renewed_until=renewed)


async def delete(conn, token):
    await conn.execute("DELETE FROM sessions WHERE token_hash = $1", token_hash(token))


async def delete_for_user(conn, user_id, keep_token=None):
    """End the user's sessions (but `keep_token`'s); how many ended."""
    keep = token_hash(keep_token) if keep_token else b""
    status = await conn.execute("DELETE FROM sessions WHERE user_id = $1 AND token_hash <> $2", user_id, keep)
    return int(status.split()[-1])


async def prune(pool):
    """Drop expired sessions (they are refused anyway; this keeps the table small)."""
    await pool.execute("DELETE FROM sessions WHERE expires_at < now() - interval '1 day'")


async def still_valid(pool, hashes):
    """Which of these token hashes still name a live session of an active
    user (for sockets opened earlier: a logout, a deactivation or a password
    reset ends them)."""
    rows = await pool.fetch("SELECT token_hash FROM live_sessions WHERE token_hash = ANY($1::bytea[])",
                            list(hashes))
    return {r["token_hash"] for r in rows}
