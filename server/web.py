"""What every handler shares: JSON errors, bounded JSON bodies, the session
cookie, XSRF, roles, and the headers every response carries.

Handlers stay thin: parse (`json_body`, `field`), authorize (`require_user`),
call a service, answer (`write_json`). Anything that goes wrong becomes
`{"error": code, "message": sentence}` with the right status, and no stack
trace ever reaches a client.
"""
import json
import logging
import os
import time
from asyncio import Future
from typing import TYPE_CHECKING, Any

from tornado import web
from tornado.web import OutputTransform

from . import timing
from .errors import Refused
from .executor import Busy
from .fifo import Full

if TYPE_CHECKING:  # the worker imports the handlers (through app.py)
    from .worker import Context

log = logging.getLogger(__name__)

SESSION_COOKIE = "pyclassroom_session"
UNLIMITED = 1 << 62


class ApiError(web.HTTPError):
    """An answer `{"error": code, "message": message, **extra}` with `status`."""

    def __init__(self, status: int, code: str, message: str, retry_after: float | None = None,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(status, log_message=code)
        self.code, self.message, self.retry_after, self.extra = code, message, retry_after, extra


STATUS_CODES = {400: "bad_request", 401: "not_logged_in", 403: "forbidden", 404: "not_found",
                405: "method_not_allowed", 413: "body_too_large", 415: "unsupported_media_type",
                429: "too_many_requests", 503: "unavailable"}


def expected_error(exc):
    """The ApiError that `exc` is answered with when it is an expected
    outcome (a refusal, a full executor, the database unavailable), else None."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, Refused):  # db.DatabaseUnavailable among them
        return ApiError(exc.status, exc.code, exc.message, exc.retry_after, exc.extra)
    if isinstance(exc, (Busy, Full)):
        return ApiError(503, "server_busy", "The server is busy. Try again in a moment.", retry_after=1)
    return None


def has_lone_surrogate(value: Any) -> bool:
    """Whether any string of a parsed JSON value, keys included, holds a
    lone surrogate. Walks without recursion: the value may be deep."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


class WorkerHeaders(OutputTransform):
    """Adds X-Worker-Pid (and Server-Timing) to every response, whichever
    handler wrote it, so tests and operators can see which process answered."""

    def __init__(self, request):
        self.request = request

    def transform_first_chunk(self, status_code, headers, chunk, finishing):
        headers["X-Worker-Pid"] = str(os.getpid())
        return status_code, headers, chunk


@web.stream_request_body
class BaseHandler(web.RequestHandler):
    """Base of every handler. Bodies are streamed so that an oversized one is
    refused with 413 from its Content-Length, before it is read."""

    @property
    def max_body(self) -> int | None:
        """Bytes of body accepted; None means the MAX_BODY_BYTES setting."""
        return None

    # Waits for its turn in the worker's line of requests (ctx.requests):
    # under overload requests are served in the order they came, and
    # beyond the line's length refused with 503 + Retry-After. Health
    # probes do not wait: a load balancer must see the worker alive.
    takes_turn = True

    @property
    def ctx(self) -> "Context":
        ctx: Context = self.application.settings["ctx"]
        return ctx

    def initialize(self):
        self._started = time.perf_counter()
        self.timing = {}
        self._body = bytearray()
        self._body_refused = False
        self.session_token = None
        self._turn = False  # holds a place in ctx.requests
        self._gone = False  # the client closed the connection
        # Counted until finished, so a draining worker knows what is in flight.
        self.ctx.inflight += 1
        self._in_flight = True

    def _done(self):
        if self._in_flight:
            self._in_flight = False
            self.ctx.inflight -= 1
        self._give_back_turn()

    async def _take_turn(self):
        """Wait for this request's turn (Server-Timing `wait`); Full (a 503)
        when the line is full. The body is read only after: a waiting
        request holds no memory of it."""
        started = time.perf_counter()
        try:
            await self.ctx.requests.acquire()
        finally:
            timing.add("wait", time.perf_counter() - started)
        self._turn = True
        if self._gone:  # the client left while waiting: pass the turn on at once
            self._give_back_turn()

    def _give_back_turn(self):
        if self._turn:
            self._turn = False
            self.ctx.requests.release()

    def finish(self, chunk: str | bytes | dict[str, Any] | None = None) -> "Future[None]":
        if not self._headers_written:
            self.set_header("Server-Timing", timing.header(self.timing, time.perf_counter() - self._started))
        return super().finish(chunk)

    def on_finish(self):
        self._done()

    def on_connection_close(self):
        self._gone = True
        self._done()
        super().on_connection_close()  # ends a request still waiting for its body

    def _too_large(self) -> tuple[int, ApiError]:
        limit = self.max_body or self.ctx.cfg.MAX_BODY_BYTES
        return limit, ApiError(413, "body_too_large", f"The request body is larger than {limit} bytes.")

    async def prepare(self):
        timing.current.set(self.timing)  # this request's task and what it awaits add to it
        limit, too_large = self._too_large()
        length = self.request.headers.get("Content-Length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            raise too_large
        if self.takes_turn:
            await self._take_turn()
        # Our limit, not Tornado's, refuses a chunked body (data_received):
        # Tornado's would answer a bare-text 400.
        self.request.connection.set_max_body_size(UNLIMITED)
        if self.ctx.draining:
            self.set_header("Connection", "close")
        self._prepared = True  # from here on Tornado reads the body

    def data_received(self, chunk):
        if self._body_refused:
            return
        limit, too_large = self._too_large()
        if len(self._body) + len(chunk) > limit:
            # Answer at once: Tornado then passes the rest of the body
            # nowhere and closes the connection once the answer is sent.
            self._body_refused = True
            self._body = bytearray()
            self.send_error(413, exc_info=(ApiError, too_large, None))
            return
        self._body += chunk

    # -- errors ---------------------------------------------------------

    def write_error(self, status_code, **kwargs):
        exc = kwargs.get("exc_info", (None, None))[1]
        expected = expected_error(exc)
        extra = {}
        if expected is not None:
            self.set_status(expected.status_code)
            code, message, extra = expected.code, expected.message, expected.extra or {}
            if expected.retry_after:
                self.set_header("Retry-After", str(expected.retry_after))
        elif isinstance(exc, web.HTTPError) and status_code < 500:
            code = STATUS_CODES.get(status_code, "bad_request")
            message = exc.log_message % exc.args if exc.log_message else self._reason
        else:
            code, message = "internal_error", "Something went wrong on the server. It has been logged."
        if not getattr(self, "_prepared", False) or self._body_refused:
            # Refused before the body was read: Tornado will drop the
            # connection, so tell the client not to reuse it.
            self.set_header("Connection", "close")
        self.clear_header("Content-Type")
        self.finish_json({"error": code, "message": message, **extra})

    def log_exception(self, typ, value, tb):
        # Refusals, a full executor and a database outage are expected
        # outcomes: the access log has the request, the pool logs an outage
        # once. Anything else is a bug and keeps its traceback.
        if expected_error(value) is None:
            super().log_exception(typ, value, tb)

    def check_xsrf_cookie(self):
        token = self.request.headers.get("X-Xsrftoken") or self.request.headers.get("X-Csrftoken")
        if not token:
            raise ApiError(403, "xsrf_missing",
                           "This request needs the X-XSRFToken header (copy the _xsrf cookie).")
        try:
            super().check_xsrf_cookie()
        except web.HTTPError:
            raise ApiError(403, "xsrf_invalid",
                           "The X-XSRFToken header does not match the _xsrf cookie.") from None

    # -- JSON in and out ----------------------------------------------

    def finish_json(self, value: object, status: int | None = None) -> None:
        if status:
            self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(value, default=str))

    def json_body(self) -> dict[str, Any]:
        ctype = self.request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if ctype != "application/json":
            raise ApiError(415, "unsupported_media_type", "Send the body as application/json.")
        try:
            value = json.loads(bytes(self._body).decode("utf-8"))
        except (UnicodeDecodeError, ValueError):  # huge numbers too: int digits are bounded
            raise ApiError(400, "malformed_json", "The body is not valid JSON.") from None
        except RecursionError:
            raise ApiError(400, "malformed_json", "The body is nested too deeply.") from None
        if not isinstance(value, dict):
            raise ApiError(400, "malformed_json", "The body must be a JSON object.")
        if has_lone_surrogate(value):
            # JSON may spell one ("\ud800"); it is no character, and neither
            # PostgreSQL nor the file system nor argon2 can take it.
            raise ApiError(400, "malformed_json", "The body holds text that is not valid Unicode "
                                                  "(a lone surrogate).")
        return value

    @staticmethod
    def field(body: dict[str, Any], name: str, kind: type = str, max_len: int | None = None, required: bool = True,
              default: Any = None) -> Any:
        if name not in body or body[name] is None:
            if required:
                raise ApiError(400, "missing_field", f"The field '{name}' is required.")
            return default
        value = body[name]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ApiError(400, "wrong_type", f"The field '{name}' must be {kind.__name__}.")
        if max_len is not None and len(body[name]) > max_len:
            raise ApiError(400, "too_long", f"The field '{name}' is longer than {max_len}.")
        return value

    # -- who is asking --------------------------------------------------

    async def load_user(self) -> dict[str, Any] | None:
        """Resolve the session cookie; returns the user dict or None and
        remembers why not in `self.session_problem`."""
        user, self.session_problem, self.session_token = await user_for_session(self)
        self.current_user = user
        return user

    async def require_user(self, *roles: str) -> dict[str, Any]:
        user = self.current_user or await self.load_user()
        if user is None:
            messages = {"session_expired": "Your session has expired. Log in again.",
                        "session_invalid": "Your session has ended. Log in again.",
                        "not_logged_in": "Log in first."}
            problem = self.session_problem or "not_logged_in"  # (load_user says why whenever there is no user)
            raise ApiError(401, problem, messages[problem])
        if roles and user["role"] not in roles:
            raise ApiError(403, "forbidden", "Your account may not do this.")
        return user

    def client_address(self) -> str:
        return client_address(self)


async def user_for_session(handler: web.RequestHandler) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """(user dict or None, why not, token) for the session cookie of any
    handler (HTTP or WebSocket); renews the cookie when the session slid."""
    cookie = handler.get_signed_cookie(SESSION_COOKIE, max_age_days=31)
    if not cookie:
        return None, "not_logged_in", None
    token = cookie.decode()
    found = await handler.application.settings["ctx"].sessions.user_for_token(token)
    if found.user is None:
        handler.clear_cookie(SESSION_COOKIE)
        return None, found.problem, None
    if found.renewed_until:
        set_session_cookie(handler, token, found.renewed_until)
    return found.user, None, token


def set_session_cookie(handler, token, expires):
    handler.set_signed_cookie(SESSION_COOKIE, token, expires_days=None, expires=expires, httponly=True,
                              samesite="Lax", secure=is_https(handler))


def _last_forwarded(handler: web.RequestHandler, name: str) -> str:
    """The last entry of a proxy header: the one our own proxy added (the
    ones before it are whatever the client sent)."""
    value = handler.request.headers.get(name, "")
    return value.split(",")[-1].strip() if value else ""


def client_address(handler: web.RequestHandler) -> str:
    """The client's address; behind a trusted proxy (TRUST_PROXY), the one
    it saw. Only X-Forwarded-For's last entry counts: X-Real-Ip and earlier
    entries come from the client and would let it pick the address its
    failed logins are counted against."""
    if handler.application.settings["ctx"].cfg.TRUST_PROXY:
        forwarded = _last_forwarded(handler, "X-Forwarded-For")
        if forwarded:
            return forwarded
    return handler.request.remote_ip or ""


def is_https(handler: web.RequestHandler) -> bool:
    if handler.application.settings["ctx"].cfg.TRUST_PROXY:
        proto = _last_forwarded(handler, "X-Forwarded-Proto")
        if proto:
            return proto == "https"
    return handler.request.protocol == "https"


class ApiHandler(BaseHandler):
    """Base of /api/ handlers: any GET sets the XSRF cookie when it is missing."""

    async def prepare(self):
        await super().prepare()
        if self.request.method == "GET" and not self.get_cookie("_xsrf"):
            self.xsrf_token  # noqa: B018 - reading it sets the cookie


class NotFoundHandler(BaseHandler):
    def prepare(self):
        raise ApiError(404, "not_found", f"There is nothing at {self.request.path}.")
