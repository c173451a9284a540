"""One OpenID provider as a client sees it: its discovery document, its
keys, its token endpoint, and the ID tokens it signs.

Everything is fetched with Tornado's AsyncHTTPClient under the OIDC_TIMEOUT
deadline, never on a thread and never blocking the IOLoop. The discovery
document and the key set are kept for an hour; a token signed with a key id
the set does not have makes it fetch the keys again (a provider rotating
its keys), at most once every REFRESH_SECONDS, so a stream of forged key
ids cannot make us hammer the provider.

Tokens are checked by joserfc (Authlib's token library): the signature
against the provider's keys, then `iss`, `aud` (and `azp`), `exp`, `iat`,
`sub` and `nonce`. No JWT is parsed by hand here.
"""
import asyncio
import json
import logging
import time
from typing import Any
from urllib.parse import urlencode

from authlib.oauth2.auth import ClientAuth
from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from tornado import httpclient

from ..errors import Refused
from .issuers import Issuer

log = logging.getLogger(__name__)

KEEP = 3600  # seconds a discovery document or key set is kept
REFRESH_SECONDS = 60  # between two fetches of the keys for an unknown key id
LEEWAY = 60  # seconds of clock difference allowed on exp and iat
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"]
MAX_ANSWER = 1 << 20  # bytes of a provider's answer read


class ProviderUnavailable(Refused):
    """The provider did not answer (in time, or sensibly)."""

    def __init__(self, issuer: Issuer, password_form: bool) -> None:
        super().__init__(503, "provider_unavailable",
                         f"{issuer.name} is not answering right now, so you cannot sign in with it. "
                         "Try again in a few minutes"
                         + (", or sign in with your username and password." if password_form else "."),
                         retry_after=30)


class TokenRefused(Refused):
    """The provider's answer is not one we may accept (what was wrong is logged)."""

    def __init__(self, issuer: Issuer) -> None:
        super().__init__(403, "token_refused",
                         f"The answer from {issuer.name} could not be trusted, so you are not signed in. "
                         "Start again from the sign-in page; if it happens again, tell your teacher.")


