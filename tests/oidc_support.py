"""A real OpenID provider for the sign-in tests: tests/oidc_provider/ (a
small Go program over zitadel/oidc's example provider), built once from
the Go module proxy into a cache folder named after its sources' hash and
reused by every later run, then started on a loopback port with the
clients and users a test gives it.

`oidc_provider` (session-scoped) is one provider for the whole run; a
test adds people of its own with `provider.person(...)` (unique ids, so
tests sharing it never meet). `OIDC_CLIENT` is the client every server
under test is registered as.
"""
import contextlib
import fcntl
import hashlib
import html
import json
import os
import re
import selectors
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urljoin

import pytest
import requests
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from loadtest.harness import Stoppable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, "tests", "oidc_provider")
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pyclassroom")
BUILD_TIMEOUT = 900  # a fresh machine downloads the modules first
START_TIMEOUT = 30
HTTP_TIMEOUT = 30  # a hang guard for the tests' own requests, not a timing
OIDC_CLIENT = {"id": "pyclassroom", "secret": "test-client-secret-" + "x" * 16,
               "redirect_globs": ["http://127.0.0.1:*/signin/callback"]}
PASSWORD = "provider-password"


def go():
    """The Go toolchain: on PATH, or where its tarball installs it."""
    found = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
    if found is None:
        pytest.fail("no Go toolchain (go on PATH or /usr/local/go/bin/go): the sign-in tests build their "
                    "OpenID provider with it (scripts/install-system-deps installs golang-go)")
    return found


def provider_binary():
    """The provider's binary, built if this version of its sources has none
    yet (one build at a time across test processes: the others wait and reuse it)."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "main.go"):
        with open(os.path.join(SOURCE, name), "rb") as f:
            digest.update(name.encode() + b"\0" + f.read())
    folder = os.path.join(CACHE, "oidc-provider-" + digest.hexdigest()[:16])
    binary = os.path.join(folder, "oidc_provider")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "build.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(binary):
            building = binary + ".building"
            # GOFLAGS, GOPROXY and the module cache: as the machine has them.
            done = subprocess.run([go(), "build", "-o", building, "."], cwd=SOURCE, capture_output=True,
                                  text=True, timeout=BUILD_TIMEOUT)
            if done.returncode != 0:
                pytest.fail(f"building tests/oidc_provider failed:\n{done.stdout}{done.stderr}")
            os.replace(building, binary)
    return binary


class Provider(Stoppable):
    """One running provider: its `issuer` address, and people to sign in as."""

    def __init__(self, clients=(OIDC_CLIENT,)):
        self.folder = tempfile.mkdtemp(prefix="pyclassroom-oidc-")
        self.config_path = os.path.join(self.folder, "provider.json")
        self.config = {"clients": list(clients), "users": []}
        self._lock = threading.Lock()
        self._write()
        self.log = open(os.path.join(self.folder, "provider.log"), "w")
        self.proc = subprocess.Popen([provider_binary(), "-config", self.config_path], stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, start_new_session=True)
        self.issuer = self._issuer_line()

    def _issuer_line(self):
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(START_TIMEOUT):
                self.stop()
                pytest.fail("the OpenID provider did not start:\n" + self.output())
        line = self.proc.stdout.readline()
        if not line.startswith("issuer "):
            self.stop()
            pytest.fail(f"the OpenID provider said {line!r}:\n" + self.output())
        return line.split()[1]

    def output(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()[-4000:]

    def _write(self):
        # Written whole, then renamed: the provider reads it at every look-up.
        temporary = self.config_path + ".new"
        with open(temporary, "w") as f:
            json.dump(self.config, f)
        os.replace(temporary, self.config_path)

    def person(self, name, email=None, verified=True, groups=(), domain="school.test"):
        """A new person at this provider: their login name (the password is
        PASSWORD). `email`: their address (default name-<unique>@domain)."""
        unique = uuid.uuid4().hex[:8]
        login = f"{name}-{unique}"
        with self._lock:
            self.config["users"].append({
                "id": "sub-" + unique, "username": login, "password": PASSWORD, "given_name": name.title(),
                "family_name": "Tester", "email": email or f"{login}@{domain}", "email_verified": verified,
                "groups": list(groups)})
            self._write()
        return login

    def change(self, login, **fields):
        """Change a person's claims (e.g. email=...) from their next sign-in on."""
        with self._lock:
            for user in self.config["users"]:
                if user["username"] == login:
                    user.update(fields)
            self._write()

    def close(self):
        self.stop()
        self.log.close()
        shutil.rmtree(self.folder, ignore_errors=True)


@contextlib.contextmanager
def running_provider():
    provider = Provider()
    try:
        yield provider
    finally:
        provider.close()


@pytest.fixture(scope="session")
def oidc_provider():
    """A real OpenID provider for the test run (built once, see provider_binary)."""
    with running_provider() as provider:
        yield provider


@pytest.fixture(scope="session")
def oidc_provider2():
    """A second, separate provider (another issuer, other keys)."""
    with running_provider() as provider:
        yield provider


# -- the sign-in, as a browser without JavaScript goes through it ------------------

def issuer_setting(name, issuer, policy="existing", **more):
    """One entry of OIDC_ISSUERS for a provider of the tests (their client)."""
    return {"name": name, "issuer": issuer, "client_id": OIDC_CLIENT["id"], "client_secret": OIDC_CLIENT["secret"],
            "policy": policy, "domains": ["school.test"], **more}


