"""The addresses of a school sign-in, both followed by a person's browser:

- GET /signin/<issuer>?next=<page>: the button's link; off to the provider.
- GET /signin/callback: the provider sends the browser back here; on to the
  user's page with a session cookie, as after a password.

A refusal shows the sign-in page with the sentence that says what happened
(the password form still there). The flow's state also goes into a cookie
of its own, so a return to another browser is refused. Each handler
translates HTTP and calls the SignIn service (service.py).
"""
from .. import metrics
from ..accounts import devices, rules
from ..accounts.handlers import set_device_cookie
from ..errors import Refused
from ..pages import LoginPage
from ..web import ApiError, ApiHandler, is_https, set_session_cookie

FLOW_COOKIE = "pyclassroom_signin"
CALLBACK = "/signin/callback"


class SignInPage(LoginPage):
    """The sign-in page, showing a refusal's sentence with its status."""

    def refused(self, refusal: Refused) -> None:
        self.set_status(refusal.status)
        self.notice = refusal.message
        self.clear_cookie(FLOW_COOKIE, path="/signin")
        super().get()

    def redirect_uri(self) -> str:
        """Where the provider sends the browser back: PUBLIC_URL's host when
        an admin set it (the address registered with the provider), else
        the one this request came to."""
        cfg = self.ctx.cfg
        if cfg.PUBLIC_URL and not cfg.PUBLIC_URL_GUESSED:
            return cfg.PUBLIC_URL + CALLBACK
        scheme = "https" if is_https(self) else "http"
        return f"{scheme}://{self.request.host}{CALLBACK}"


class StartHandler(SignInPage):
    async def get(self, issuer_id):
        try:
            url, state = await self.ctx.signin.start(issuer_id, self.redirect_uri(), self.get_argument("next", ""),
                                                     self.client_address())
        except Refused as e:
            return self.refused(e)
        # Lax: sent with the provider's redirect back (a top-level GET).
        self.set_signed_cookie(FLOW_COOKIE, state, expires_days=None, path="/signin", httponly=True,
                               samesite="Lax", secure=is_https(self))
        self.redirect(url)


class CallbackHandler(SignInPage):
    async def get(self):
        params = {k: self.get_argument(k, "")[:4096] for k in ("code", "state", "error")}
        state = self.get_signed_cookie(FLOW_COOKIE, max_age_days=1)
        try:
            user, token, expires, device, page = await self.ctx.signin.finish(
                params, state.decode() if state else None, self.client_address(), self.get_cookie(devices.COOKIE))
        except Refused as e:
            metrics.LOGINS.labels(e.code).inc()
            return self.refused(e)
        metrics.LOGINS.labels("ok").inc()
        await self.ctx.files.prepare_home(user)  # as a password sign-in does (handlers of accounts)
        self.clear_cookie(FLOW_COOKIE, path="/signin")
        set_session_cookie(self, token, expires)
        set_device_cookie(self, device)
        self.redirect(page)


class BindingHandler(ApiHandler):
    """DELETE /api/admin/users/<username>/school/<issuer>: unbind (admins)."""

    async def delete(self, username: str, issuer_id: str) -> None:
        admin = await self.require_user("admin")
        if rules.username_problem(username):
            raise ApiError(404, "not_bound", "There is no such account.")
        await self.ctx.signin.unbind(admin["username"], username, issuer_id)
        self.finish_json({"username": username, "unbound": issuer_id})
