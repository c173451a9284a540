"""The class as teachers see it: the roster (who, when each last saved,
whether their home is over its quota) and handing out starter files from
course/ into students' homes. Knows nothing of HTTP."""
from ..config import Config
from ..db import Pool
from ..errors import Refused
from ..files.service import Files
from .push import copy_into_homes


class Teaching:
    def __init__(self, pool: Pool, files: Files, cfg: Config):
        self.pool = pool
        self.files = files  # the files service
        self.cfg = cfg

    async def roster(self) -> list[dict]:
        """Every student: last save, and what their home held after their last run."""
        cfg = self.cfg
        rows = await self.pool.fetch(
            """SELECT username, display_name, active, last_save_at, disk_bytes, disk_files FROM users
               WHERE role = 'student' ORDER BY username""")
        return [{"username": r["username"], "display_name": r["display_name"], "active": r["active"],
                 "last_save_at": r["last_save_at"].isoformat() if r["last_save_at"] else None,
                 "disk_bytes": r["disk_bytes"], "disk_files": r["disk_files"],
                 "over_quota": (r["disk_bytes"] or 0) > cfg.QUOTA_BYTES or (r["disk_files"] or 0) > cfg.QUOTA_FILES}
                for r in rows]

    async def push(self, teacher: dict, source: tuple[str, ...], chosen: list[str] | None = None) -> dict:
        """Copy the course/ file or folder `source` (path parts) into the homes
        of the active students `chosen` (default: all), never overwriting: the
        report of what was copied, skipped and failed, per student."""
        rows = await self.pool.fetch("SELECT username FROM users WHERE role = 'student' AND active")
        everyone = [r["username"] for r in rows]
        if chosen is None:
            targets = everyone
        else:
            unknown = [u for u in chosen if u not in everyone]
            if unknown:
                raise Refused(400, "unknown_students", "Not active students: " + ", ".join(unknown))
            targets = chosen
        copied, skipped, failed = await self.files.run(teacher["username"], "push", copy_into_homes,
                                                       self.files.store, tuple(source), targets)
        return {"copied": copied, "skipped": skipped, "failed": failed, "students": len(targets)}


