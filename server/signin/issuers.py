"""The OIDC_ISSUERS setting: the school accounts people may sign in with.

A JSON list, one object per issuer (an OpenID provider found by its
discovery document):

    [{"name": "Google", "issuer": "https://accounts.google.com",
      "client_id": "...", "client_secret": "...",
      "policy": "existing", "domains": ["school.org"],
      "group_claim": "groups", "groups": {"teachers": "teacher"}}]

- `name` is shown on the sign-in page's button ("Sign in with Google");
  its letters and digits make the issuer's id in addresses
  (/signin/google). Accounts are bound to the `issuer` address, not the name.
- `policy`: `existing` signs in only accounts that already exist (the first
  sign-in matched by the account's school address, then by the issuer's
  subject); `create_students` also makes a student account for a new person.
- `domains`: the addresses' domains allowed (required: no issuer may sign in
  the whole world's accounts).
- `groups` (optional): a group claim's value -> role. Roles never come from
  anything else a person's token says.
- `verified_claim` (optional, default `email_verified`): the claim that is
  true when the issuer vouches for the address (Microsoft Entra ID sends
  none by default: add its optional claim `xms_edov` and name it here).

Pure parsing (config.py calls it); knows nothing of HTTP.
"""
import json
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

POLICIES = ("existing", "create_students")
ROLES = ("student", "teacher", "admin")  # as accounts/rules.py (config may not import the accounts)
_DOMAIN = re.compile(r"^(?=.{1,253}\Z)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}\Z")
FIELDS = {"name", "issuer", "client_id", "client_secret", "policy", "domains", "group_claim", "groups",
          "verified_claim"}


@dataclass(frozen=True)
class Issuer:
    id: str  # from the name: in addresses (/signin/<id>) and bindings
    name: str
    url: str  # the issuer identifier, as its discovery document gives it
    client_id: str
    client_secret: str
    policy: str
    domains: tuple[str, ...]
    group_claim: str = "groups"
    groups: tuple[tuple[str, str], ...] = ()  # (group, role)
    verified_claim: str = "email_verified"

    def __repr__(self) -> str:  # never the secret, in a log or a traceback
        return f"Issuer({self.id!r}, {self.url!r})"

    def allows(self, email: str) -> bool:
        domain = email.rpartition("@")[2].lower()
        return bool(domain) and domain in self.domains


def issuer_id(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40]


def parse(text: str) -> tuple[Issuer, ...]:
    """OIDC_ISSUERS' text as Issuers, or ValueError saying what is wrong."""
    if not text.strip():
        return ()
    try:
        items = json.loads(text)
    except ValueError:
        raise ValueError("expected a JSON list of issuers (see docs/operators.md, \"Sign in with the "
                         "school's accounts\")") from None
    if not isinstance(items, list):
        raise ValueError("expected a JSON list of issuers")
    issuers: list[Issuer] = []
    for number, item in enumerate(items, 1):
        issuer = _one(item, f"issuer {number}")
        if any(issuer.id == seen.id for seen in issuers):
            raise ValueError(f"expected each issuer named once ({issuer.name!r} is named twice)")
        issuers.append(issuer)
    return tuple(issuers)


def _text(item: dict, key: str, where: str, max_len: int = 2000) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value.strip() or len(value) > max_len:
        raise ValueError(f"{where}: expected \"{key}\" as text")
    return value.strip()


def _one(item: object, where: str) -> Issuer:
    if not isinstance(item, dict):
        raise ValueError(f"{where}: expected an object")
    unknown = sorted(set(item) - FIELDS)
    if unknown:
        raise ValueError(f"{where}: unknown field {unknown[0]!r} (expected {', '.join(sorted(FIELDS))})")
    name = _text(item, "name", where, 60)
    where = f"issuer {name!r}"
    if not issuer_id(name) or issuer_id(name) == "callback":  # /signin/callback is the providers' return
        raise ValueError(f"{where}: expected a name with letters or digits (and not \"callback\")")
    url = _text(item, "issuer", where).rstrip("/")
    parts = urlsplit(url)
    # http only on this computer (a provider started for a test or a trial)
    loopback = parts.hostname in ("127.0.0.1", "localhost", "::1")
    if not (parts.scheme == "https" or (parts.scheme == "http" and loopback)) or not parts.hostname \
            or parts.query or parts.fragment:
        raise ValueError(f"{where}: expected \"issuer\" as the issuer's https:// address")
    policy = item.get("policy")
    if policy not in POLICIES:
        raise ValueError(f"{where}: expected \"policy\" to be one of {', '.join(POLICIES)}")
    domains = item.get("domains")
    if not isinstance(domains, list) or not domains or not all(
            isinstance(d, str) and _DOMAIN.match(d.strip().lower()) for d in domains):
        raise ValueError(f"{where}: expected \"domains\" as a list of the school's e-mail domains, "
                         "e.g. [\"school.org\"]")
    group_claim, verified_claim = item.get("group_claim", "groups"), item.get("verified_claim", "email_verified")
    for key, value in (("group_claim", group_claim), ("verified_claim", verified_claim)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"{where}: expected \"{key}\" as the name of a claim")
    groups = item.get("groups", {})
    if not isinstance(groups, dict) or not all(
            isinstance(g, str) and g and role in ROLES for g, role in groups.items()):
        raise ValueError(f"{where}: expected \"groups\" as an object of group -> {'|'.join(ROLES)}")
    return Issuer(id=issuer_id(name), name=name, url=url, client_id=_text(item, "client_id", where),
                  client_secret=_text(item, "client_secret", where), policy=policy,
                  domains=tuple(d.strip().lower() for d in domains), group_claim=group_claim,
                  groups=tuple(groups.items()), verified_claim=verified_claim)
