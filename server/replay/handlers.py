"""HTTP endpoints of replays: which files of an area have one, and a
file's (service.py). Recording comes over /ws/run (`edits`)."""
from ..web import ApiError, ApiHandler
from .service import Replays


class ReplayHandler(ApiHandler):
    """GET /api/replay/<area>: the files with a replay; /api/replay/<area>/<path>
    (?after=<row id>): the file's, a page at a time."""

    @property
    def replays(self) -> Replays:
        return self.ctx.replays

    async def get(self, spec: str, path: str | None) -> None:
        user = await self.require_user()
        if not path:
            return self.finish_json({"files": await self.replays.recorded(user, spec)})
        after = self.get_argument("after", "0")
        if not after.isdigit() or len(after) > 18:
            raise ApiError(400, "bad_after", "'after' is the id of the last part of the replay you have, "
                                             "a whole number.")
        self.finish_json(await self.replays.log(user, spec, path, int(after)))
