"""HTTP endpoints of teaching: the roster, pushing starter files."""
from ..files import paths
from ..web import ApiError, ApiHandler


class RosterHandler(ApiHandler):
    """GET the class: every student, their last save and their home's usage."""

    async def get(self):
        await self.require_user("teacher", "admin")
        self.finish_json({"students": await self.ctx.teaching.roster()})


class PushHandler(ApiHandler):
    """POST {"path": in course/, "students": [...] (default: all active)}:
    copy a starter file or folder into students' homes, never overwriting."""

    async def post(self):
        teacher = await self.require_user("teacher", "admin")
        body = self.json_body()
        source = paths.parse(self.field(body, "path", str, max_len=paths.MAX_PATH_BYTES), allow_root=False)
        chosen = self.field(body, "students", list, required=False)
        if chosen is not None and not all(isinstance(u, str) for u in chosen):
            raise ApiError(400, "wrong_type", "The field 'students' must be a list of usernames.")
        self.finish_json(await self.ctx.teaching.push(teacher, source, chosen))
