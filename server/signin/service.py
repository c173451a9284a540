"""Signing in with a school account (OpenID Connect's authorization code
flow with PKCE, `state` and `nonce`), and who is who.

`start` remembers a flow (signin_flows: its state, nonce and PKCE verifier)
and gives the address to send the browser to; `finish` takes the browser's
return, uses the flow once, exchanges the code, checks the ID token
(provider.py) and finds the account:

- by the binding (issuer, subject), always first: an e-mail address can
  change or be given to someone else, the subject cannot;
- at a person's first sign-in with an issuer, by the account's school
  address (users.email), only when the issuer says the address is verified,
  its domain is allowed, and the account has no binding yet (another
  issuer claiming the same address takes nothing over);
- else, with the `create_students` policy, a new student account.

Roles come from a group claim only where the admin mapped one (Issuer.groups).
The session is the accounts service's, as after a password. Knows nothing
of HTTP: refusals are `Refused` with a sentence for the person.
"""
import hashlib
import hmac
import re

from authlib.common.security import generate_token
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from .. import db
from ..accounts import passwords, rules, sessions
from ..accounts.audit import audit
from ..accounts.service import Accounts
from ..config import Config
from ..errors import Refused
from .issuers import ROLES, Issuer
from .provider import Provider

FLOW_SECONDS = 600  # how long a sign-in may take at the provider
# Sign-ins started and not yet finished, at most: from one client address (a school's
# network is one: a whole school signing in at 8:00 stays far below), and in all.
FLOWS_PER_ADDRESS = 1000
FLOWS_AT_MOST = 100_000
SCOPES = "openid email profile"
HOMES = {"student": "/ide", "teacher": "/teacher", "admin": "/admin"}
PAGES_OF = {"student": ("/ide",), "teacher": ("/ide", "/teacher"), "admin": ("/ide", "/teacher", "/admin")}
START_AGAIN = "Start again from the sign-in page."


def destination(next_page: str, role: str) -> str:
    """Where a signed-in user goes: `next_page` if it is one of the pages of
    their role (never another site), else their home page."""
    return next_page if next_page in PAGES_OF.get(role, ()) else HOMES.get(role, "/ide")


def _hash(state: str) -> bytes:
    return hashlib.sha256(state.encode()).digest()


