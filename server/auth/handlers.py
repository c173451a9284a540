"""HTTP endpoints of accounts: log in, log out, who am I, change password."""
from .. import metrics
from ..auth import accounts, sessions
from ..errors import Refused
from ..auth.passwords import MAX_LENGTH
from ..runs.sandbox import run_uid
from ..web import SESSION_COOKIE, ApiHandler, set_session_cookie


def public_user(user):
    return {"username": user["username"], "display_name": user["display_name"], "role": user["role"]}


class LoginHandler(ApiHandler):
    async def post(self):
        body = self.json_body()
        username = self.field(body, "username", str, max_len=64)
        password = self.field(body, "password", str, max_len=MAX_LENGTH)
        try:
            user, token, expires = await accounts.login(self.ctx, username, password,
                                                         self.client_address())
        except Refused as e:
            metrics.LOGINS.labels(e.code).inc()
            raise
        metrics.LOGINS.labels("ok").inc()
        await self.ctx.files.run(self.ctx.store.ensure_home, user["username"], user["role"] == "student",
                                 run_uid(self.ctx.cfg, user["id"]))
        set_session_cookie(self, token, expires)
        self.finish_json({"user": public_user(user), "expires": expires.isoformat()})


class LogoutHandler(ApiHandler):
    async def post(self):
        await self.load_user()
        if self.session_token:
            await sessions.delete(self.ctx.pool, self.session_token)
        self.clear_cookie(SESSION_COOKIE)
        self.finish_json({"ok": True})


class MeHandler(ApiHandler):
    async def get(self):
        user = await self.require_user()
        self.finish_json({"user": public_user(user)})


class PasswordHandler(ApiHandler):
    async def post(self):
        user = await self.require_user()
        body = self.json_body()
        old = self.field(body, "old_password", str, max_len=MAX_LENGTH)
        new = self.field(body, "new_password", str, max_len=MAX_LENGTH)
        await accounts.change_password(self.ctx, user, old, new, keep_token=self.session_token)
        self.finish_json({"ok": True})