class Provider:
    def __init__(self, issuer: Issuer, timeout: float, password_form: bool) -> None:
        self.issuer = issuer
        self.timeout = timeout
        self.password_form = password_form  # said when the provider is not answering
        self._metadata: dict[str, Any] | None = None
        self._metadata_at = 0.0
        self._keys: KeySet | None = None
        self._keys_at = 0.0
        self._refreshed_at = -float(REFRESH_SECONDS)  # the last fetch for an unknown key id
        self._http: httpclient.AsyncHTTPClient | None = None
        self._lock = asyncio.Lock()  # one fetch at a time: a class signing in at once asks once

    async def _get_json(self, url: str, **kw: Any) -> Any:
        if self._http is None:  # made on the worker's IOLoop, at first use
            self._http = httpclient.AsyncHTTPClient(force_instance=True, max_body_size=MAX_ANSWER)
        try:
            response = await self._http.fetch(url, connect_timeout=self.timeout, request_timeout=self.timeout,
                                              raise_error=False, follow_redirects=False, **kw)
        except (OSError, httpclient.HTTPClientError) as e:  # refused, no such host, TLS, the deadline (599)
            log.warning("%s: %s failed: %s", self.issuer.id, url, e)
            raise self._unavailable() from None
        if response.code >= 500:
            log.warning("%s: %s answered %s %s", self.issuer.id, url, response.code, response.error)
            raise self._unavailable()
        try:
            value = json.loads(response.body or b"")
        except ValueError:
            value = None
        if response.code != 200 or not isinstance(value, dict):
            log.warning("%s: %s answered %s: %.300r", self.issuer.id, url, response.code, response.body)
            raise (TokenRefused(self.issuer) if kw.get("method") == "POST" else self._unavailable())
        return value

    def _unavailable(self) -> ProviderUnavailable:
        return ProviderUnavailable(self.issuer, self.password_form)

    async def metadata(self) -> dict[str, Any]:
        """The discovery document (kept for an hour)."""
        if self._metadata is not None and time.monotonic() - self._metadata_at < KEEP:
            return self._metadata
        async with self._lock:
            if self._metadata is None or time.monotonic() - self._metadata_at >= KEEP:
                found = await self._get_json(self.issuer.url + "/.well-known/openid-configuration")
                wanted = ("issuer", "authorization_endpoint", "token_endpoint", "jwks_uri")
                if not all(isinstance(found.get(k), str) for k in wanted) \
                        or found["issuer"].rstrip("/") != self.issuer.url:
                    log.warning("%s: the discovery document names issuer %r or lacks endpoints",
                                self.issuer.id, found.get("issuer"))
                    raise self._unavailable()
                self._metadata, self._metadata_at = found, time.monotonic()
        assert self._metadata is not None
        return self._metadata

    async def keys(self, refresh: bool = False) -> KeySet:
        """The provider's signing keys; `refresh`: a token named a key id
        they lack, fetch them again (unless that was done a moment ago)."""
        if self._keys is not None and not self._stale(refresh):
            return self._keys
        metadata = await self.metadata()
        async with self._lock:
            if self._keys is None or self._stale(refresh):
                if refresh:
                    self._refreshed_at = time.monotonic()
                found = await self._get_json(metadata["jwks_uri"])
                try:
                    self._keys = KeySet.import_key_set(found)
                except (JoseError, ValueError, TypeError, KeyError) as e:
                    log.warning("%s: its key set is not usable: %s", self.issuer.id, e)
                    raise self._unavailable() from None
                self._keys_at = time.monotonic()
        assert self._keys is not None
        return self._keys

    def _stale(self, refresh: bool) -> bool:
        now = time.monotonic()
        return now - self._keys_at >= KEEP or (refresh and now - self._refreshed_at >= REFRESH_SECONDS)

    async def exchange(self, code: str, redirect_uri: str, verifier: str) -> dict[str, Any]:
        """The token endpoint's answer to the authorization code (with PKCE's verifier)."""
        metadata = await self.metadata()
        body = urlencode({"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
                          "code_verifier": verifier})
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
        auth = ClientAuth(self.issuer.client_id, self.issuer.client_secret, "client_secret_basic")
        url, headers, body = auth.prepare("POST", metadata["token_endpoint"], headers, body)
        answer = await self._get_json(url, method="POST", headers=headers, body=body)
        if not isinstance(answer.get("id_token"), str):
            log.warning("%s: the token endpoint gave no ID token", self.issuer.id)
            raise TokenRefused(self.issuer)
        return answer

    async def verify(self, id_token: str, nonce: str) -> dict[str, Any]:
        """The claims of an ID token whose signature, issuer, audience,
        times and nonce are right; TokenRefused otherwise (why is logged)."""
        metadata = await self.metadata()
        try:
            header = jws.extract_compact(id_token.encode()).headers()
        except (JoseError, ValueError) as e:
            return self._refuse(f"not a signed token: {e}")
        keys = await self.keys()
        if header.get("kid") and not _has_kid(keys, header["kid"]):
            keys = await self.keys(refresh=True)  # a rotated key, maybe
        try:
            token = jwt.decode(id_token, keys, algorithms=ALGORITHMS)
        except (JoseError, ValueError) as e:
            return self._refuse(f"signature not verified: {e}")
        claims = token.claims
        registry = jwt.JWTClaimsRegistry(
            leeway=LEEWAY, iss={"essential": True, "value": metadata["issuer"]},
            aud={"essential": True, "value": self.issuer.client_id}, exp={"essential": True},
            iat={"essential": True}, sub={"essential": True}, nonce={"essential": True, "value": nonce})
        try:
            registry.validate(claims)
        except JoseError as e:
            return self._refuse(f"claims refused: {e}")
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        # OpenID Connect Core 3.1.3.7: with several audiences, azp names us.
        if len(audiences) > 1 and claims.get("azp") != self.issuer.client_id:
            return self._refuse("several audiences and azp is not our client id")
        if not isinstance(claims["sub"], str) or len(claims["sub"]) > 255:
            return self._refuse("sub is not text of at most 255 characters")
        return claims

    def _refuse(self, why: str) -> Any:
        log.warning("%s: ID token refused: %s", self.issuer.id, why)
        raise TokenRefused(self.issuer)


def _has_kid(keys: KeySet, kid: str) -> bool:
    return any(key.kid == kid for key in keys.keys)
