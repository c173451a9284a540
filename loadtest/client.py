"""Speaking HTTP to the server the way the browser does: a session cookie,
the XSRF cookie echoed in a header, every answer checked.

- `Client`: one browser for the tests, synchronous (requests).
- `VirtualUser`: one browser for the load generator (aiohttp): its own
  cookie jar and one keep-alive connection, so N users are N connections.
- `Student`: a student editing one file through a VirtualUser: saves with
  If-Match and loads, each answer verified.
- checks (`check_status`, `check_login_answer`, `CheckFailed`, `error_kind`):
  an answer that is not the expected one, status AND body, is an error of
  a named kind, never a success: a fast 401 must not make the server look fast.

The WebSocket for runs is `run_client.RunClient`.
"""
import asyncio
import contextlib
import json
import os
import random
from collections import Counter

import aiohttp
import requests

from server.files.store import etag_of

from .cli import REQUEST_TIMEOUT

SESSION_COOKIE = "pyclassroom_session"  # as in server/web.py
# Logins at once while setting up: each costs the server one argon2 hash, and
# its hash queue refuses (503) beyond 512 waiting per worker.
LOGIN_CONCURRENCY = 32
FILE_BYTES = (2048, 4096)  # size range of each file a Student saves


# -- the tests' browser ----------------------------------------------------------------

class Client:
    """A browser-like API client: keeps cookies, echoes the XSRF cookie."""

    def __init__(self, url):
        self.url = url
        self.http = requests.Session()

    def xsrf(self):
        if "_xsrf" not in self.http.cookies:
            self.http.get(self.url + "/api/me", timeout=10)
        return self.http.cookies.get("_xsrf")

    def request(self, method, path, xsrf=True, **kwargs):
        headers = kwargs.pop("headers", {})
        if xsrf and method not in ("GET", "HEAD"):
            headers.setdefault("X-XSRFToken", self.xsrf())
        kwargs.setdefault("timeout", 30)
        return self.http.request(method, self.url + path, headers=headers, **kwargs)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)

    def login(self, username, password):
        return self.post("/api/login", json={"username": username, "password": password})

    def login_ok(self, username, password):
        r = self.login(username, password)
        assert r.status_code == 200, r.text
        return r.json()


# -- checks ----------------------------------------------------------------------------

class CheckFailed(Exception):
    """An answer was not the expected one; `kind` names how (e.g. http_401)."""

    def __init__(self, kind, detail=""):
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind


def error_kind(exc):
    """The error-kind name of an exception raised by an operation."""
    if isinstance(exc, CheckFailed):
        return exc.kind
    # Before OSError: TimeoutError is an OSError, and aiohttp's timeouts are
    # TimeoutErrors.
    if isinstance(exc, asyncio.TimeoutError):
        return "timeout"
    if isinstance(exc, (aiohttp.ClientConnectionError, OSError)):
        return "connection"
    if isinstance(exc, aiohttp.ClientError):
        return "client_error"
    return "exception_" + type(exc).__name__


def check_status(status, expected=200):
    if status != expected:
        raise CheckFailed(f"http_{status}")


def check_login_answer(status, body, username, session_cookie):
    """A login succeeded only if the server said 200, named the user we sent,
    and set the session cookie."""
    check_status(status, 200)
    try:
        answered = json.loads(body)["user"]["username"]
    except (ValueError, KeyError, TypeError):
        raise CheckFailed("bad_body", repr(body[:200])) from None
    if answered != username:
        raise CheckFailed("wrong_user", f"sent {username!r}, answer names {answered!r}")
    if not session_cookie:
        raise CheckFailed("no_session_cookie")


def json_object(body):
    """A JSON object answer, or CheckFailed("bad_body")."""
    try:
        answer = json.loads(body)
    except ValueError:
        raise CheckFailed("bad_body", repr(body[:200])) from None
    if not isinstance(answer, dict):
        raise CheckFailed("bad_body", repr(body[:200]))
    return answer


def worker_pid(resp):
    value = resp.headers.get("X-Worker-Pid", "")
    return int(value) if value.isdigit() else None


# -- the load generator's browser ------------------------------------------------------