class SignIn:
    def __init__(self, pool: "db.Pool", cfg: Config, accounts: Accounts) -> None:
        self.pool, self.cfg, self.accounts = pool, cfg, accounts
        self.issuers = {i.id: i for i in cfg.OIDC_ISSUERS}
        self.providers = {i.id: Provider(i, cfg.OIDC_TIMEOUT, cfg.PASSWORD_SIGN_IN) for i in cfg.OIDC_ISSUERS}

    def buttons(self) -> list[tuple[str, str]]:
        """(id, name) of each issuer, in the setting's order."""
        return [(i.id, i.name) for i in self.cfg.OIDC_ISSUERS]

    def _issuer(self, issuer_id: str) -> Issuer:
        issuer = self.issuers.get(issuer_id)
        if issuer is None:
            raise Refused(404, "no_such_issuer", "This server has no such school account to sign in with. "
                          + START_AGAIN)
        return issuer

    async def start(self, issuer_id: str, redirect_uri: str, next_page: str, address: str) -> tuple[str, str]:
        """(the provider's address to send the browser to, the flow's state,
        which the browser must bring back in its cookie); refused while too
        many sign-ins are under way from `address` (the client's), or in all."""
        issuer = self._issuer(issuer_id)
        metadata = await self.providers[issuer.id].metadata()
        state, nonce, verifier = generate_token(43), generate_token(43), generate_token(64)
        next_page = next_page if any(next_page in pages for pages in PAGES_OF.values()) else ""
        room = await self.pool.fetchrow(
            """SELECT (SELECT count(*) FROM signin_flows WHERE address = $1
                       AND created_at > now() - make_interval(secs => $2)) < $3 AS here,
                      (SELECT count(*) FROM signin_flows) < $4 AS anywhere""",
            address, FLOW_SECONDS, FLOWS_PER_ADDRESS, FLOWS_AT_MOST)
        assert room is not None  # (a SELECT of two values has its row)
        if not room["here"]:
            raise Refused(429, "too_many_signins", "Too many sign-ins were started from your network and not "
                          "finished in the last minutes: wait a minute, then try again.", retry_after=60)
        if not room["anywhere"]:
            raise Refused(503, "signin_busy", "Too many sign-ins are under way right now: wait a minute, "
                          "then try again.", retry_after=60)
        await self.pool.execute(
            "INSERT INTO signin_flows (state_hash, issuer, nonce, verifier, redirect_uri, next, address) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7)", _hash(state), issuer.id, nonce, verifier, redirect_uri, next_page,
            address)
        url = prepare_grant_uri(metadata["authorization_endpoint"], issuer.client_id, "code", redirect_uri,
                                SCOPES, state, nonce=nonce, code_challenge=create_s256_code_challenge(verifier),
                                code_challenge_method="S256")
        return url, state

    async def unbind(self, admin: str, username: str, issuer_id: str) -> None:
        """Forget that `username` is the person of that issuer (a student given
        a new school account, a binding made by mistake): their next sign-in
        with it is matched as a first one is."""
        issuer = self._issuer(issuer_id)
        async with self.pool.transaction() as conn:
            gone = await conn.fetchrow(
                """DELETE FROM signin_bindings b USING users u
                   WHERE b.user_id = u.id AND u.username = $1 AND b.issuer = $2 RETURNING b.email""",
                username, issuer.url)
            if gone is None:
                raise Refused(404, "not_bound", f"{username} is not bound to a school account of '{issuer_id}'.")
            await audit(conn, admin, "unbind_school_account", username, issuer=issuer_id, email=gone["email"])

    async def prune(self) -> None:
        """Forget sign-ins never finished (they are refused anyway)."""
        await self.pool.execute("DELETE FROM signin_flows WHERE created_at < now() - make_interval(secs => $1)",
                                FLOW_SECONDS)

    async def finish(self, params: dict[str, str], browser_state: str | None, address: str,
                     device_cookie: str | None) -> tuple[dict, str, object, str | None, str]:
        """The browser came back from the provider with `params` (code,
        state, or error): (user, session token, expires, device cookie,
        the page to go to)."""
        state = params.get("state", "")
        if not state or not browser_state or not hmac.compare_digest(state.encode(), browser_state.encode()):
            raise Refused(400, "signin_other_browser", "This sign-in was not started in this browser (or "
                          "another was started since), so it cannot finish here. " + START_AGAIN)
        flow = await self.pool.fetchrow(
            """DELETE FROM signin_flows WHERE state_hash = $1
               RETURNING issuer, nonce, verifier, redirect_uri, next,
                         created_at > now() - make_interval(secs => $2) AS fresh""", _hash(state), FLOW_SECONDS)
        if flow is None or not flow["fresh"] or flow["issuer"] not in self.issuers:
            raise Refused(400, "signin_expired", "This sign-in took too long or was already used. " + START_AGAIN)
        issuer = self.issuers[flow["issuer"]]
        if params.get("error") or not params.get("code"):
            raise Refused(403, "provider_refused", f"{issuer.name} did not sign you in. " + START_AGAIN)
        provider = self.providers[issuer.id]
        answer = await provider.exchange(params["code"], flow["redirect_uri"], flow["verifier"])
        claims = await provider.verify(answer["id_token"], flow["nonce"])
        user = await self._account(issuer, claims)
        token, expires, device = await self.accounts.sign_in_as(user, address, device_cookie, via=issuer.id)
        return user, token, expires, device, destination(flow["next"], user["role"])

    async def _account(self, issuer: Issuer, claims: dict) -> dict:
        """The account of the person the ID token names, bound at their first sign-in."""
        subject = claims["sub"]
        email: str = claims["email"] if isinstance(claims.get("email"), str) else ""
        role = _mapped_role(issuer, claims)
        async with self.pool.transaction() as conn:
            row = await conn.fetchrow(
                """SELECT u.id, u.username, u.display_name, u.role, u.active FROM signin_bindings b
                   JOIN users u ON u.id = b.user_id WHERE b.issuer = $1 AND b.subject = $2
                   FOR UPDATE OF b""", issuer.url, subject)
            if row is not None:
                await conn.execute("UPDATE signin_bindings SET email = $3, last_at = now() "
                                   "WHERE issuer = $1 AND subject = $2", issuer.url, subject, email[:254])
            else:
                row = await self._first_sign_in(conn, issuer, subject, email, claims, role)
            if not row["active"]:
                raise Refused(403, "account_deactivated", "This account is deactivated. Ask your teacher.")
            if role and role != row["role"]:
                await conn.execute("UPDATE users SET role = $2 WHERE id = $1", row["id"], role)
                await sessions.user_changed(conn, row["id"])
                await audit(conn, issuer.id, "set_role", row["username"], role=role, source="group claim")
        user = {k: row[k] for k in ("id", "username", "display_name", "role")}
        return {**user, "role": role or user["role"]}

    async def _first_sign_in(self, conn, issuer, subject, email, claims, role):
        if not email or claims.get(issuer.verified_claim) is not True:
            raise Refused(403, "email_not_verified", f"{issuer.name} did not confirm your e-mail address, so "
                          "PyClassroom cannot tell which account is yours. Ask your school's IT to confirm "
                          "it, or ask your teacher.")
        if not issuer.allows(email):
            raise Refused(403, "domain_not_allowed", f"Accounts of {email.rpartition('@')[2]} may not sign in "
                          f"here. Sign in with your school account (an address ending in @{issuer.domains[0]}).")
        owner = await conn.fetchrow(
            """SELECT u.id, u.username, u.display_name, u.role, u.active,
                      EXISTS (SELECT 1 FROM signin_bindings b WHERE b.user_id = u.id) AS bound
               FROM users u WHERE lower(u.email) = lower($1) FOR UPDATE OF u""", email)
        if owner is not None and owner["bound"]:
            # Matched once: an account bound to a school account is that
            # one's, whoever else claims its address.
            raise Refused(403, "bound_elsewhere", f"The account of {email} signs in with another school "
                          "account. Use that one; if you cannot, ask your school's admin.")
        if owner is None and issuer.policy != "create_students":
            raise Refused(403, "no_account", f"There is no PyClassroom account for {email} yet. Ask your "
                          "teacher to add you to a class, then sign in again.")
        if owner is None:
            owner = await self._create_student(conn, issuer, email, claims, role)
        await conn.execute("INSERT INTO signin_bindings (issuer, subject, user_id, email) VALUES ($1, $2, $3, $4)",
                           issuer.url, subject, owner["id"], email)
        await audit(conn, issuer.id, "bind_school_account", owner["username"], issuer=issuer.url, email=email)
        return owner

    async def _create_student(self, conn, issuer, email, claims, role):
        """A new account named after the address (its local part, made a valid
        username; -2, -3 ... if taken)."""
        base = re.sub(r"[^a-z0-9._-]+", "-", email.rpartition("@")[0].lower()).strip("._-")[:56] or "student"
        name = claims.get("name")
        if rules.display_name_problem(name):
            name = base
        for n in range(1, 100):
            username = base if n == 1 else f"{base}-{n}"
            row = await conn.fetchrow(
                """INSERT INTO users (username, display_name, role, password_hash, email)
                   VALUES ($1, $2, $3, $4, $5) ON CONFLICT (username) DO NOTHING
                   RETURNING id, username, display_name, role, active""",
                username, name, role or "student", passwords.NO_PASSWORD, email)
            if row is not None:
                await audit(conn, issuer.id, "create_user", username, role=row["role"], source="school account")
                return row
        raise Refused(409, "no_free_username", f"No username is free for {email}. Ask your school's admin.")


def _mapped_role(issuer: Issuer, claims: dict) -> str | None:
    """The highest role the admin mapped one of the person's groups to, if any."""
    groups = claims.get(issuer.group_claim)
    if not issuer.groups or not isinstance(groups, list):
        return None
    mapped = [role for group, role in issuer.groups if group in groups]
    return max(mapped, key=ROLES.index) if mapped else None
