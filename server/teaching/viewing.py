"""Which file each student has in front of them in the IDE (a path of
their home, or None), for the roster: a teacher's view of the student opens
it. The IDE says so on /ws/run (`viewing`, docs/run-protocol.md); it is
recorded as the last save time is (batch.py: with the worker's next flush,
never waiting), and the table's trigger announces a change on 'class_live'
(migration 014)."""
from datetime import datetime, timezone

from ..batch import Batch
from ..db import Pool

WRITE = """
INSERT INTO viewing AS v (user_id, path, at) SELECT * FROM unnest($1::bigint[], $2::text[], $3::timestamptz[])
ON CONFLICT (user_id) DO UPDATE SET path = EXCLUDED.path, at = EXCLUDED.at WHERE v.at <= EXCLUDED.at
"""


class Viewing(Batch):
    def __init__(self, pool: Pool):
        super().__init__("open files", self._write)
        self.pool = pool

    def add(self, user_id: int, path: str | None = None) -> None:
        super().add(user_id, (path, datetime.now(timezone.utc)))

    async def _write(self, items: dict) -> None:
        ids = list(items)
        await self.pool.execute(WRITE, ids, [items[i][0] for i in ids], [items[i][1] for i in ids])
