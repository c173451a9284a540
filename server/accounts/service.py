"""Accounts: logging in and out, passwords, and the administration of
accounts (list, create, import a class, reset, activate), for the web pages
and `python -m server.manage` alike. Knows nothing of HTTP: refusals are
`Refused`, which the handlers answer as JSON and the CLI as one line.

Password hashes are made and verified in the bounded `hasher` executor,
never on the IOLoop; every change is written to the audit log in the same
transaction as the change itself.
"""
import asyncio
import time
from dataclasses import dataclass
from datetime import datetime

from .. import db
from ..config import Config
from ..errors import Refused
from ..executor import BoundedExecutor
from . import class_list, memberships, passwords, rules, sessions, throttle
from .audit import audit
from .devices import Devices

DEMO_ACCOUNTS = [
    ("teacher", "Demo Teacher", "teacher"),
    ("student1", "Ada Lovelace", "student"),
    ("student2", "Alan Turing", "student"),
    ("student3", "Grace Hopper", "student"),
]
WRONG_CREDENTIALS = (401, "invalid_credentials", "Wrong username or password.")
LIST_LIMIT = 500
KNOWN_COMPUTER = "You can still sign in on a computer you have signed in on before."


def throttled_message(claim):
    """What a refused sign-in is told: what happened, and what to do now."""
    wait = _duration(claim.wait)
    if claim.why == "device":
        return f"Too many failed sign-ins on this browser. Try again in {wait}."
    if claim.why == "network":
        return (f"Too many failed sign-ins from your network. Try again in {wait}. "
                f"{KNOWN_COMPUTER}")
    return (f"Too many failed sign-ins for this account. Try again in {wait}. {KNOWN_COMPUTER} "
            "If you forgot your password, ask your teacher to reset it.")


def _duration(seconds):
    if seconds < 120:
        return "1 second" if seconds == 1 else f"{seconds} seconds"
    return f"{-(-seconds // 60)} minutes"


@dataclass
class Imported:
    """One row of a class list, and what became of it."""
    line: int
    username: str
    name: str
    role: str
    created: bool
    password: str | None = None  # generated (shown once, never stored); None if given in the file or skipped
    class_name: str | None = None  # the class the row named
    email: str | None = None  # the school address it signs in with (then no password)


def _public(row):
    return {"username": row["username"], "display_name": row["display_name"], "role": row["role"],
            "active": row["active"], "created_at": row["created_at"].isoformat(),
            "last_save_at": row["last_save_at"].isoformat() if row["last_save_at"] else None}


