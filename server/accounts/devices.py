"""Device cookies: a browser that has signed in as a user is known again.

After OWASP's "Slow down online guessing attacks with device cookies": a
successful sign-in gives the browser a token naming the user, signed with
a key derived from the cookie secret. A sign-in as that user from that
browser is then counted on its own (per token), not with the failures of
everyone else on the school's address or of a stranger guessing at the
account (throttle.py). A token proves only that this browser once knew
the user's password; it never lets anyone in without it.

A token is "<username>:<nonce>:<mac>", mac = HMAC-SHA256(key,
"<username>:<nonce>") in URL-safe base64. One cookie holds the tokens of
the last MAX_TOKENS users who signed in on the browser (a school computer
is shared), "~" between them. Nothing is stored on the server; anything
that is not a well-formed token with the right mac is ignored.
"""
import base64
import hashlib
import hmac
import re
import secrets

COOKIE = "pyclassroom_device"
DAYS = 365  # how long a browser stays known without signing in again
MAX_TOKENS = 8
MAX_COOKIE = 2048  # characters of the cookie read; 8 tokens take at most ~1,000
_NONCE = re.compile(r"^[A-Za-z0-9_-]{16}\Z")


class Devices:
    def __init__(self, cookie_secret: str):
        # A key of its own: a device token is no session cookie, nor the reverse.
        self._key = hmac.new(cookie_secret.encode(), b"pyclassroom device cookie", hashlib.sha256).digest()

    def _mac(self, username, nonce):
        digest = hmac.new(self._key, f"{username}:{nonce}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    def _tokens(self, cookie):
        """(username, nonce, token) of each well-formed, rightly signed token."""
        if not isinstance(cookie, str):
            return []
        found = []
        for token in cookie[:MAX_COOKIE].split("~", MAX_TOKENS)[:MAX_TOKENS]:
            parts = token.split(":")
            if len(parts) != 3 or not token.isascii():
                continue
            username, nonce, mac = parts
            if _NONCE.match(nonce) and hmac.compare_digest(mac, self._mac(username, nonce)):
                found.append((username, nonce, token))
        return found

    def trusted(self, cookie, username):
        """The nonce of the browser's token for `username`, or None when the
        cookie holds none (absent, garbage, forged, another user's)."""
        for owner, nonce, _ in self._tokens(cookie):
            if owner == username:
                return nonce
        return None

    def issue(self, cookie, username):
        """The cookie's new value after `username` signed in: a fresh token
        for them, after the other users' valid ones (the oldest dropped)."""
        nonce = secrets.token_urlsafe(12)  # 16 characters
        kept = [token for owner, _, token in self._tokens(cookie) if owner != username]
        return "~".join(kept[-(MAX_TOKENS - 1):] + [f"{username}:{nonce}:{self._mac(username, nonce)}"])
