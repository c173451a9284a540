"""What the proctor view adds to each student's row of the live class view
(teaching/live.py) in an exam's mode: their end, and their signals summed
up as flags a teacher scans for on a screen of 150 tiles. The signals
themselves are read one student at a time (service.py's `signals`)."""
import json
from datetime import datetime
from typing import Any

from ..db import Pool

# The kinds counted as flags: what a teacher may want to look at. (Focus and
# network coming back, Run presses and IDEs opened are only in the timeline.)
FLAGS = ("paste_outside", "focus_lost", "offline", "second_session")

QUERY = """
SELECT u.username, e.starts_at, e.ends_at + make_interval(secs => coalesce(x.seconds, 0)) AS ends,
       count(s.id) FILTER (WHERE s.kind = 'paste' AND (s.detail->>'outside')::boolean) AS paste_outside,
       count(s.id) FILTER (WHERE s.kind = 'focus_lost') AS focus_lost,
       count(s.id) FILTER (WHERE s.kind = 'offline') AS offline,
       count(s.id) FILTER (WHERE s.kind = 'second_session') AS second_session,
       max(s.at) FILTER (WHERE s.kind = 'run') AS last_run_at,
       max(s.at) FILTER (WHERE s.kind = 'check') AS last_check_at,
       (array_agg(s.kind ORDER BY s.id DESC) FILTER (WHERE s.id IS NOT NULL))[1] AS latest_kind,
       (array_agg(s.detail ORDER BY s.id DESC) FILTER (WHERE s.id IS NOT NULL))[1] AS latest_detail,
       max(s.at) AS latest_at
FROM exams e JOIN users u ON u.username = ANY($2::text[])
LEFT JOIN exam_extra_time x ON x.exam_id = e.id AND x.user_id = u.id
LEFT JOIN exam_signals s ON s.exam_id = e.id AND s.user_id = u.id
WHERE e.id = $1
GROUP BY u.username, e.starts_at, e.ends_at, x.seconds
"""


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when else None


async def fields(pool: Pool, exam_id: int, usernames: list[str]) -> dict[str, dict[str, Any]]:
    """{username: their exam fields} of these students in the exam: starts,
    ends (the exam's end plus their extra time), flags (counts of FLAGS),
    last_run_at and last_check_at (their last Run and Check presses) and latest (the latest signal:
    kind, at and its detail, or None)."""
    if not usernames:
        return {}
    rows = await pool.fetch(QUERY, exam_id, usernames)
    return {r["username"]: {
        "starts": _iso(r["starts_at"]), "ends": _iso(r["ends"]),
        "flags": {name: r[name] for name in FLAGS}, "last_run_at": _iso(r["last_run_at"]),
        "last_check_at": _iso(r["last_check_at"]),
        "latest": r["latest_kind"] and {"kind": r["latest_kind"], "at": _iso(r["latest_at"]),
                                        **json.loads(r["latest_detail"])},
    } for r in rows}
