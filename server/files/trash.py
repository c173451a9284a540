"""What was deleted from an area, so that it can be put back.

Deleting keeps the last version of every file in the history (see
history.py); the trash remembers each delete as one record naming those
versions, so a whole folder comes back as it was, or one file of it:

    .system/trash/<area>/<time_ns>-<random>.json
        {"path": "proj", "kind": "folder", "deleted": unix time,
         "folders": ["proj", "proj/sub"], "files": [{"path", "version", "size"}]}

A record is only a list: the versions themselves may be dropped later to
make room (quota), and then that file is no longer offered. The newest
TRASH_RECORDS records of an area are kept. Callers hold the area's lock
for every change.
"""
import builtins
import os
import secrets
import time
from typing import Any, Callable, Iterable

from ..errors import Refused
from . import paths, records
from .area import Area
from .paths import Parts

# A record as trash/<area>/*.json holds it (see above), with "id" when listed.
Record = dict[str, Any]

TRASH_RECORDS = 100


class Trash:
    def __init__(self, root_fd: int) -> None:
        self.root_fd = root_fd

    def _parts(self, area: Area) -> Parts:
        return (".system", "trash", area.slug)

    def add(self, area: Area, kind: str, path: str, files: list[dict[str, Any]],
        folders: Iterable[str] = ()) -> None:
        """Remember one delete; `files` are {"path", "version", "size"}."""
        record = {"path": path, "kind": kind, "deleted": time.time(), "folders": list(folders), "files": files}
        name = f"{time.time_ns()}-{secrets.token_hex(4)}.json"
        with paths.opened(self.root_fd, self._parts(area), create=True) as fd:
            records.write(fd, name, record)
            for old in sorted(self._names(fd))[:-TRASH_RECORDS]:
                os.unlink(old, dir_fd=fd)

    def list(self, area: Area, kept: Callable[[str, str], bool]) -> "builtins.list[Record]":
        """Records, newest first, with only the files `kept(path, version)`
        still holds; records with nothing left to restore are left out."""
        try:
            fd = paths.open_dir(self.root_fd, self._parts(area))
        except FileNotFoundError:
            return []
        out: builtins.list[Record] = []
        try:
            for name in sorted(self._names(fd), reverse=True):
                record = records.read(fd, name)
                if record is None:
                    continue
                record["files"] = [f for f in record["files"] if kept(f["path"], f["version"])]
                if record["files"] or record["folders"]:
                    record["id"] = name[:-len(".json")]
                    out.append(record)
        finally:
            os.close(fd)
        return out

    def load(self, area: Area, record_id: object) -> Record:
        if not isinstance(record_id, str) or not record_id.replace("-", "").isalnum():
            raise _gone()
        record: Record | None
        try:
            with paths.opened(self.root_fd, self._parts(area)) as fd:
                record = records.read(fd, record_id + ".json")
        except FileNotFoundError:
            record = None
        if record is None:
            raise _gone()
        return record

    def update(self, area: Area, record_id: str, record: Record | None) -> None:
        """Rewrite a record after some of it was restored (None: remove it)."""
        with paths.opened(self.root_fd, self._parts(area)) as fd:
            if record is None or not (record["files"] or record["folders"]):
                try:
                    os.unlink(record_id + ".json", dir_fd=fd)
                except FileNotFoundError:
                    pass
            else:
                records.write(fd, record_id + ".json", record)

    @staticmethod
    def _names(fd: int) -> "builtins.list[str]":
        return [n for n in os.listdir(fd) if n.endswith(".json") and n[:1].isdigit()]


def _gone() -> Refused:
    return Refused(404, "not_in_trash", "That is no longer in the trash.")
