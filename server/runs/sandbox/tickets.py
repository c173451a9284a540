"""Who may ask a runner (server/runner) for a sandbox, and how a runner proves it is itself.

The web tier holds RUNNER_SECRET; each runner holds only its own key,
derived from it for its id (`runner_key`). A runner's key opens nothing
else: not the cookies (COOKIE_SECRET), not another runner (keys are one-way
from the secret), not the database.

- Web to runner: every sandbox is asked for with a ticket (`issue`) that
  names the runner, a sandbox id drawn for it and an expiry a few seconds
  away, signed with that runner's key. A runner takes a ticket only for
  itself, before it expires, and once (`Tickets.accept`): a ticket seen on
  the wire cannot be replayed, and one made for another runner is refused.
- Runner to web: the runner's first answer carries `proof(key, sandbox)`,
  which only the holder of that runner's key can make for that sandbox, so
  an address that answers in a runner's place is refused.
- A runner's heartbeat (`heartbeat`), which registers its address and room
  with the web tier, is signed with its key for that purpose alone (a
  ticket or a proof is never a heartbeat) and carries the time it was made
  in nanoseconds: the web tier keeps a runner's latest in PostgreSQL and
  takes only a later one, so a heartbeat seen on the wire cannot be
  replayed to any web worker or host (`read_heartbeat`).
- Runners an autoscaler starts are alike: they hold their fleet's key
  (RUNNER_FLEET_KEY, which the web tier holds too), which only enrolls. Each names itself "<fleet>-<random>"
  and sends a first heartbeat signed with the fleet's key; the web tier
  enrolls a name once (PostgreSQL says whether it is new) and answers with
  that runner's own key, made from RUNNER_SECRET as any runner's. So a
  fleet member escaped from cannot take another's name: that name is
  enrolled already, and only its own key speaks for it from then on.

HMAC-SHA256 from the standard library: a signature over a few fields, no
JWT library, no algorithm named by the message.
"""
import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
import time
from typing import Any

from ...config import RUNNER_ID

TICKET_SECONDS = 30.0  # a ticket is good for this long after it is made
SLACK_SECONDS = 5.0  # clocks of the web and runner hosts may differ by this
MAX_TICKET = 512  # bytes: anything longer is not a ticket


class Refused(Exception):
    """A ticket or proof that does not hold; the message says why, for the log."""


def runner_key(secret: str, runner: str) -> bytes:
    """The key of runner `runner`, made from the web tier's RUNNER_SECRET."""
    if not RUNNER_ID.fullmatch(runner):
        raise ValueError(f"not a runner id: {runner!r}")
    return hmac.new(secret.encode(), b"pyclassroom runner key\x00" + runner.encode(), hashlib.sha256).digest()


def home_key(key: bytes, home: str) -> str:
    """The name a runner keeps `home`'s copy under (runner/service.py,
    "keep"): the same from every worker and host, and no path for the runner."""
    return _sign(key, b"home", home.encode()).hex()[:32]


def _sign(key: bytes, purpose: bytes, body: bytes) -> bytes:
    return hmac.new(key, purpose + b"\x00" + body, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    """Strictly: a character outside the alphabet is an error, not skipped."""
    return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)


def _signed(key: bytes, purpose: bytes, fields: dict[str, Any]) -> str:
    """`fields` and their signature for `purpose`, as text: body.signature."""
    body = json.dumps(fields, separators=(",", ":"), sort_keys=True).encode()
    return _b64(body) + "." + _b64(_sign(key, purpose, body))


def _opened(token: Any, what: str) -> tuple[bytes, bytes]:
    """(body, signature) of what _signed made; Refused("not a `what`") else."""
    if not isinstance(token, str) or len(token) > MAX_TICKET or token.count(".") != 1:
        raise Refused(f"not a {what}")
    body_text, signature_text = token.split(".")
    try:
        return _unb64(body_text), _unb64(signature_text)
    except (binascii.Error, ValueError):
        raise Refused(f"not a {what}") from None


def issue(key: bytes, runner: str, now: float | None = None) -> tuple[str, str]:
    """(ticket, sandbox id): the web tier's ask for one sandbox on `runner`."""
    sandbox = secrets.token_urlsafe(12)
    expires = (time.time() if now is None else now) + TICKET_SECONDS
    return _signed(key, b"ticket", {"runner": runner, "sandbox": sandbox, "expires": round(expires, 3)}), sandbox


def proof(key: bytes, sandbox: str) -> str:
    """The runner's answer for `sandbox`: only its key makes it."""
    return _b64(_sign(key, b"proof", sandbox.encode()))


