"""The roster as teachers see it, live: each student of a class, online or
not, running or not, how their last run ended, when they last saved,
their last attempt at an exercise and whether their home is over its quota. One statement, for the roster API
and the live view alike. (`viewing`: the file open in their IDE, viewing.py.)"""
from datetime import datetime

from ..config import Config
from ..db import Pool
from .activity import STALE_SECONDS

QUERY = """
SELECT m.class_id, u.id, u.username, u.display_name, u.active, u.last_save_at, u.disk_bytes, u.disk_files,
       EXISTS (SELECT 1 FROM presence p WHERE p.user_id = u.id AND p.heartbeat_at > now() - $3 * interval '1 second')
           AS online,
       coalesce(a.running AND EXISTS (SELECT 1 FROM presence p WHERE p.user_id = u.id AND p.worker = a.worker
                                      AND p.heartbeat_at > now() - $3 * interval '1 second'), false) AS running,
       a.started_at, a.ended_at, a.outcome, a.reason, a.error_line, a.error_kind, a.error_message,
       a.error_file, a.error_lineno,
       c.exercise, c.latest_score, c.latest_max, c.last_at, v.path AS viewing
FROM class_membership m JOIN users u ON u.id = m.user_id LEFT JOIN run_activity a ON a.user_id = u.id
LEFT JOIN viewing v ON v.user_id = u.id
LEFT JOIN LATERAL (SELECT e.exercise, e.latest_score, e.latest_max, e.last_at FROM exercise_progress e
                   WHERE e.class_id = m.class_id AND e.user_id = u.id ORDER BY e.last_at DESC LIMIT 1) c ON true
WHERE u.role = 'student' AND m.class_id = ANY($1::bigint[]) AND ($2::bigint[] IS NULL OR u.id = ANY($2::bigint[]))
ORDER BY m.class_id, u.username
"""


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when else None


async def students(pool: Pool, cfg: Config, class_ids: list[int],
                   user_ids: list[int] | None = None) -> list[tuple[int, dict]]:
    """[(class id, student)] of these classes (only the students `user_ids`,
    when given), as the roster API and the live view send them. A run
    counts as running only while its worker's heartbeat is fresh (a worker
    that died ran nothing)."""
    rows = await pool.fetch(QUERY, class_ids, user_ids, float(STALE_SECONDS))
    return [(r["class_id"], _student(r, cfg)) for r in rows]


def _student(r, cfg):
    last_run = None
    if r["outcome"]:
        error = r["error_line"] and {"text": r["error_line"], "kind": r["error_kind"], "message": r["error_message"],
                                     "file": r["error_file"], "line": r["error_lineno"]}
        last_run = {"outcome": r["outcome"], "reason": r["reason"], "error": error, "at": _iso(r["ended_at"])}
    return {"username": r["username"], "display_name": r["display_name"], "active": r["active"],
            "online": r["online"], "running": r["running"],
            "run_started_at": _iso(r["started_at"]) if r["running"] else None, "last_run": last_run,
            "last_save_at": _iso(r["last_save_at"]), "viewing": r["viewing"],
            "last_check": r["exercise"] and {"exercise": r["exercise"], "score": r["latest_score"],
                                             "max_score": r["latest_max"], "at": _iso(r["last_at"])},
            "disk_bytes": r["disk_bytes"], "disk_files": r["disk_files"],
            "over_quota": (r["disk_bytes"] or 0) > cfg.QUOTA_BYTES or (r["disk_files"] or 0) > cfg.QUOTA_FILES}
