"""The address students type to reach the server, as password slips print
it: PUBLIC_URL when set; otherwise the best guess a teacher would want,
this host's address on the school network and the port listened on.

Never the address of the page that asks: an admin working on the server
itself would print http://127.0.0.1:… on every slip. Resolved once in the
parent process at start-up (`resolve`), so every worker says the same.
"""
import ipaddress
import socket
import urllib.parse
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # config imports this module (for parse)
    from .config import Config

WILDCARDS = ("0.0.0.0", "::", "")
SET_IT = "set PUBLIC_URL to the address students type, e.g. PUBLIC_URL=http://pyclassroom.school.lan:8888"


def parse(text: str) -> str:
    """PUBLIC_URL as kept (no trailing slash), or ValueError saying what is allowed."""
    value = text.strip()
    if not value:
        return ""
    wrong = ValueError("expected empty (a guess) or an address such as http://10.0.0.5:8888 or "
                       "https://py.school.org (http or https, a host, maybe a port and a path)")
    if len(value) > 200 or any(c.isspace() for c in value):
        raise wrong
    try:
        parts = urllib.parse.urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError when out of range or not a number
    except ValueError:
        raise wrong from None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username is not None \
            or parts.query or parts.fragment or "@" in parts.netloc:
        raise wrong
    return value.rstrip("/")



def _lan_address() -> str | None:
    """This host's address on the network that leads out (no packet is
    sent: connecting a UDP socket only picks the route)."""
    for family, target in ((socket.AF_INET, "192.0.2.1"), (socket.AF_INET6, "2001:db8::1")):
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.connect((target, 9))
                address = s.getsockname()[0]
        except OSError:
            continue
        if not ipaddress.ip_address(address).is_loopback and not ipaddress.ip_address(address).is_unspecified:
            return address
    return None


def guess(host: str, port: int) -> str:
    """The address students most likely reach a server listening on `host`, `port` at."""
    address = host if host not in WILDCARDS else (_lan_address() or "127.0.0.1")
    if ":" in address and not address.startswith("["):
        address = f"[{address}]"
    return f"http://{address}" if port == 80 else f"http://{address}:{port}"


def is_loopback(url: str) -> bool:
    """Whether `url` reaches only the computer it is typed on."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve(cfg: "Config", port: int) -> "Config":
    """Before the workers start: `cfg` with PUBLIC_URL the guess when it is
    unset (PUBLIC_URL_GUESSED says so)."""
    if cfg.PUBLIC_URL:
        return cfg.but(PUBLIC_URL_GUESSED=False)
    return cfg.but(PUBLIC_URL=guess(cfg.HOST, port), PUBLIC_URL_GUESSED=True)


def announce(cfg: "Config") -> str:
    """What the server prints at start-up about the address."""
    url = cfg.PUBLIC_URL
    if is_loopback(url):
        return (f"students sign in at {url}? That address works only on this computer, so password slips "
                f"would send students nowhere: {SET_IT}.")
    if cfg.PUBLIC_URL_GUESSED:
        return (f"students sign in at {url}: a guess (this computer's network address), printed on password "
                f"slips. If students use another address, {SET_IT}.")
    return f"students sign in at {url} (PUBLIC_URL; printed on password slips)"


def sign_in_at(cfg: "Config") -> dict[str, object]:
    """What a page that prints slips is given."""
    return {"url": cfg.PUBLIC_URL, "guessed": cfg.PUBLIC_URL_GUESSED, "loopback": is_loopback(cfg.PUBLIC_URL)}