def proof_holds(key: bytes, sandbox: str, answer: Any) -> bool:
    return isinstance(answer, str) and hmac.compare_digest(proof(key, sandbox).encode(), answer.encode())


class Tickets:
    """A runner's check of the tickets it is shown: its own, signed, in
    time, and each once. The ids seen are kept until their tickets expire:
    at most one per ticket made in the last TICKET_SECONDS."""

    def __init__(self, key: bytes, runner: str) -> None:
        self.key = key
        self.runner = runner
        self.seen: dict[str, float] = {}  # sandbox id -> its ticket's expiry

    def accept(self, ticket: Any, now: float | None = None) -> str:
        """The sandbox id of a good ticket; Refused otherwise."""
        now = time.time() if now is None else now
        body, signature = _opened(ticket, "ticket")
        if not hmac.compare_digest(_sign(self.key, b"ticket", body), signature):
            raise Refused("a ticket not signed with this runner's key")
        try:
            fields = json.loads(body)
            runner, sandbox, expires = fields["runner"], fields["sandbox"], float(fields["expires"])
        except (ValueError, TypeError, KeyError):
            raise Refused("a signed ticket without its fields") from None
        if runner != self.runner:
            raise Refused(f"a ticket for runner {runner!r}")
        if not isinstance(sandbox, str) or not sandbox:
            raise Refused("a ticket without a sandbox id")
        if expires < now - SLACK_SECONDS:
            raise Refused("an expired ticket")
        if expires > now + TICKET_SECONDS + SLACK_SECONDS:
            raise Refused("a ticket that expires too late")
        for seen, until in list(self.seen.items()):
            if until < now - SLACK_SECONDS:
                del self.seen[seen]
        if sandbox in self.seen:
            raise Refused("a ticket already used (a replay)")
        self.seen[sandbox] = expires
        return sandbox


def heartbeat(key: bytes, runner: str, address: str, capacity: int, busy: int, now_ns: int | None = None,
              fleet: str | None = None) -> str:
    """Runner `runner`'s signed word that it listens at `address` and runs
    `busy` of at most `capacity` sandboxes, as of now. With `fleet`, the
    first heartbeat of a fleet member, signed with the fleet's key: it
    enrolls `runner` (which must be "<fleet>-..."), and the web tier answers
    with the runner's own key."""
    return _signed(key, b"enroll" if fleet else b"heartbeat",
                   {"runner": runner, "address": address, "capacity": capacity, "busy": busy,
                    "sent": time.time_ns() if now_ns is None else now_ns, **({"fleet": fleet} if fleet else {})})


def read_heartbeat(secret: str, token: Any, now: float | None = None,
                   fleets: dict[str, bytes] | None = None) -> dict[str, Any]:
    """The fields of a heartbeat signed by the runner it names (its key made
    from `secret`), or of an enrollment signed with its fleet's key (of
    `fleets`), made within TICKET_SECONDS; Refused otherwise. Its `sent`
    must still be later than the runner's last (the caller's part)."""
    now = time.time() if now is None else now
    body, signature = _opened(token, "heartbeat")
    try:
        fields = json.loads(body)
        runner, fleet = fields["runner"], fields.get("fleet")
        if not RUNNER_ID.fullmatch(runner):
            raise ValueError("not a runner id")
        if fleet is not None and fleet not in (fleets or {}):
            raise Refused(f"an enrollment in fleet {fleet!r}, which this server does not take")
        key = runner_key(secret, runner) if fleet is None else (fleets or {})[fleet]
    except (ValueError, TypeError, KeyError, AttributeError):
        raise Refused("not a heartbeat") from None
    if not hmac.compare_digest(_sign(key, b"heartbeat" if fleet is None else b"enroll", body), signature):
        raise Refused(f"a heartbeat for runner {runner!r} not signed with its key"
                      if fleet is None else f"an enrollment for fleet {fleet!r} not signed with its key")
    if fleet is not None and not runner.startswith(fleet + "-"):
        raise Refused(f"an enrollment in fleet {fleet!r} of a runner not named after it ({runner!r})")
    address, capacity, busy, sent = fields.get("address"), fields.get("capacity"), fields.get("busy"), \
        fields.get("sent")
    if not isinstance(address, str) or not _ADDRESS.fullmatch(address) or not all(
            isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 1 << 62 for n in (capacity, busy, sent)):
        raise Refused("a signed heartbeat without its fields")
    if abs(sent / 1e9 - now) > TICKET_SECONDS:
        raise Refused("a heartbeat too old or from too far ahead")
    return {"runner": runner, "address": address, "capacity": capacity, "busy": busy, "sent": sent, "fleet": fleet}


_ADDRESS = re.compile(r"^wss?://[A-Za-z0-9.\-\[\]:]{1,200}$")
