"""HTTP endpoints of editing help: POST /api/assist/<op> with the text being
edited; parse, authorize, call the assist service (service.py), answer."""
import re

from ..files import paths
from ..files.handlers import AREA
from ..web import ApiError, ApiHandler
from .service import OPS, SOURCE_CHARS

OP = "(" + "|".join(OPS) + ")"


class AssistHandler(ApiHandler):
    """{"path", "source", "area"?, "line"?, "column"?, "name"?} -> the op's answer."""

    async def post(self, op):
        user = await self.require_user()
        await self.ctx.exams.forbids(user, "assist")
        body = self.json_body()
        positioned = op != "check"
        area = self.field(body, "area", str, max_len=100, required=False, default="home")
        if not re.fullmatch(AREA, area):
            raise ApiError(400, "bad_area", "The area must be home, course or user/<username>.")
        answer = await self.ctx.assist.help(
            user, op, area_spec=area,
            path=self.field(body, "path", str, max_len=paths.MAX_PATH_BYTES),
            source=self.field(body, "source", str, max_len=SOURCE_CHARS),
            line=self.field(body, "line", int, required=positioned),
            column=self.field(body, "column", int, required=positioned),
            name=self.field(body, "name", str, max_len=200, required=op == "describe"))
        self.finish_json(answer)
