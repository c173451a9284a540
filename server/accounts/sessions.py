"""Sessions stored in PostgreSQL, so any worker or instance honours them.

The browser holds a random 256-bit token; the table holds only its SHA-256.
A session expires after SESSION_TTL seconds without use; a request made in
the second half of that time renews it, so an active student is never
logged out mid-class, while a renewal costs one write per half-TTL, not one
per request. Each worker remembers the sessions it has seen for a few
seconds (`Sessions`) and forgets them the moment one is revoked anywhere.
"""
import hashlib
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterable

from .. import notify
from ..batch import Batch
from ..db import Pool

REVOKED = "session_revoked"  # notification channel; payload "t:<token hash, hex>" or "u:<user id>"


def new_token():
    return secrets.token_urlsafe(32)


def token_hash(token: str) -> bytes:
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
    says why (`session_expired`, `session_invalid`); `renewed_until` is the
    new expiry when the session just slid forward."""

    def __init__(self, user=None, problem=None, renewed_until=None, seconds_left=None):
        self.user, self.problem, self.renewed_until = user, problem, renewed_until
        self.seconds_left = seconds_left  # until the session expires, by the database's clock


async def lookup(pool, hashed):
    """The session of this token hash as the database has it (an expired
    one is deleted)."""
    row = await pool.fetchrow(
        """SELECT u.id, u.username, u.display_name, u.role, u.active,
                  extract(epoch FROM s.expires_at - now())::float8 AS seconds_left
           FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.token_hash = $1""",
        hashed)
    if row is None or not row["active"]:
        return Lookup(problem="session_invalid")
    if row["seconds_left"] <= 0:
        await pool.execute("DELETE FROM sessions WHERE token_hash = $1", hashed)
        return Lookup(problem="session_expired")
    return Lookup(user={k: row[k] for k in ("id", "username", "display_name", "role")},
                  seconds_left=row["seconds_left"])


@dataclass
class _Known:
    """A session this worker has seen in the database."""
    user: dict
    expires: float      # time.monotonic() when it expires (unless renewed)
    fresh_until: float  # time.monotonic() after which the database is asked again


class Sessions:
    """Who sends a session token, for every request of one worker.

    A session read from the database is remembered for `cache_seconds`
    (SESSION_CACHE_SECONDS), so that a class saving and loading files costs
    PostgreSQL nothing. That is safe because every revocation (logout,
    deactivation, a password change or reset: `delete`, `delete_for_user`)
    notifies REVOKED in its own transaction, and every worker's listener
    drops what it names as soon as it commits; while the listener is down
    or has just come back (a gap, when notifications may have been lost),
    everything is forgotten and nothing is remembered. Expiry is known
    without asking: each entry carries it.

    Renewals (the sliding expiry) are not written by the request that
    causes them: the new expiry goes to the browser at once and to the
    database with the worker's next flush of `renewals` (a Batch), one
    statement per second for all of them.
    """

    MAX_KNOWN = 200_000  # beyond this many live entries, sessions are simply looked up each time

    def __init__(self, pool, ttl: int, cache_seconds: float, listener=None):
        self.pool = pool
        self.ttl = ttl
        self.cache_seconds = cache_seconds
        self.listener = listener  # a notify.Listener; None: nothing is remembered
        self._known: dict[bytes, _Known] = {}  # token hash -> _Known
        self._epoch = 0  # counts revocations and gaps: a lookup that straddles one is not remembered
        self.renewals = Batch("session renewals", self._write_renewals)
        if listener is not None:
            listener.listen(REVOKED, self.revoked)
            listener.on_gap(self.forget_all)

    async def user_for_token(self, token: str) -> Lookup:
        hashed = token_hash(token)
        now = time.monotonic()
        known = self._known.get(hashed)
        if known is not None and (now >= known.fresh_until or now >= known.expires):
            del self._known[hashed]
            known = None
        if known is None:
            epoch = self._epoch
            found = await lookup(self.pool, hashed)
            if found.user is None:
                return found
            known = _Known(found.user, now + found.seconds_left, now + self.cache_seconds)
            if self._may_remember(epoch):
                self._known[hashed] = known
        renewed = None
        if known.expires - now < self.ttl / 2:
            known.expires = now + self.ttl
            self.renewals.add(hashed)
            renewed = datetime.now(timezone.utc) + timedelta(seconds=self.ttl)
        return Lookup(user=known.user, renewed_until=renewed)

    def _may_remember(self, epoch):
        return (self.cache_seconds > 0 and self.listener is not None and self.listener.live
                and epoch == self._epoch and len(self._known) < self.MAX_KNOWN)

    async def _write_renewals(self, hashes):
        # greatest(): another worker may have renewed it later than this one.
        await self.pool.execute(
            """UPDATE sessions SET expires_at = greatest(expires_at, now() + make_interval(secs => $2))
               WHERE token_hash = ANY($1::bytea[])""", list(hashes), self.ttl)

    def revoked(self, payload: str) -> None:
        """A REVOKED notification: forget what it names (all, if unreadable)."""
        self._epoch += 1
        kind, _, key = payload.partition(":")
        try:
            if kind == "t":
                self._known.pop(bytes.fromhex(key), None)
                return
            if kind == "u":
                user_id = int(key)
                for hashed in [h for h, k in self._known.items() if k.user["id"] == user_id]:
                    del self._known[hashed]
                return
        except ValueError:
            pass
        self.forget_all()

    def forget_all(self) -> None:
        self._epoch += 1
        self._known.clear()

    def sweep(self) -> None:
        """Drop entries that would be asked again anyway (keeps memory to the active sessions)."""
        now = time.monotonic()
        for hashed in [h for h, k in self._known.items() if now >= k.fresh_until]:
            del self._known[hashed]


async def delete(conn, token):
    """End one session (`conn` in a transaction: every worker forgets it when it commits)."""
    hashed = token_hash(token)
    await conn.execute("DELETE FROM sessions WHERE token_hash = $1", hashed)
    await notify.send(conn, REVOKED, "t:" + hashed.hex())


async def delete_for_user(conn, user_id, keep_token=None):
    """End the user's sessions (but `keep_token`'s); how many ended. `conn`
    in a transaction: every worker forgets them when it commits."""
    keep = token_hash(keep_token) if keep_token else b""
    status = await conn.execute("DELETE FROM sessions WHERE user_id = $1 AND token_hash <> $2", user_id, keep)
    await user_changed(conn, user_id)
    return int(status.split()[-1])


async def user_changed(conn, user_id):
    """Make every worker read the user's sessions (and the user: role, name,
    active) from the database again, when `conn`'s transaction commits.
    Whatever changes a user in a way a request must see at once calls it."""
    await notify.send(conn, REVOKED, f"u:{user_id}")


async def prune(pool):
    """Drop expired sessions (they are refused anyway; this keeps the table small)."""
    await pool.execute("DELETE FROM sessions WHERE expires_at < now() - interval '1 day'")


async def still_valid(pool: Pool, hashes: Iterable[bytes]) -> set[bytes]:
    """Which of these token hashes still name a live session of an active
    user (for sockets opened earlier: a logout, a deactivation or a password
    reset ends them)."""
    rows = await pool.fetch("SELECT token_hash FROM live_sessions WHERE token_hash = ANY($1::bytea[])",
                            list(hashes))
    return {r["token_hash"] for r in rows}