def to_provider(server, issuer_id, login, browser=None, next_page=None, password=PASSWORD):
    """Start a sign-in at `server` with the issuer `issuer_id` and sign in
    as `login` at its provider: (the browser, a requests.Session with its
    cookies; the address the provider sends it back to, not yet followed)."""
    browser = browser or requests.Session()
    answer = browser.get(f"{server.url}/signin/{issuer_id}", params={"next": next_page} if next_page else None,
                         timeout=HTTP_TIMEOUT)
    found = re.search(r'name="id" value="([^"]+)"', answer.text)
    assert found, f"no provider's sign-in form at {answer.url} ({answer.status_code}): {answer.text[:500]}"
    form = answer.url.split("/login/")[0] + "/login/username"
    answer = browser.post(form, data={"id": html.unescape(found.group(1)), "username": login, "password": password},
                          allow_redirects=False, timeout=HTTP_TIMEOUT)
    assert answer.status_code == 302, answer.text[:500]
    answer = browser.get(urljoin(form, answer.headers["Location"]), allow_redirects=False, timeout=HTTP_TIMEOUT)
    assert answer.status_code == 302 and "/signin/callback?" in answer.headers["Location"], answer.text[:500]
    return browser, answer.headers["Location"]


def back_from_provider(browser, callback):
    """Follow the provider's redirect back: the answer (not followed further)."""
    return browser.get(callback, allow_redirects=False, timeout=HTTP_TIMEOUT)


def notice(answer):
    """The sentence the sign-in page shows for a refused sign-in."""
    found = re.search(r'<p id="notice"[^>]*>([^<]*)</p>', answer.text)
    return html.unescape(found.group(1)) if found else None


def signed_in_as(server, browser):
    """The user /api/me sees for the browser's cookies, or None."""
    answer = browser.get(f"{server.url}/api/me", timeout=HTTP_TIMEOUT)
    return answer.json()["user"] if answer.status_code == 200 else None


# -- an issuer of the tests' own, for the attacks a real provider never makes ----------

class TokenProxy:
    """An issuer in front of a real provider, whose ID tokens a test may
    spoil: a real provider will not sign a token for another audience, an
    expired one or one with another's nonce, and an attacker's would not be
    signed by the provider's key.

    Its discovery document sends the browser to the real provider's sign-in
    (a real person, a real code) and the server's code exchange to itself;
    it passes that on to the real provider, takes the real ID token's
    claims, sets `iss` to its own address, lets `alter` change claims or
    key, and signs the result with its own key, the one its key set
    publishes. Unaltered, its tokens are accepted (a test shows it)."""

    def __init__(self, provider):
        self.real = provider.issuer
        self.key = RSAKey.generate_key(2048, parameters={"kid": "proxy-key", "use": "sig", "alg": "RS256"})
        self.alter = None  # alter(claims) -> (claims, key, kid) for the next token, once
        self.given = []  # every ID token handed out, for replays
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, value, status=200):
                body = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path == "/.well-known/openid-configuration":
                    return self.answer({"issuer": proxy.issuer, "authorization_endpoint": proxy.real + "auth",
                                        "token_endpoint": proxy.issuer + "/token", "jwks_uri": proxy.issuer + "/keys"})
                if self.path == "/keys":
                    return self.answer({"keys": [proxy.key.as_dict(private=False)]})
                self.answer({"error": "not_found"}, 404)

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                real = requests.post(proxy.real + "oauth/token", data=body, timeout=HTTP_TIMEOUT, headers={
                    "Authorization": self.headers["Authorization"], "Content-Type": self.headers["Content-Type"]})
                tokens = real.json()
                if real.status_code == 200:
                    tokens["id_token"] = proxy.reissue(tokens["id_token"])
                self.answer(tokens, real.status_code)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reissue(self, id_token):
        real_keys = KeySet.import_key_set(requests.get(self.real + "keys", timeout=HTTP_TIMEOUT).json())
        claims = {**jwt.decode(id_token, real_keys).claims, "iss": self.issuer}
        key, kid = self.key, self.key.kid
        alter, self.alter = self.alter, None
        if alter:
            claims, key, kid = alter(claims, key, kid)
        token = claims if isinstance(claims, str) else jwt.encode({"alg": "RS256", "kid": kid}, claims, key)
        self.given.append(token)
        return token

    def rotate(self):
        """A new signing key under a new key id, the only one published from now on."""
        self.key = RSAKey.generate_key(2048, parameters={"kid": f"proxy-key-{uuid.uuid4().hex[:8]}", "use": "sig",
                                                         "alg": "RS256"})

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def other_key(claims, key, kid):
    """Signed by a key that is not the issuer's, under the issuer's key id."""
    return claims, RSAKey.generate_key(2048), kid


def unknown_key(claims, key, kid):
    """Signed by a key the issuer never published, under a new key id."""
    return claims, RSAKey.generate_key(2048), "rotated-key"


def other_audience(claims, key, kid):
    return {**claims, "aud": ["another-app"], "azp": "another-app"}, key, kid


def expired(claims, key, kid):
    now = int(time.time())
    return {**claims, "iat": now - 7200, "exp": now - 3600}, key, kid


@contextlib.contextmanager
def dead_ends():
    """(the address of a provider that is down, of one that never answers)."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        down = closed.getsockname()[1]
    with socket.socket() as silent:  # connections are made (the backlog), never answered
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        yield f"http://127.0.0.1:{down}", f"http://127.0.0.1:{silent.getsockname()[1]}"
