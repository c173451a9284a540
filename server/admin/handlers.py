"""HTTP endpoints of the admin's own: the server's status. (Accounts are
administered in accounts/handlers.py, the class in teaching/handlers.py.)"""
from ..web import ApiHandler
from .status import status


class StatusHandler(ApiHandler):
    async def get(self):
        await self.require_user("admin")
        self.finish_json(await status(self.ctx))
