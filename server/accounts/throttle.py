"""Failed-login throttling, shared through PostgreSQL by every worker and
instance: guessing stays slow, and nothing one person does locks out a
class that signs in from one school address.

Who asks decides what counts (OWASP's device cookies, see devices.py):

- A browser with a valid device token for the username (it has signed in
  as that user before) is counted on its own, per token:
  LOGIN_FAILURES_PER_USER failures in a row are free, then each attempt
  waits twice as long as the last (2, 4, 8 ... seconds, at most
  LOGIN_THROTTLE_WINDOW). Nobody else's failures, on the account or from
  the address, slow it down.
- Every other attempt (a first sign-in, a new browser, a guesser) is
  counted per username, existing or not, with the same back-off: a guesser
  locks out only the account's untrusted browsers. And per client address,
  by the distinct *real* accounts it failed on within LOGIN_THROTTLE_WINDOW:
  one that reaches LOGIN_FAILURES_PER_ADDRESS of them (someone spraying a
  password over the class list; a class of 60 with typos cannot) may try no
  new name until the oldest is forgotten. Names that do not exist lock no
  one out, as none can ever be guessed right; past
  LOGIN_FAILURES_PER_ADDRESS of them in the window, the address's new
  made-up names are answered "wrong" without a password hash (`verify` is
  False), so spraying them costs the server no CPU.

A success clears what it was counted under; so does a quiet window. An
attempt is counted as a failure *before* its password is verified, in one
transaction that first reads the limits (`claim`), and cleared when the
password was right (`succeeded`): concurrent guesses cannot all pass a
test that none of them has been recorded against yet.
"""
import ipaddress
import math
from dataclasses import dataclass

BACKOFF_START = 2  # seconds the first attempt past the free ones waits; doubles each time
DEVICE_KEY = "device:"  # login_attempts key prefix of a device token's failures (no username has ':')


@dataclass
class Claim:
    """What `claim` decided about one attempt."""
    wait: int = 0  # > 0: refused for that many seconds, nothing verified or counted
    why: str = ""  # what is throttled when refused: "device", "account" or "network"
    verify: bool = True  # False: a made-up name past its address's budget, wrong without a hash


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


async def claim(pool, username, address, cfg, exists, device=None):
    """Count this attempt as a failure, or refuse it (a Claim with `wait`).
    `exists`: whether the account exists; `device`: the nonce of the
    browser's valid device token for this username, if it has one. Call
    `succeeded` if the password was right."""
    window = cfg.LOGIN_THROTTLE_WINDOW
    async with pool.transaction() as conn:
        if device:
            key = DEVICE_KEY + device
            row = await _attempts(conn, key, window)
            if row["wait"] > 0:
                return Claim(_seconds(row["wait"]), "device")
            await _count(conn, key, row, cfg)
            return Claim()
        address = address_key(address)
        # The address's names are counted, then added to: one claim at a time
        # per address. The upsert in _attempts locks the account's row.
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "login " + address)
        account = await _attempts(conn, username, window)
        if account["wait"] > 0:
            return Claim(_seconds(account["wait"]), "account")
        names = await conn.fetchrow(
            """SELECT count(*) FILTER (WHERE account_exists) AS real,
                      count(*) FILTER (WHERE NOT account_exists) AS made_up,
                      coalesce(bool_or(username = $2), false) AS known,
                      extract(epoch FROM min(at) FILTER (WHERE account_exists)
                                        + make_interval(secs => $3) - now()) AS wait
               FROM login_address_names WHERE address = $1 AND at > now() - make_interval(secs => $3)""",
            address, username, window)
        if not names["known"] and names["real"] >= cfg.LOGIN_FAILURES_PER_ADDRESS:
            return Claim(_seconds(names["wait"]), "network")
        await _count(conn, username, account, cfg)
        if not exists and not names["known"] and names["made_up"] >= cfg.LOGIN_FAILURES_PER_ADDRESS:
            return Claim(verify=False)
        await conn.execute(
            """INSERT INTO login_address_names (address, username, account_exists) VALUES ($1, $2, $3)
               ON CONFLICT (address, username) DO UPDATE SET at = now(), account_exists = EXCLUDED.account_exists""",
            address, username, exists)
    return Claim()


async def _attempts(conn, key, window):
    """The failures counted under `key`, its row locked (made if new)."""
    return await conn.fetchrow(
        """INSERT INTO login_attempts (username) VALUES ($1)
           ON CONFLICT (username) DO UPDATE SET username = EXCLUDED.username
           RETURNING failures, last_at > now() - make_interval(secs => $2) AS recent,
                     extract(epoch FROM greatest(blocked_until, now()) - now()) AS wait""",
        key, window)


async def _count(conn, key, row, cfg):
    failures = (row["failures"] if row["recent"] else 0) + 1
    await conn.execute(
        """UPDATE login_attempts SET failures = $2, last_at = now(),
                  blocked_until = now() + make_interval(secs => $3) WHERE username = $1""",
        key, failures, backoff(failures, cfg))


async def succeeded(conn, username, address, device=None):
    """The password was right: what this attempt was counted under is
    forgotten (the device's failures, or the account's and this address's
    failure on it). A success on a trusted device leaves the account's
    other failures: a guesser's count does not start again."""
    if device:
        await conn.execute("DELETE FROM login_attempts WHERE username = $1", DEVICE_KEY + device)
        return
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
