"""Failed-login throttling, shared through PostgreSQL by every worker and
instance, and fit for a class that logs in from one school address.

Per account (any username tried, existing or not): LOGIN_FAILURES_PER_USER
failures in a row are free; after that each attempt must wait twice as long
as the last (2, 4, 8 … seconds, at most LOGIN_THROTTLE_WINDOW). A success
clears the count; so does a quiet window.

Per client address, what counts is how many distinct usernames it failed to
log in as within LOGIN_THROTTLE_WINDOW, not how many failures: a student
mistyping her own password twenty times, or trying three classmates'
accounts, is a handful of names, far from LOGIN_FAILURES_PER_ADDRESS, so the
rest of the class still logs in; someone trying many accounts or made-up
names reaches it, and from then on that address may only retry the names it
already failed on (each still under its own account limit).

An attempt is counted as a failure *before* its password is checked, in
one transaction that first checks both limits (`claim`), and cleared when
the password was right (`succeeded`): concurrent guesses cannot all pass a
check that none of them has been recorded against yet.
"""
import ipaddress
import math

BACKOFF_START = 2  # seconds the first attempt past the free ones waits; doubles each time


def address_key(address):
    """The key an address is counted under. An IPv6 client owns a whole /64:
    count the network, so that hopping between its addresses does not help."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 6 and ip.ipv4_mapped:
        return str(ip.ipv4_mapped)
    if ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def backoff(failures, cfg):
    """Seconds the next attempt must wait after `failures` failures in a row."""
    over = failures - cfg.LOGIN_FAILURES_PER_USER
    if over < 0:
        return 0
    return min(cfg.LOGIN_THROTTLE_WINDOW, BACKOFF_START << min(over, 30))


async def claim(pool, username, address, cfg):
    """Count this attempt as a failure, or refuse it. Returns the seconds to
    wait (refused: nothing recorded) or 0 (go ahead and check the password;
    call `succeeded` if it was right)."""
    address = address_key(address)
    window = cfg.LOGIN_THROTTLE_WINDOW
    async with pool.transaction() as conn:
        # The address's names are counted, then added to: one claim at a time
        # per address. The upsert below locks the account's row.
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "login " + address)
        account = await conn.fetchrow(
            """INSERT INTO login_attempts (username) VALUES ($1)
               ON CONFLICT (username) DO UPDATE SET username = EXCLUDED.username
               RETURNING failures, last_at > now() - make_interval(secs => $2) AS recent,
                         extract(epoch FROM greatest(blocked_until, now()) - now()) AS wait""",
            username, window)
        if account["wait"] > 0:
            return _seconds(account["wait"])
        names = await conn.fetchrow(
            """SELECT count(*) AS names, coalesce(bool_or(username = $2), false) AS known,
                      extract(epoch FROM min(at) + make_interval(secs => $3) - now()) AS wait
               FROM login_address_names WHERE address = $1 AND at > now() - make_interval(secs => $3)""",
            address, username, window)
        if not names["known"] and names["names"] >= cfg.LOGIN_FAILURES_PER_ADDRESS:
            return _seconds(names["wait"])
        failures = (account["failures"] if account["recent"] else 0) + 1
        await conn.execute(
            """UPDATE login_attempts SET failures = $2, last_at = now(),
                      blocked_until = now() + make_interval(secs => $3) WHERE username = $1""",
            username, failures, backoff(failures, cfg))
        await conn.execute(
            """INSERT INTO login_address_names (address, username) VALUES ($1, $2)
               ON CONFLICT (address, username) DO UPDATE SET at = now()""",
            address, username)
    return 0


async def succeeded(conn, username, address):
    """The password was right: the account's failures and this address's
    failure on it are forgotten."""
    await conn.execute("DELETE FROM login_attempts WHERE username = $1", username)
    await conn.execute("DELETE FROM login_address_names WHERE address = $1 AND username = $2",
                       address_key(address), username)


async def lift(conn, username):
    """An administrator reset the password: the account may be tried at once."""
    await conn.execute("DELETE FROM login_attempts WHERE username = $1", username)


async def prune(pool):
    """Forget what no window can count any more (names never tried again)."""
    await pool.execute("DELETE FROM login_attempts WHERE last_at < now() - interval '1 day' "
                       "AND blocked_until < now()")
    await pool.execute("DELETE FROM login_address_names WHERE at < now() - interval '1 day'")


def _seconds(wait):
    return max(1, math.ceil(float(wait)))
