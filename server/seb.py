"""Safe Exam Browser (SEB): the proof a request carries that it came from
SEB opened with the exam's configuration, checked as Moodle's quiz
(quizaccess_seb) checks it.

SEB sends, with every request, `X-SafeExamBrowser-ConfigKeyHash`: the
SHA-256 (hex) of the request's absolute URL, without its fragment,
followed by the Config Key of the settings it runs with. The teacher gives
that key (SEB's configuration tool shows it) when making the exam. A hash
is good for one URL only, so one seen on another request cannot be
replayed elsewhere.

The URL is the one the browser asked for, which behind a proxy is not the
one the server sees: with PUBLIC_URL set, its scheme, host and path
prefix; otherwise the request's own Host, and https when the request came
over TLS (or a trusted proxy says it did).
"""
import hashlib
import hmac
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

from .config import Config
from .web import is_https

HEADER = "X-SafeExamBrowser-ConfigKeyHash"
KEY = re.compile(r"[0-9a-fA-F]{64}")
REQUIRED = ("This exam must be taken in Safe Exam Browser: open the exam's .seb file your teacher gave you, "
            "then sign in from there.")


@dataclass(frozen=True)
class Proof:
    """What one request showed: the URLs the browser may have hashed (one;
    a WebSocket's also under its http form) and the header it sent."""
    urls: tuple[str, ...]
    sent: str

    def holds(self, config_key: str) -> bool:
        """Whether the header is the hash of this request's URL and `config_key`."""
        sent = self.sent.strip().lower().encode()
        return any(hmac.compare_digest(sent, key_hash(url, config_key).encode()) for url in self.urls)


NO_PROOF = Proof((), "")  # a request that could not carry one (the server's own calls)


def key_hash(url: str, config_key: str) -> str:
    """The header SEB sends for `url` when it runs with `config_key`."""
    return hashlib.sha256((url.split("#", 1)[0] + config_key).encode("utf-8")).hexdigest()


def proof_of(handler: Any, cfg: Config, socket: bool = False) -> Proof:
    """The proof a Tornado request carries (`socket`: a WebSocket upgrade)."""
    url = request_url(handler, cfg)
    # A socket's address SEB may hash under either scheme (ws: as the page asked; http: the upgrade request's).
    urls = ("ws" + url[4:], url) if socket else (url,)
    return Proof(urls, handler.request.headers.get(HEADER, ""))


def request_url(handler: Any, cfg: Config) -> str:
    """The absolute URL the browser asked for (http or https)."""
    uri = handler.request.uri or "/"
    if cfg.PUBLIC_URL and not cfg.PUBLIC_URL_GUESSED:
        public = urllib.parse.urlsplit(cfg.PUBLIC_URL)
        prefix = public.path.rstrip("/")
        if prefix and not (uri == prefix or uri.startswith(prefix + "/")):
            uri = prefix + uri  # the proxy took the prefix off before passing the request on
        return f"{public.scheme}://{public.netloc}{uri}"
    scheme = "https" if is_https(handler) else "http"
    return f"{scheme}://{handler.request.host}{uri}"


def config_key(value: Any) -> str | None:
    """The Config Key a teacher's form gives (None: SEB not required), in lower case."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not KEY.fullmatch(value.strip()):
        raise ValueError("bad config key")
    return value.strip().lower()