class Accounts:
    def __init__(self, pool: "db.Pool", hasher: BoundedExecutor, cfg: Config, cookie_secret: str | None = None):
        self.pool = pool  # db.Pool
        self.hasher = hasher  # a BoundedExecutor for argon2
        self.cfg = cfg
        # Device cookies for the web's sign-ins; the CLI signs no one in.
        self.devices = Devices(cookie_secret) if cookie_secret else None
        self._verify_seconds = 0.05  # a password verification's usual time, until one is measured

    async def _hash(self, password):
        return await self.hasher.call(passwords.hash_password, password)

    # -- signing in -------------------------------------------------------

    async def login(self, username: str, password: str, address: str,
                    device_cookie: str | None = None) -> tuple[dict, str, datetime, str | None]:
        """Check the credentials and open a session: (user, token, expires,
        the browser's new device cookie). `device_cookie`: the one it sent."""
        cfg, pool = self.cfg, self.pool
        if not cfg.PASSWORD_SIGN_IN:
            raise Refused(403, "password_sign_in_off", "Signing in with a password is turned off on this "
                          "server. Sign in with your school account's button instead.")
        username = rules.normalize_username(username)
        if rules.username_problem(username):
            raise Refused(*WRONG_CREDENTIALS)  # no such account can exist: nothing to verify or count
        device = self.devices.trusted(device_cookie, username) if self.devices else None
        row = await pool.fetchrow(
            "SELECT id, username, display_name, role, active, password_hash FROM users WHERE username = $1",
            username)
        claim = await throttle.claim(pool, username, address, cfg, exists=row is not None, device=device)
        if claim.wait:
            raise Refused(429, "too_many_attempts", throttled_message(claim), retry_after=claim.wait,
                          throttled=claim.why)
        if row is None:
            if claim.verify:
                await self._timed_verify(passwords.verify_unknown_user, password)
            else:  # as long as a verification takes, so the answer looks like any other
                await asyncio.sleep(self._verify_seconds)
            ok = False
        else:
            ok = await self._timed_verify(passwords.verify_password, row["password_hash"], password)
        if not ok or row is None:  # already counted by the claim (no row: never ok)
            raise Refused(*WRONG_CREDENTIALS)
        if not row["active"]:
            # Said only to someone who knows the password.
            raise Refused(403, "account_deactivated", "This account is deactivated. Ask your teacher.")
        async with pool.transaction() as conn:
            await throttle.succeeded(conn, username, address, device)
            token, expires = await self._open_session(conn, row, address)
        if passwords.needs_rehash(row["password_hash"]):
            await pool.execute("UPDATE users SET password_hash = $2 WHERE id = $1", row["id"],
                               await self._hash(password))
        user = {k: row[k] for k in ("id", "username", "display_name", "role")}
        return user, token, expires, self._device_cookie(device_cookie, username)

    async def sign_in_as(self, user: dict, address: str, device_cookie: str | None,
                         **detail) -> tuple[str, datetime, str | None]:
        """A session for someone another service vouched for (a school
        account, signin/): (token, expires, the browser's new device
        cookie), as a password sign-in gives."""
        async with self.pool.transaction() as conn:
            token, expires = await self._open_session(conn, user, address, **detail)
        return token, expires, self._device_cookie(device_cookie, user["username"])

    async def _open_session(self, conn, user, address, **detail):
        token, expires = await sessions.create(conn, user["id"], self.cfg.SESSION_TTL, address)
        await audit(conn, user["username"], "login", address=address, **detail)
        return token, expires

    def _device_cookie(self, cookie, username):
        return self.devices.issue(cookie, username) if self.devices else None

    async def _timed_verify(self, verify, *args):
        """A password verification in the hasher; how long they take is kept (a
        moving average) for the answers that skip one."""
        started = time.monotonic()
        result = await self.hasher.call(verify, *args)
        self._verify_seconds += (time.monotonic() - started - self._verify_seconds) / 8
        return result

    async def logout(self, token: str) -> None:
        async with self.pool.transaction() as conn:
            await sessions.delete(conn, token)

    async def change_password(self, user: dict, old: str, new: str, keep_token: str) -> None:
        """Set a new password; every other session of the user ends."""
        problem = rules.password_problem(new)
        if problem:
            raise Refused(400, "weak_password", problem[0].upper() + problem[1:] + ".")
        current = await self.pool.fetchval("SELECT password_hash FROM users WHERE id = $1", user["id"])
        if not await self.hasher.call(passwords.verify_password, current, old):
            raise Refused(403, "wrong_password", "The current password is not right.")
        new_hash = await self._hash(new)
        async with self.pool.transaction() as conn:
            await conn.execute("UPDATE users SET password_hash = $2, password_changed_at = now() WHERE id = $1",
                               user["id"], new_hash)
            await sessions.delete_for_user(conn, user["id"], keep_token=keep_token)
            await audit(conn, user["username"], "change_password")

    async def bootstrap(self, conn, admin_password: str, demo: bool) -> list[tuple[str, str, str]]:
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
            await conn.execute(
                "INSERT INTO users (username, display_name, role, password_hash) VALUES ($1, $2, $3, $4)",
                username, display, role, await self._hash(password))
            await audit(conn, "server", "create_user", username, role=role)
            created.append((username, role, password))
        return created

    # -- administration ----------------------------------------------------

    async def list_users(self, query: str = "", role: str | None = None, class_id: int | None = None,
                         limit: int | None = LIST_LIMIT) -> list[dict]:
        """Accounts whose username or display name contains `query`, with
        `role`, in the class `class_id`; each with the names of its classes
        (an account in no class is in the default one; admins are in none),
        its school address and the school accounts it is bound to (their
        issuers' ids, or URLs for an issuer no longer configured: server/signin/)."""
        rows = await self.pool.fetch(
            """SELECT u.username, u.display_name, u.role, u.active, u.created_at, u.last_save_at, u.email,
                      ARRAY(SELECT c.name FROM class_membership m JOIN classes c ON c.id = m.class_id
                            WHERE m.user_id = u.id ORDER BY c.is_default DESC, lower(c.name)) AS classes,
                      ARRAY(SELECT b.issuer FROM signin_bindings b WHERE b.user_id = u.id ORDER BY b.issuer)
                          AS school_accounts
               FROM users u
               WHERE ($1 = '' OR u.username ILIKE '%' || $1 || '%' OR u.display_name ILIKE '%' || $1 || '%')
                 AND ($2::text IS NULL OR u.role = $2)
                 AND ($3::bigint IS NULL OR u.id IN (SELECT user_id FROM class_membership WHERE class_id = $3))
               ORDER BY u.username LIMIT $4""",
            query, role, class_id, limit)
        named = {i.url: i.id for i in self.cfg.OIDC_ISSUERS}  # (a binding names its issuer by its URL)
        return [{**_public(r), "classes": list(r["classes"]), "email": r["email"],
                 "school_accounts": [named.get(url, url) for url in r["school_accounts"]]} for r in rows]

    async def create_user(self, actor: str, username: str, display_name: str, role: str,
                          password: str | None = None) -> tuple[dict, str]:
        """Create one account: (user, the password to show once)."""
        username, display_name = rules.check_new_account(username, display_name, role, password)
        password = password or passwords.generate_password()
        password_hash = await self._hash(password)
        async with self.pool.transaction() as conn:
            row = await conn.fetchrow(
                """INSERT INTO users (username, display_name, role, password_hash) VALUES ($1, $2, $3, $4)
                   ON CONFLICT (username) DO NOTHING
                   RETURNING username, display_name, role, active, created_at, last_save_at""",
                username, display_name, role, password_hash)
            if row is None:
                raise Refused(409, "exists", f"There is already an account named {username}.")
            await audit(conn, actor, "create_user", username, role=role)
        return _public(row), password

    async def import_rows(self, actor: str, rows: list[class_list.Row], source: str = "import") -> list[Imported]:
        """Create the accounts of a class list (class_list.Row), each in the
        class its row names (made if it does not exist yet). Every row is
        validated first: if one is invalid nothing is created and the refusal
        lists the bad rows. Existing usernames are skipped (and left in
        their classes). Returns an Imported per row."""
        if not rows:
            raise Refused(400, "empty_import", "The file has no account rows.")
        invalid = [{"line": r.line, "username": r.username, "problem": r.problem} for r in rows if r.problem]
        if invalid:
            raise Refused(400, "invalid_rows", f"{len(invalid)} of {len(rows)} rows are invalid; "
                          "nothing was created.", rows=invalid)
        existing = {r["username"] for r in await self.pool.fetch(
            "SELECT username FROM users WHERE username = ANY($1::text[])", [r.username for r in rows])}
        new = [r for r in rows if r.username not in existing]
        owners = {rec["email"]: rec["username"] for rec in await self.pool.fetch(
            "SELECT lower(email) AS email, username FROM users WHERE lower(email) = ANY($1::text[])",
            [r.email for r in new if r.email])}
        taken = [{"line": r.line, "username": r.username,
                  "problem": f"the address {r.email} is already the account {owners[r.email]}'s"}
                 for r in new if r.email in owners]
        if taken:
            raise Refused(400, "invalid_rows", f"{len(taken)} of {len(rows)} rows are invalid; "
                          "nothing was created.", rows=taken)
        # A row with a school address signs in with that account (signin/): no password.
        plain = {r.username: r.password or passwords.generate_password() for r in new if not r.email}
        hashes = {r.username: passwords.NO_PASSWORD for r in new if r.email}
        for r in new:  # one at a time through the bounded hasher: logins keep their turn
            if r.username in plain:
                hashes[r.username] = await self._hash(plain[r.username])
        async with self.pool.transaction() as conn:
            # ON CONFLICT: an account made since the look above (its username,
            # or its school address) is skipped too.
            created = {rec["username"]: rec["id"] for rec in await conn.fetch(
                """INSERT INTO users (username, display_name, role, password_hash, email)
                   SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
                   ON CONFLICT DO NOTHING RETURNING username, id""",
                [r.username for r in new], [r.name for r in new], [r.role for r in new],
                [hashes[r.username] for r in new], [r.email for r in new])}
            members: dict[str, list[int]] = {}
            for r in new:
                if r.username in created:
                    await audit(conn, actor, "create_user", r.username, role=r.role, source=source)
                    if r.class_name:
                        members.setdefault(r.class_name, []).append(created[r.username])
            await memberships.join_by_name(conn, actor, members)
        return [Imported(r.line, r.username, r.name, r.role, r.username in created,
                         plain.get(r.username) if r.username in created and r.password is None else None,
                         r.class_name, r.email)
                for r in rows]

    async def import_csv(self, actor: str, text: str) -> dict:
        """import_rows of CSV text, as the admin API's report."""
        report = await self.import_rows(actor, class_list.parse_csv(text))
        rows = []
        for r in report:
            entry = {"line": r.line, "username": r.username, "display_name": r.name, "role": r.role,
                     "class": r.class_name, "outcome": "created" if r.created else "skipped: already exists"}
            if r.password:
                entry["password"] = r.password
            if r.email:
                entry["email"] = r.email  # signs in with the school account
            rows.append(entry)
        created = sum(r.created for r in report)
        return {"created": created, "skipped": len(report) - created, "rows": rows}

    async def reset_password(self, actor: str, username: str) -> tuple[str, int]:
        """A new generated password (shown once): (password, sessions ended).
        A lock-out from failed logins is lifted too."""
        [(_, password)], ended = await self.reset_passwords(actor, [username])
        return password, ended

    async def reset_passwords(self, actor: str, usernames: list[str], role: str | None = None,
                              **detail) -> tuple[list[tuple[str, str]], int]:
        """New generated passwords (shown once) for these accounts, all or
        none: ([(username, password)], sessions ended). Each one's sessions
        end, a lock-out is lifted, and the audit log says who did it to whom
        (with `detail`). With `role`, an account that no longer has it (a
        student made a teacher since the caller looked) is refused as missing."""
        usernames = list(dict.fromkeys(usernames))
        plain = {u: passwords.generate_password() for u in usernames}
        hashes = []
        for u in usernames:  # one at a time through the bounded hasher: logins keep their turn
            hashes.append(await self._hash(plain[u]))
        ended = 0
        async with self.pool.transaction() as conn:
            changed = {r["username"]: r["id"] for r in await conn.fetch(
                """UPDATE users u SET password_hash = n.hash, password_changed_at = now()
                   FROM unnest($1::text[], $2::text[]) AS n(username, hash)
                   WHERE u.username = n.username AND ($3::text IS NULL OR u.role = $3)
                   RETURNING u.username, u.id""", usernames, hashes, role)}
            missing = [u for u in usernames if u not in changed]
            if missing:  # raising rolls the others back
                raise Refused(404, "no_such_user", f"There is no account named {missing[0]}.", users=missing)
            for u in usernames:
                sessions_ended = await sessions.delete_for_user(conn, changed[u])
                ended += sessions_ended
                await throttle.lift(conn, u)
                await audit(conn, actor, "reset_password", u, sessions_ended=sessions_ended, **detail)
        return [(u, plain[u]) for u in usernames], ended

    async def set_active(self, actor: str, username: str, active: bool) -> tuple[bool, int]:
        """Activate or deactivate (which ends the sessions): (whether it
        changed, sessions ended). Deactivating always ends sessions, even if
        an earlier attempt was interrupted."""
        async with self.pool.transaction() as conn:
            was = await conn.fetchrow("SELECT id, active FROM users WHERE username = $1 FOR UPDATE", username)
            if was is None:
                raise Refused(404, "no_such_user", f"There is no account named {username}.")
            ended = 0 if active else await sessions.delete_for_user(conn, was["id"])
            if was["active"] != active:
                await conn.execute("UPDATE users SET active = $2 WHERE id = $1", was["id"], active)
                await audit(conn, actor, "activate" if active else "deactivate", username, sessions_ended=ended)
        return was["active"] != active, ended
