"""HTTP endpoints of accounts: sign in and out, who am I, one's password,
and the admin's account administration. Each parses, authorizes, calls
the Accounts service (service.py) and answers."""
from .. import metrics, public_url
from ..errors import Refused
from ..web import SESSION_COOKIE, ApiError, ApiHandler, is_https, set_session_cookie
from . import devices
from .rules import MAX_DISPLAY_NAME, MAX_PASSWORD, ROLES
from .service import LIST_LIMIT


def public_user(user):
    return {"username": user["username"], "display_name": user["display_name"], "role": user["role"]}


def set_device_cookie(handler, device):
    """The browser's device cookie after a sign-in (devices.py); sent back
    only to /api/login: nothing else needs it."""
    handler.set_cookie(devices.COOKIE, device, path="/api/login", expires_days=devices.DAYS,
                       httponly=True, samesite="Lax", secure=is_https(handler))


class LoginHandler(ApiHandler):
    async def post(self):
        body = self.json_body()
        try:
            user, token, expires, device = await self.ctx.accounts.login(
                self.field(body, "username", str, max_len=64), self.field(body, "password", str, max_len=MAX_PASSWORD),
                self.client_address(), self.get_cookie(devices.COOKIE))
        except Refused as e:
            metrics.LOGINS.labels(e.code).inc()
            raise
        metrics.LOGINS.labels("ok").inc()
        # Never fails and waits a second at most: signing in must work while
        # the storage is read-only or hangs (the first file call makes the home then).
        await self.ctx.files.prepare_home(user)
        set_session_cookie(self, token, expires)
        set_device_cookie(self, device)
        self.finish_json({"user": public_user(user), "expires": expires.isoformat()})


class LogoutHandler(ApiHandler):
    async def post(self):
        await self.load_user()
        if self.session_token:
            await self.ctx.accounts.logout(self.session_token)
        self.clear_cookie(SESSION_COOKIE)
        self.finish_json({"ok": True})


class MeHandler(ApiHandler):
    async def get(self):
        self.finish_json({"user": public_user(await self.require_user())})


class PasswordHandler(ApiHandler):
    async def post(self):
        user = await self.require_user()
        body = self.json_body()
        await self.ctx.accounts.change_password(
            user, self.field(body, "old_password", str, max_len=MAX_PASSWORD),
            self.field(body, "new_password", str, max_len=MAX_PASSWORD), keep_token=self.session_token)
        self.finish_json({"ok": True})


class UsersHandler(ApiHandler):
    """GET accounts (?q= search, ?role=, ?class=<id>), POST one new account."""

    async def get(self):
        await self.require_user("admin")
        role = self.get_argument("role", None)
        if role is not None and role not in ROLES:
            raise ApiError(400, "bad_role", "role must be student, teacher or admin.")
        number = self.get_argument("class", None)
        if number is not None and (not number.isascii() or not number.isdigit() or len(number) > 18):
            raise ApiError(400, "bad_class", "class must be a class's number.")
        users = await self.ctx.accounts.list_users(self.get_argument("q", "")[:100], role,
                                                   int(number) if number is not None else None)
        self.finish_json({"users": users, "limit": LIST_LIMIT})

    async def post(self):
        admin = await self.require_user("admin")
        body = self.json_body()
        given = self.field(body, "password", str, max_len=MAX_PASSWORD, required=False)
        user, password = await self.ctx.accounts.create_user(
            admin["username"], self.field(body, "username", str, max_len=64),
            self.field(body, "display_name", str, max_len=MAX_DISPLAY_NAME),
            self.field(body, "role", str, max_len=20), given)
        self.finish_json({"user": user, "password": None if given is not None else password}, 201)


class ImportUsersHandler(ApiHandler):
    """POST {"csv": text}: a class list, all rows or none."""

    async def post(self):
        admin = await self.require_user("admin")
        text = self.field(self.json_body(), "csv", str, max_len=1 << 20)
        report = await self.ctx.accounts.import_csv(admin["username"], text)
        self.finish_json({**report, "sign_in_at": public_url.sign_in_at(self.ctx.cfg)})


class UserPasswordHandler(ApiHandler):
    """POST: a new generated password for the user, shown once."""

    async def post(self, username):
        admin = await self.require_user("admin")
        password, _ = await self.ctx.accounts.reset_password(admin["username"], username)
        self.finish_json({"username": username, "password": password})


class UserActiveHandler(ApiHandler):
    """POST {"active": false|true}: deactivate (sessions end) or reactivate."""

    async def post(self, username):
        admin = await self.require_user("admin")
        active = self.field(self.json_body(), "active", bool)
        if username == admin["username"] and not active:
            raise ApiError(400, "cannot_deactivate_self", "You cannot deactivate your own account.")
        await self.ctx.accounts.set_active(admin["username"], username, active)
        self.finish_json({"username": username, "active": active})
