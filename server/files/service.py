"""The files service: which areas a user may read and write, and the store's
blocking work done in the file processes with one user's calls bounded.

The store (store.py) knows nothing of users or roles; this knows who may
reach what:

    home            one's own home: read and write
    course          the default class's course folder; class/<id>, another
                    class's: its students read, its teachers and admins
                    write (teaching/classes.py)
    user/<name>     a student's home, read-only, for the teachers of their
                    classes and admins (an admin may also read a teacher's
                    or admin's home)

Handlers, the run service and the teaching service call it; each call
takes one of the places its user has (gate.py), so no student can fill the
file processes or threads the class shares.
"""
import errno
import logging
import time
from typing import TYPE_CHECKING, Callable

from .. import metrics
from ..accounts import rules
from ..batch import Batch
from ..config import Config
from ..db import Pool
from ..errors import Refused
from ..executor import BoundedExecutor
from ..runs.sandbox import run_uid
from . import gate, paths
from .area import Area
from .processes import FileProcesses
from .store import Store

if TYPE_CHECKING:
    from ..teaching.classes import Classes

log = logging.getLogger(__name__)

STAFF = ("teacher", "admin")
_IN_THREADS = {"open_download"}  # its answer is an open file, read on in the worker


class Files:
    def __init__(self, store: Store, processes: FileProcesses, threads: BoundedExecutor, pool: Pool, cfg: Config,
                 classes: "Classes"):
        self.store = store
        self.processes = processes  # where the store's calls run (processes.py)
        self.threads = threads  # the file threads, for the rest (executor.BoundedExecutor)
        self.pool = pool
        self.cfg = cfg
        self.classes = classes  # who is in which class (teaching/classes.py)
        self._areas_made = set()  # keys of the course areas known to have their folder
        self.save_times = Batch("save times", self._write_save_times)  # username -> time.time() of the save

    async def run(self, username: str, op: str, fn: Callable, *args):
        """fn(*args) in `username`'s place, timed as `op`: a method of the
        store in a file process, anything else (a stream's next block, work
        over many homes) in a file thread. A full disk becomes a 507 that
        says nothing changed."""
        started = time.perf_counter()
        try:
            async with gate.place(username):
                if getattr(fn, "__self__", None) is self.store and fn.__name__ not in _IN_THREADS:
                    return await self.processes.run(fn.__name__, *args)
                return await self.threads.run(fn, *args)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise Refused(507, "storage_full", "The storage is full; nothing was changed.") from None
            raise
        finally:
            metrics.FILE_OPS.labels(op).observe(time.perf_counter() - started)

    async def release(self, fn: Callable, *args):
        """A call that gives something back (closing a file): never refused."""
        return await self.threads.run(fn, *args)

    async def area(self, user: dict, spec: str, write: bool) -> Area:
        """The Area `spec` names (home, course, user/<name>), if `user` may
        read it (or write it, with `write`)."""
        if spec == "home":
            return Area.home(user["username"])
        if spec == "course" or spec.startswith("class/"):
            area = await self.classes.area(user, spec, write)
            if area.key not in self._areas_made:  # a class's folder is made at its first use
                await self.run(user["username"], "area", self.store.ensure_area, area)
                self._areas_made.add(area.key)
            return area
        owner = spec[len("user/"):]
        if user["role"] not in STAFF:
            raise Refused(403, "forbidden", "You can only open your own files.")
        if write:
            raise Refused(403, "read_only", "Students' folders are read-only for teachers.")
        if rules.username_problem(owner):  # "bob\0" and the like: no such user, and no query
            raise Refused(404, "no_such_user", "There is no student with that username.")
        allowed = await self.classes.may_read_home(user, owner)
        if allowed is None:
            raise Refused(404, "no_such_user", "There is no student with that username.")
        if not allowed:
            raise Refused(403, "not_your_student", "This student is not in a class you teach.")
        return Area.home(owner)

    async def saved(self, area: Area) -> None:
        """Remember when a student last saved, for the teacher's roster:
        written with the worker's next flush of `save_times` (within a
        second), never by the save itself, which is done and must neither
        wait for a commit nor fail because of one."""
        if area.key.startswith("home/"):
            self.save_times.add(area.key[len("home/"):], time.time())

    async def _write_save_times(self, times: dict) -> None:
        # greatest(): another worker may have recorded a later save already.
        names = list(times)
        await self.pool.execute(
            """UPDATE users u SET last_save_at = greatest(u.last_save_at, to_timestamp(t.at))
               FROM unnest($1::text[], $2::float8[]) AS t(username, at) WHERE u.username = t.username""",
            names, [times[n] for n in names])

    async def upload(self, user: dict, area: Area, folder: tuple[str, ...], uploads: list[tuple[str, bytes]],
                     overwrite: bool) -> dict:
        """Save uploaded (file name, bytes) into `folder`: every name is checked
        first (nothing is saved if one is bad), then each file is saved or
        refused on its own (an existing file only with `overwrite`)."""
        if not uploads:
            raise Refused(400, "no_files", "The upload holds no files.")
        names = [paths.parse(name, allow_root=False) for name, _ in uploads]
        saved, refused = [], []
        for (_, data), name in zip(uploads, names):
            try:
                saved.append(await self.run(user["username"], "upload", self.store.save, area, folder + name, data,
                                            "*" if overwrite else None))
            except Refused as e:
                refused.append({"path": "/".join(folder + name), "error": e.code, "message": e.message})
        if saved:
            await self.saved(area)
        return {"saved": saved, "refused": refused}

    async def ensure_home(self, user: dict) -> str:
        """The user's home, made at first use (0700, theirs; a student's with
        the welcome file once); its path."""
        await self.run(user["username"], "home", self.store.ensure_home, user["username"],
                       user["role"] == "student", run_uid(self.cfg, user["id"]))
        return self.store.home_path(user["username"])