class VirtualUser:
    """One browser: its own cookie jar and one keep-alive TCP connection
    (limit=1), so N users are N connections, as N students' browsers are.
    Use as `async with VirtualUser(url) as user:`."""

    def __init__(self, base_url, timeout=REQUEST_TIMEOUT, on_response=None):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.on_response = on_response  # called with every response (aiohttp's), e.g. to read Server-Timing
        self.http = None
        self.xsrf = None
        self.username = None
        self.logged_in = False

    async def __aenter__(self):
        self.http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=1, force_close=False),
            # unsafe=True: keep cookies of an IP-address host such as
            # 127.0.0.1, which aiohttp's jar otherwise drops silently.
            cookie_jar=aiohttp.CookieJar(unsafe=True),
            timeout=aiohttp.ClientTimeout(total=self.timeout),
            trace_configs=[response_trace(self.on_response)] if self.on_response else None)
        return self

    async def __aexit__(self, *exc):
        await self.http.close()

    async def request(self, method, path, body=None):
        """(response, body bytes). The body is read in full, so a latency
        includes it. Non-GET requests carry the XSRF header, as the page's
        JavaScript does."""
        headers = {"X-XSRFToken": self.xsrf} if method != "GET" and self.xsrf else {}
        async with self.http.request(method, self.base_url + path, json=body, headers=headers) as resp:
            return resp, await resp.read()

    async def fetch_xsrf(self):
        """What loading the login page does: GET /api/me (401 when logged
        out) hands out the _xsrf cookie."""
        resp, _ = await self.request("GET", "/api/me")
        if resp.status not in (200, 401):
            raise CheckFailed(f"http_{resp.status}")
        morsel = resp.cookies.get("_xsrf")
        if morsel is None or not morsel.value:
            raise CheckFailed("no_xsrf_cookie")
        self.xsrf = morsel.value

    async def login(self, username, password):
        """Log in; returns the answering worker's pid (None if not said)."""
        resp, body = await self.request("POST", "/api/login", {"username": username, "password": password})
        cookie = resp.cookies.get(SESSION_COOKIE)
        check_login_answer(resp.status, body, username, cookie is not None and cookie.value)
        self.username, self.logged_in = username, True
        return worker_pid(resp)

    async def sign_in(self, username, password):
        """The login page, then the login: what a student arriving does."""
        await self.fetch_xsrf()
        return await self.login(username, password)

    async def logout(self):
        resp, _ = await self.request("POST", "/api/logout", {})
        check_status(resp.status, 200)
        self.logged_in = False

    def cookies(self):
        """{name: value} exactly as the server set them (coded: the session
        cookie is quoted), for a WebSocket that sends them itself."""
        return {m.key: m.coded_value for m in self.http.cookie_jar}

    async def put_file(self, path, text, if_match="*", area="home"):
        """Save `text` as `path` in the user's home, or `area` (If-Match: *
        creates or replaces); returns (response, body)."""
        headers = {"X-XSRFToken": self.xsrf}
        if if_match:
            headers["If-Match"] = if_match
        async with self.http.put(f"{self.base_url}/api/files/{area}/{path}", data=text.encode(),
                                 headers=headers) as resp:
            return resp, await resp.read()


def response_trace(callback):
    """An aiohttp TraceConfig that calls `callback(response)` for every
    response a session receives (method, url, status and headers are
    there), whoever made the request."""
    trace = aiohttp.TraceConfig()

    async def on_request_end(session, context, params):
        callback(params.response)

    trace.on_request_end.append(on_request_end)
    return trace


async def log_in_all(make_user, credentials, stack, concurrency=LOGIN_CONCURRENCY):
    """Sign in every (username, password, ...) of `credentials`, each in a
    new `make_user()` entered on `stack`, `concurrency` at a time (each is
    an argon2 hash on the server). Returns (the users who got in, in
    order; Counter of the failures' kinds)."""
    gate = asyncio.Semaphore(concurrency)

    async def one(username, password):
        user = await stack.enter_async_context(make_user())
        async with gate:
            await user.sign_in(username, password)
        return user

    users, failed = [], Counter()
    for outcome in await asyncio.gather(*(one(c[0], c[1]) for c in credentials), return_exceptions=True):
        if isinstance(outcome, Exception):
            failed[error_kind(outcome)] += 1
        else:
            users.append(outcome)
    return users, failed


async def save_file(user, path, text):
    """Create or replace `path` in the user's home; CheckFailed unless 200."""
    resp, _ = await user.put_file(path, text)
    check_status(resp.status, 200)


# -- a student editing a file ----------------------------------------------------------

def file_text(owner, number):
    """The text of `owner`'s save number `number`: FILE_BYTES long, fresh
    random characters each time (so no answer can come from a cache)."""
    header = f"# {owner}, save {number}\n"
    size = random.randint(*FILE_BYTES)
    return header + os.urandom(size // 2).hex()[:size - len(header)]


class Student:
    """One student editing one file in its own home, through one browser."""

    def __init__(self, user, path, timing=None):
        self.user = user
        self.timing = timing  # a loadgen.ServerTiming that sees each save's answer
        self.username = user.username
        self.url = f"{user.base_url}/api/files/home/{path}"
        self.path = path
        self.etag = None   # of the last acknowledged save; None: the file is new
        self.saved = None  # its text
        self.count = 0

    def new_text(self):
        self.count += 1
        return file_text(self.username, self.count)

    async def save(self):
        """PUT new text; a success is a 200 whose etag is that of our text."""
        text = self.new_text()
        resp, body = await self.user.put_file(self.path, text, f'"{self.etag}"' if self.etag else None)
        if self.timing:
            self.timing.observe(resp.headers)
        check_status(resp.status, 200)
        etag = json_object(body).get("etag")
        if etag != etag_of(text.encode()):
            raise CheckFailed("wrong_etag", f"{etag!r}")
        self.etag, self.saved = etag, text
        return worker_pid(resp)

    async def load(self):
        """GET the file back; a success is exactly what we saved last."""
        async with self.user.http.get(self.url) as resp:
            body = await resp.read()
        check_status(resp.status, 200)
        answer = json_object(body)
        if answer.get("content") != self.saved:
            raise CheckFailed("content_mismatch")
        if answer.get("etag") != self.etag:
            raise CheckFailed("etag_mismatch")
        return worker_pid(resp)

    async def resync(self):
        """After a failure our idea of the file may be stale (a save that
        timed out may still have landed): fetch what the server holds,
        untimed, so that the next save is not a certain 409."""
        with contextlib.suppress(Exception):
            async with self.user.http.get(self.url) as resp:
                body = await resp.read()
            if resp.status == 200:
                answer = json_object(body)
                self.etag, self.saved = answer.get("etag"), answer.get("content")
            elif resp.status == 404:
                self.etag = self.saved = None
