"""Handing out starter files: a file or folder of course/ copied into
students' homes at the same path, never over what a student has. Blocking
(it reads and saves through the store): it runs in the file threads."""
import logging

from ..errors import Refused
from ..files.area import Area

log = logging.getLogger(__name__)


def copy_into_homes(store, source, usernames):
    """({username: [copied paths]}, {username: [{path, reason}]},
    {username: sentence} for homes that failed: the push goes on with the
    others)."""
    course = Area.course()
    if store.is_dir(course, source):
        listing, _ = store.tree(course, source)
        files = [tuple(source) + tuple(e["path"].split("/")) for e in listing if e["kind"] == "file"]
    else:
        files = [tuple(source)]
    copied, skipped, failed = {}, {}, {}
    for f in files:
        why = "file_too_large"
        try:
            data = store.read(course, f, limit=store.limits.max_file_bytes)[0]
        except Refused as e:
            data, why = None, e.code
        for username in usernames:
            if username in failed:
                continue
            if data is None:
                skipped.setdefault(username, []).append({"path": "/".join(f), "reason": why})
                continue
            try:
                store.save(Area.home(username), f, data, if_match=None)
                copied.setdefault(username, []).append("/".join(f))
            except Refused as e:
                skipped.setdefault(username, []).append({"path": "/".join(f), "reason": e.code})
            except Exception as e:  # one broken home must not stop the class's push
                log.exception("push of %s into %s's home failed", "/".join(f), username)
                failed[username] = f"Could not write into this home: {_reason(e)}"
    return copied, skipped, failed


def _reason(e):
    return e.strerror if isinstance(e, OSError) and e.strerror else "an error on the server (it has been logged)"
