"""Handing out starter files: a file or folder of a class's course folder
copied into students' homes at the same path. A student's copy that they
have not changed since the last push (its etag is still the one pushed) is
replaced by the starter as it is now. One they changed (or a file of their
own at that path) is, as the teacher chose (`CHANGED`):

    keep       left as it is, and reported
    overwrite  replaced by the starter; theirs becomes an earlier version in
               the file's history (restorable there), and is never lost: if
               their home has no room to keep it, nothing is replaced
    new_file   left as it is; the starter arrives beside it under a free
               name, `lesson2 (teacher).py` (`lesson2 (teacher 2).py` ...)

Blocking (it reads and saves through the store): the files service
(service.py, `Files.push`) runs it in a file thread, for the teaching
service."""
import logging
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..errors import Refused
from .area import Area
from .history import etag_of
from .paths import Parts, name_problem
from .store import Store

log = logging.getLogger(__name__)

CHANGED = ("keep", "overwrite", "new_file")
NEW_NAMES = 20  # names tried for a starter sent as a new file


@dataclass
class Pushed:
    """What a push did, per student (username -> list): paths copied (new),
    updated (their unchanged copy replaced), up to date (they had this
    version); replaced [{path, version}] (their changed copy overwritten,
    `version` the earlier version of theirs now in its history); sent_as_new
    [{path, as}] (the starter saved beside theirs as `as`); skipped [{path,
    reason}] (reason 'changed': they have their own version); and a
    sentence for homes that could not be written at all. `records` are
    (username, path, etag) of the copies students now have as pushed;
    `announced` (username, path, etag, their kept version or None), the
    saves their open IDEs are told of."""
    copied: dict[str, list[str]] = field(default_factory=dict)
    updated: dict[str, list[str]] = field(default_factory=dict)
    up_to_date: dict[str, list[str]] = field(default_factory=dict)
    replaced: dict[str, list[dict[str, str | None]]] = field(default_factory=dict)
    sent_as_new: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    skipped: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    records: list[tuple[str, str, str]] = field(default_factory=list)
    announced: list[tuple[str, str, str, str | None]] = field(default_factory=list)

    def report(self) -> dict[str, Any]:
        return {"copied": self.copied, "updated": self.updated, "up_to_date": self.up_to_date,
                "replaced": self.replaced, "sent_as_new": self.sent_as_new, "skipped": self.skipped,
                "failed": self.failed}


def copy_into_homes(store: Store, course: Area, source: Parts, usernames: list[str],
                    as_pushed: dict[tuple[str, str], str], changed: str = "keep") -> Pushed:
    """Push `source` of the course area `course` to `usernames`;
    `as_pushed`: {(username, path): etag} of the earlier pushes; `changed`:
    what becomes of copies students changed (CHANGED)."""
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
                _push_one(store, username, f, data, as_pushed.get((username, path)), changed, done)
            except Refused as e:
                done.skipped.setdefault(username, []).append({"path": path, "reason": e.code})
            except Exception as e:  # one broken home must not stop the class's push
                log.exception("push of %s into %s's home failed", path, username)
                done.failed[username] = f"Could not write into this home: {_reason(e)}"
    return done


def _push_one(store: Store, username: str, parts: Parts, data: bytes, pushed_etag: str | None, changed: str,
              done: Pushed) -> None:
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
        elif changed == "overwrite":
            return _overwrite(store, username, parts, data, current["etag"], done)
        elif changed == "new_file":
            return _beside(store, username, parts, data, done)
        else:
            done.skipped.setdefault(username, []).append({"path": path, "reason": "changed"})
            return
    outcome.setdefault(username, []).append(path)
    done.records.append((username, path, etag))
    done.announced.append((username, path, etag, None))


def _overwrite(store: Store, username: str, parts: Parts, data: bytes, theirs: str, done: Pushed) -> None:
    """Replace the student's changed copy (still `theirs`: a save of theirs
    meanwhile is not overwritten unseen), keeping it as a version."""
    path, etag, home = "/".join(parts), etag_of(data), Area.home(username)
    try:
        store.save(home, parts, data, if_match=theirs, keep_required=True)
    except Refused as e:
        reason = "changed" if e.code == "conflict" else e.code
        done.skipped.setdefault(username, []).append({"path": path, "reason": reason})
        return
    version = next((v["version"] for v in store.history(home, parts) if v["etag"] == theirs), None)
    done.replaced.setdefault(username, []).append({"path": path, "version": version})
    done.records.append((username, path, etag))
    done.announced.append((username, path, etag, version or ""))


def _beside(store: Store, username: str, parts: Parts, data: bytes, done: Pushed) -> None:
    """Save the starter beside the student's own copy under a free name (one
    that holds this version already is found up to date)."""
    path, etag, home = "/".join(parts), etag_of(data), Area.home(username)
    for name in new_names(parts[-1]):
        target = parts[:-1] + (name,)
        try:
            store.save(home, target, data, if_match=None)
        except Refused as e:
            current = (e.extra or {}).get("current")
            if e.code == "conflict" and current is not None and current["etag"] == etag:
                done.up_to_date.setdefault(username, []).append("/".join(target))
                return
            if e.code in ("conflict", "not_a_file"):
                continue  # taken: the next name
            raise
        done.sent_as_new.setdefault(username, []).append({"path": path, "as": "/".join(target)})
        done.announced.append((username, "/".join(target), etag, None))
        return
    done.skipped.setdefault(username, []).append({"path": path, "reason": "no_free_name"})


def new_names(name: str) -> Iterator[str]:
    """`lesson2 (teacher).py`, `lesson2 (teacher 2).py`, ... for `lesson2.py`
    (only names a file may have)."""
    stem, dot, ext = name.rpartition(".")
    if not stem:  # no extension, or a name like ".env"
        stem, dot, ext = name, "", ""
    for n in range(1, NEW_NAMES + 1):
        candidate = f"{stem} (teacher{'' if n == 1 else ' ' + str(n)}){dot}{ext}"
        if name_problem(candidate) is None:
            yield candidate


def _reason(e: Exception) -> str:
    return e.strerror if isinstance(e, OSError) and e.strerror else "an error on the server (it has been logged)"
