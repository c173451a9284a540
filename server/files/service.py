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
import asyncio
import logging
import threading
import time
from typing import TYPE_CHECKING, Callable

from .. import metrics
from ..accounts import rules
from ..accounts.uids import run_uid
from ..batch import Batch
from ..config import Config
from ..db import Pool
from ..errors import Refused
from ..executor import BoundedExecutor
from . import faults, gate, paths
from .area import Area
from .processes import FileProcesses
from .store import Store

if TYPE_CHECKING:
    from ..teaching.classes import Classes

log = logging.getLogger(__name__)

STAFF = ("teacher", "admin")
SIGN_IN_WAIT = 1.0  # seconds a sign-in waits for its home to be made
_IN_THREADS = {"open_download"}  # its answer is an open file, read on in the worker
# Operations whose success shows the storage takes changes again (no longer read-only or full).
_CHANGES = {"save", "upload", "mkdir", "move", "restore", "delete", "home", "push"}


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
        self.health = faults.StorageHealth(store.root, cfg.FILE_DEADLINE)  # for /readyz and /api/status
        self._homes_made = set()  # usernames whose home is known to be made, in this worker
        self.changes = None  # changes.FileChanges: the open IDEs are told of every change (set by the worker)

    async def run(self, username: str, op: str, fn: Callable, *args, seconds: float = None):
        """fn(*args) in `username`'s place, timed as `op`: a method of the
        store in a file process, anything else (a stream's next block, work
        over many homes) in a file thread. It has `seconds` (FILE_DEADLINE)
        to answer, waiting for its place included; past that the student
        is told the file server is not answering. A storage error (read-only,
        full, I/O) becomes a refusal that says so (faults.py)."""
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        deadline = loop.time() + (seconds or self.cfg.FILE_DEADLINE)
        try:
            async with gate.place(username, deadline):
                if getattr(fn, "__self__", None) is self.store and fn.__name__ not in _IN_THREADS:
                    result = await self.processes.run(fn.__name__, *args, deadline=deadline)
                else:
                    result = await self._in_thread(fn, args, deadline)
        except faults.NotAnswering:
            self.health.failed(faults.FAILING, f"a file call did not finish within {self.cfg.FILE_DEADLINE} s "
                                               "(the file server is not answering)")
            raise
        except OSError as e:
            refusal = faults.refusal(e)
            if refusal is None:
                raise
            self.health.failed(faults.condition_of(e), f"{op}: {e.strerror or e}")
            raise refusal from None
        finally:
            metrics.FILE_OPS.labels(op).observe(time.perf_counter() - started)
        self.health.worked(changed=op in _CHANGES)
        return result

    async def _in_thread(self, fn, args, deadline):
        """fn(*args) in a file thread, answered by `deadline`. A thread stuck
        in the kernel cannot be stopped: it is left to finish, and a call
        whose caller gave up before a thread took it is not made at all."""
        given_up = threading.Event()

        def call():
            if given_up.is_set():
                raise faults.NotAnswering()
            return fn(*args)

        future = asyncio.ensure_future(self.threads.run(call))
        future.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved, also when given up
        try:
            return await asyncio.wait_for(asyncio.shield(future), max(0, deadline - asyncio.get_running_loop().time()))
        except asyncio.TimeoutError:
            if future.done():
                return future.result()
            given_up.set()
            raise faults.NotAnswering() from None

    async def release(self, fn: Callable, *args):
        """A call that gives something back (closing a file): never refused,
        and waited for until the deadline at most. Behind a read stuck in a
        hung storage, the close happens when that read returns (a stream
        still running cannot be closed: it is when collected)."""
        deadline = asyncio.get_running_loop().time() + self.cfg.FILE_DEADLINE
        try:
            await self._in_thread(fn, args, deadline)
        except (faults.NotAnswering, ValueError):
            pass

    async def area(self, user: dict, spec: str, write: bool) -> Area:
        """The Area `spec` names (home, course, user/<name>), if `user` may
        read it (or write it, with `write`)."""
        if spec == "home":
            if user["username"] not in self._homes_made:
                # Made at the first file call, not at sign-in, which must not
                # need the storage. A storage that only reads still shows it.
                try:
                    await self.ensure_home(user)
                except Refused as e:
                    if write or e.code not in ("storage_read_only", "storage_full"):
                        raise
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

    def changed(self, username: str, area: Area, kind: str, path: str, etag: str | None = None,
                to: str | None = None) -> None:
        """`username` changed `path` in `area`: every open IDE that shows the
        area is told (changes.py), as done by "you" in one's own home and by
        "teacher" anywhere else (a push, the course folder). One's own save
        is also when one last saved, for the teacher's roster: written with
        the worker's next flush of `save_times` (within a second), never by
        the save itself, which is done and must neither wait for a commit
        nor fail because of one."""
        own = area.key == Area.home(username).key
        if kind == "save" and own:
            self.save_times.add(username, time.time())
        if self.changes is not None:
            self.changes.announce(area.key, kind, path, etag=etag, to=to, by="you" if own else "teacher")

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
                if e.status == 503 and not saved:  # the storage fails, not this file: say so, as a save would
                    raise
                refused.append({"path": "/".join(folder + name), "error": e.code, "message": e.message})
        if saved:
            for meta in saved:
                self.changed(user["username"], area, "save", meta["path"], etag=meta.get("etag"))
        return {"saved": saved, "refused": refused}

    async def prepare_home(self, user: dict) -> None:
        """At sign-in: make the home, waiting SIGN_IN_WAIT seconds at most and
        never failing, since signing in must not need the storage. Not
        tried while the storage is known to fail; the first file call
        (area) makes the home then."""
        if user["username"] in self._homes_made or self.health.condition not in (faults.OK, faults.SLOW):
            return
        task = asyncio.ensure_future(self.ensure_home(user))
        task.add_done_callback(_unexpected_logged)
        try:
            await asyncio.wait_for(asyncio.shield(task), SIGN_IN_WAIT)
        except (asyncio.TimeoutError, Refused):
            pass  # it goes on within its deadline, or is refused: the sign-in goes on
        except Exception:
            pass  # logged by _unexpected_logged

    async def ensure_home(self, user: dict) -> str:
        """The user's home, made at first use (0700, theirs; a student's with
        the welcome file once); its path."""
        await self.run(user["username"], "home", self.store.ensure_home, user["username"],
                       user["role"] == "student", run_uid(self.cfg, user["id"]))
        self._homes_made.add(user["username"])
        return self.store.home_path(user["username"])


def _unexpected_logged(task):
    """Read a background call's outcome; a refusal is expected, anything else a bug."""
    if not task.cancelled() and task.exception() is not None and not isinstance(task.exception(), Refused):
        log.error("making a home failed", exc_info=task.exception())
