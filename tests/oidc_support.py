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
import json
import os
import selectors
import shutil
import subprocess
import tempfile
import threading
import uuid

import pytest

from loadtest.harness import Stoppable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, "tests", "oidc_provider")
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pyclassroom")
BUILD_TIMEOUT = 900  # a fresh machine downloads the modules first
START_TIMEOUT = 30
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
