"""Failed-login throttling, shared through PostgreSQL by every worker and
instance.

Each failure is a row. A username (or client address) with `limit` failures
within the last `window` seconds is refused until the oldest of them ages
out: a sliding window that needs no reset job and cannot be dodged by
landing on another worker. Addresses get a much higher limit than
usernames because a whole class often shares one school address.
"""
import math


async def retry_after(conn, username, address, cfg):
    """Seconds until a login for `username` from `address` may be tried, or 0."""
    rows = await conn.fetch(
        """SELECT scope, count(*) AS failures,
                  extract(epoch FROM min(at) + make_interval(secs => $3) - now()) AS wait
           FROM login_failures
           WHERE at > now() - make_interval(secs => $3)
             AND ((scope = 'user' AND key = $1) OR (scope = 'address' AND key = $2))
           GROUP BY scope""",
        username, address, cfg.LOGIN_THROTTLE_WINDOW)
    limits = {"user": cfg.LOGIN_FAILURES_PER_USER, "address": cfg.LOGIN_FAILURES_PER_ADDRESS}
    wait = 0
    for row in rows:
        if row["failures"] >= limits[row["scope"]]:
            wait = max(wait, max(1, math.ceil(float(row["wait"]))))
    return wait


async def record_failure(conn, username, address, cfg):
    await conn.execute(
        """WITH pruned AS (
               DELETE FROM login_failures
               WHERE ((scope = 'user' AND key = $1) OR (scope = 'address' AND key = $2))
                 AND at <= now() - make_interval(secs => $3))
           INSERT INTO login_failures (scope, key) VALUES ('user', $1), ('address', $2)""",
        username, address, cfg.LOGIN_THROTTLE_WINDOW)


async def clear_user(conn, username):
    await conn.execute("DELETE FROM login_failures WHERE scope = 'user' AND key = $1", username)


async def prune(pool):
    """Drop failures older than any window could count (keys never seen again)."""
    await pool.execute("DELETE FROM login_failures WHERE at < now() - interval '1 day'")
