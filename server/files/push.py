"""Handing out starter files: a file or folder of a class's course folder
copied into students' homes at the same path. A student's copy that they
have not changed since the last push (its etag is still the one pushed) is
replaced by the starter as it is now; anything else a student has there is
theirs and is left, and reported. Blocking (it reads and saves through the
store): the files service (service.py, `Files.push`) runs it in a file
thread, for the teaching service."""
import logging
from dataclasses import dataclass, field

from ..errors import Refused
from .area import Area
from .history import etag_of

log = logging.getLogger(__name__)


@dataclass
class Pushed:
    """What a push did, per student: paths copied (new), updated (their
    unchanged copy replaced), up to date (they had this version); skipped
    [{path, reason}] (reason 'changed': they have their own version); and
    a sentence for homes that could not be written at all. `records` are
    (username, path, etag) of the copies students now have as pushed."""
    copied: dict = field(default_factory=dict)
    updated: dict = field(default_factory=dict)
    up_to_date: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)
    failed: dict = field(default_factory=dict)
    records: list = field(default_factory=list)

    def report(self):
        return {"copied": self.copied, "updated": self.updated, "up_to_date": self.up_to_date,
                "skipped": self.skipped, "failed": self.failed}


def copy_into_homes(store, course: Area, source: tuple, usernames: list, as_pushed: dict) -> Pushed:
    """Push `source` of the course area `course` to `usernames`;
    `as_pushed`: {(username, path): etag} of the earlier pushes."""
    if store.is_dir(course, source):
        listing, _ = store.tree(course, source)
        files = [tuple(source) + tuple(e["path"].split("/")) for e in listing if e["kind"] == "file"]
    else:
        files = [tuple(source)]
    done = Pushed()
    for f in files:
        path = "/".join(f)
        why = "file_too_large"
        try:
            data = store.read(course, f, limit=store.limits.max_file_bytes)[0]
        except Refused as e:
            data, why = None, e.code
        for username in usernames:
            if username in done.failed:
                continue
            if data is None:
                done.skipped.setdefault(username, []).append({"path": path, "reason": why})
                continue
            try:
                _push_one(store, username, f, data, as_pushed.get((username, path)), done)
            except Refused as e:
                done.skipped.setdefault(username, []).append({"path": path, "reason": e.code})
            except Exception as e:  # one broken home must not stop the class's push
                log.exception("push of %s into %s's home failed", path, username)
                done.failed[username] = f"Could not write into this home: {_reason(e)}"
    return done


def _push_one(store, username, parts, data, pushed_etag, done):
    """Copy, update or leave one file of one student, and say which."""
    path, etag, home = "/".join(parts), etag_of(data), Area.home(username)
    outcome = done.copied
    try:
        if pushed_etag is None:
            store.save(home, parts, data, if_match=None)
        elif pushed_etag == etag:
            store.save(home, parts, data, if_match=None)  # pushed before and still this version: only if gone
        else:
            store.save(home, parts, data, if_match=pushed_etag)
            outcome = done.updated
    except Refused as e:
        if e.code != "conflict":
            raise
        current = (e.extra or {}).get("current")
        if current is None:  # they deleted their copy: it comes back
            store.save(home, parts, data, if_match=None)
        elif current["etag"] == etag:
            outcome = done.up_to_date
        else:
            done.skipped.setdefault(username, []).append({"path": path, "reason": "changed"})
            return
    outcome.setdefault(username, []).append(path)
    done.records.append((username, path, etag))


def _reason(e):
    return e.strerror if isinstance(e, OSError) and e.strerror else "an error on the server (it has been logged)"
