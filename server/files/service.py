"""The files service: which areas a user may read and write, and the store's
blocking work done in the file processes with one user's calls bounded.

The store (store.py) knows nothing of users or roles; this knows who may
reach what:

    home            one's own home: read and write
    course          the default class's course folder; class/<id>, another
                    class's: its students read, its teachers and admins
                    write (teaching/classes.py)
    checks/<id>     a class's exercises (exercises/): its teachers and admins
                    read and write, students nothing
    user/<name>     a student's home, read-only, for the teachers of their
                    classes and admins (an admin may also read a teacher's
                    or admin's home)

Handlers, the run service, the teaching service and editing help call
its named methods (read, save, ..., runnable_size, measure, push,
python_modules); where each call runs is its own business: the store's
operations in a file process (processes.py, by an explicit child.protocol.Op),
the rest (a download's blocks, a zip's, a push over many homes, a folder's
modules) in a file thread. Each call takes one of the places its user has
(gate.py), so no student can fill the file processes or threads the class
shares, and has FILE_DEADLINE to answer; a storage error becomes a refusal
that says so (faults.py). A change made is announced to the open IDEs
(changes.py) by the method that made it.

What it needs of classes (who may read or write a course folder, whose
home a teacher may read) it declares as `Membership`, which
teaching/classes.py implements: files imports nothing of teaching.
"""
from __future__ import annotations  # the annotations name `list` in a class that has a method of that name

import asyncio
import builtins
import logging
import threading
import time
from typing import Any, Awaitable, Callable, Protocol, TypeVar

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
from .changes import FileChanges
from .child.protocol import Op
from .modules import modules
from .processes import FileProcesses
from .push import Pushed, copy_into_homes
from .usage import HomeUsage
from .paths import Parts
from .store import Meta, Store

log = logging.getLogger(__name__)

T = TypeVar("T")

STAFF = ("teacher", "admin")
SIGN_IN_WAIT = 1.0  # seconds a sign-in waits for its home to be made
DOWNLOAD_BLOCK = 256 << 10  # bytes of a download read at a time
# The store's operations that change an area (an exam folder asks the exam first).
_WRITES = {Op.SAVE, Op.MKDIR, Op.MOVE, Op.DELETE, Op.RESTORE, Op.TRASH_RESTORE}
# Operations whose success shows the storage takes changes again (no longer read-only or full).
_CHANGES = {"save", "upload", "mkdir", "move", "restore", "delete", "home", "push"}


class Membership(Protocol):
    """What files needs to know of classes (teaching/classes.py has it)."""

    async def area(self, user: dict[str, Any], spec: str, write: bool) -> Area:
        """The course folder `spec` names (`course`, `class/<id>`) or a
        class's checks (`checks/<id>`), if `user` may read it (or write it,
        with `write`); else Refused."""

    async def may_read_home(self, user: dict[str, Any], owner: str) -> bool | None:
        """Whether `user` (staff) may read the home of `owner`; None when,
        for `user`, there is no such student."""


class ExamFolders(Protocol):
    """What files needs to know of exams (exams/service.py has it)."""

    async def area(self, user: dict[str, Any], spec: str, write: bool) -> Area:
        """The exam folder `spec` names (`exam/<id>`, `exams/<id>/<username>`),
        if `user` may read it (or write it, with `write`); else Refused."""

    async def writable(self, area: Area) -> None:
        """Refused (exam_over) once `area`, an exam folder, is locked."""

    async def keeps_to_its_folder(self, user: dict[str, Any]) -> None:
        """Refused (exam_running) while an exam keeps `user` to its folder."""


class Files:
    def __init__(self, store: Store, processes: FileProcesses, threads: BoundedExecutor, pool: Pool, cfg: Config,
                 classes: Membership):
        self.store = store
        self.processes = processes  # where the store's calls run (processes.py)
        self.threads = threads  # the file threads, for the rest (executor.BoundedExecutor)
        self.pool = pool
        self.cfg = cfg
        self.classes = classes  # who is in which class (a Membership: teaching/classes.py)
        self._areas_made: set[str] = set()  # keys of the course areas known to have their folder
        self.save_times = Batch("save times", self._write_save_times)  # username -> time.time() of the save
        self.health = faults.StorageHealth(store.root, cfg.FILE_DEADLINE)  # for /readyz and /api/status
        self._homes_made: set[str] = set()  # usernames whose home is known to be made, in this worker
        self.changes: FileChanges | None = None  # the open IDEs are told of every change (set by the worker)
        self.exams: ExamFolders | None = None  # whose folders lock at each student's end (set by the worker)
        self.usage = HomeUsage(pool, lambda username: self.measure(username, Area.home(username)))

    # -- where a call runs ------------------------------------------------------------

    async def _placed(self, username: str, op: str, call: Callable[[float], Awaitable[T]],
                  seconds: float | None = None) -> T:
        """await call(deadline) in `username`'s place, timed as `op` (the
        metric's label). It has `seconds` (FILE_DEADLINE) to answer, waiting
        for its place included; past that the student is told the file
        server is not answering. A storage error (read-only, full, I/O)
        becomes a refusal that says so (faults.py)."""
        loop = asyncio.get_running_loop()
        started, began = time.perf_counter(), time.time()
        deadline = loop.time() + (seconds or self.cfg.FILE_DEADLINE)
        try:
            async with gate.place(username, deadline):
                result = await call(deadline)
        except faults.NotAnswering as e:
            if not e.stuck:  # the stuck call told it when it missed its own deadline
                self.health.failed(faults.FAILING, f"a file call did not finish within {self.cfg.FILE_DEADLINE} s "
                                                   "(the file server is not answering)")
            raise
        except OSError as e:
            refusal = faults.refusal(e)
            if refusal is None:
                raise
            self.health.failed(faults.condition_of(e) or faults.FAILING, f"{op}: {e.strerror or e}", began)
            raise refusal from None
        finally:
            metrics.FILE_OPS.labels(op).observe(time.perf_counter() - started)
        self.health.worked(changed=op in _CHANGES, began=began)
        return result

    async def _in_process(self, username: str, op: str, operation: Op, *args: object,
                      seconds: float | None = None) -> Any:
        """The store's `operation` with `args`, in a file process. One that
        changes an exam folder asks the exam first (its end locks it)."""
        area = args[0] if args else None
        if operation in _WRITES and isinstance(area, Area) and area.exam_id is not None:
            if self.exams is None:
                raise Refused(403, "exam_over", "This exam folder can no longer change.")
            await self.exams.writable(area)
        return await self._placed(username, op, lambda deadline: self.processes.call(operation, *args,
                                                                                      deadline=deadline), seconds)

    async def _threaded(self, username: str, op: str, fn: Callable[..., T], *args: object,
                    seconds: float | None = None) -> T:
        """fn(*args) in a file thread: what is not one of the store's
        operations (a stream's next block, work over many homes)."""
        return await self._placed(username, op, lambda deadline: self._in_thread(fn, args, deadline), seconds)

    async def _in_thread(self, fn: Callable[..., T], args: tuple[object, ...], deadline: float) -> T:
        """fn(*args) in a file thread, answered by `deadline`. A thread stuck
        in the kernel cannot be stopped: it is left to finish, and a call
        whose caller gave up before a thread took it is not made at all."""
        given_up = threading.Event()

        def call() -> T:
            if given_up.is_set():
                raise faults.NotAnswering()
            return fn(*args)

        future = asyncio.ensure_future(self.threads.call(call))
        future.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved, also when given up
        try:
            return await asyncio.wait_for(asyncio.shield(future), max(0, deadline - asyncio.get_running_loop().time()))
        except asyncio.TimeoutError:
            if future.done():
                return future.result()
            given_up.set()
            raise faults.NotAnswering() from None

    async def _release(self, fn: Callable[..., object], *args: object) -> None:
        """A call that gives something back (closing a file): never refused,
        and waited for until the deadline at most. Behind a read stuck in a
        hung storage, the close happens when that read returns (a stream
        still running cannot be closed: it is when collected)."""
        deadline = asyncio.get_running_loop().time() + self.cfg.FILE_DEADLINE
        try:
            await self._in_thread(fn, args, deadline)
        except (faults.NotAnswering, ValueError):
            pass

    async def area(self, user: dict[str, Any], spec: str, write: bool) -> Area:
        """The Area `spec` names (home, course, class/<id>, checks/<id>, user/<name>), if `user` may
        read it (or write it, with `write`)."""
        if spec == "home" or spec == "course" or spec.startswith("class/"):
            if self.exams is not None:
                await self.exams.keeps_to_its_folder(user)
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
        if spec.startswith(("exam/", "exams/")):
            if self.exams is None:
                raise Refused(404, "no_such_exam", "There is no such exam.")
            area = await self.exams.area(user, spec, write)
            if area.key not in self._areas_made:
                await self.ensure_area(user["username"], area)
            return area
        if spec == "course" or spec.startswith(("class/", "checks/")):
            area = await self.classes.area(user, spec, write)
            if area.key not in self._areas_made:  # a class's folder is made at its first use
                await self.ensure_area(user["username"], area)
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

    def _changed(self, username: str, area: Area, kind: str, path: str, etag: str | None = None,
                to: str | None = None, kept: str | None = None) -> None:
        """`username` changed `path` in `area`: every open IDE that shows the
        area is told (changes.py), as done by "you" in one's own home and by
        "teacher" anywhere else (a push, the course folder). One's own save
        is also when one last saved, for the teacher's roster: written with
        the worker's next flush of `save_times` (within half a second), never by
        the save itself, which is done and must neither wait for a commit
        nor fail because of one. `kept`: the save replaced the owner's own
        text, kept as this version in its history ("" when its name is not
        known)."""
        own = area.key == Area.home(username).key
        # Their save in their exam's folder too: the proctor view shows it.
        theirs = own or (area.exam_id is not None and area.key == Area.exam(area.exam_id, username).key)
        if kind == "save" and theirs:
            self.save_times.add(username, time.time())
        if self.changes is not None:
            self.changes.announce(area.key, kind, path, etag=etag, to=to, by="you" if own else "teacher", kept=kept)

    async def _write_save_times(self, times: dict[str, Any]) -> None:
        # greatest(): another worker may have recorded a later save already.
        names = list(times)
        await self.pool.execute(
            """UPDATE users u SET last_save_at = greatest(u.last_save_at, to_timestamp(t.at))
               FROM unnest($1::text[], $2::float8[]) AS t(username, at) WHERE u.username = t.username""",
            names, [times[n] for n in names])

    # -- reading ----------------------------------------------------------------------

    async def is_dir(self, username: str, area: Area, parts: Parts) -> bool:
        result: bool = await self._in_process(username, "stat", Op.IS_DIR, area, parts)
        return result

    async def list(self, username: str, area: Area, parts: Parts) -> builtins.list[Meta]:
        """The entries of a folder."""
        result: builtins.list[Meta] = await self._in_process(username, "list", Op.LIST, area, parts)
        return result

    async def tree(self, username: str, area: Area, parts: Parts) -> tuple[builtins.list[Meta], bool]:
        """Everything below a folder: (entries, truncated)."""
        result: tuple[builtins.list[Meta], bool] = await self._in_process(username, "tree", Op.TREE, area, parts)
        return result

    async def read(self, username: str, area: Area, parts: Parts,
                   limit: int | None = None) -> tuple[bytes | None, str | None, Meta]:
        """(data, etag, meta) of a file; data None past `limit` bytes."""
        result: tuple[bytes | None, str | None, Meta] = await self._in_process(username, "read", Op.READ, area,
                                                                               parts, limit)
        return result

    async def history(self, username: str, area: Area, parts: Parts) -> builtins.list[Meta]:
        """The earlier versions of a file."""
        result: builtins.list[Meta] = await self._in_process(username, "history", Op.HISTORY, area, parts)
        return result

    async def read_version(self, username: str, area: Area, parts: Parts, version: str) -> bytes:
        result: bytes = await self._in_process(username, "read", Op.READ_VERSION, area, parts, version)
        return result

    async def trash_list(self, username: str, area: Area) -> builtins.list[Meta]:
        """What was deleted from an area."""
        result: builtins.list[Meta] = await self._in_process(username, "trash", Op.TRASH_LIST, area)
        return result

    async def download(self, username: str, area: Area, parts: Parts) -> Stream:
        """A file's bytes, block by block, read in the file threads (the
        open file stays in the worker)."""
        f = await self._threaded(username, "download", self.store.open_download, area, parts)
        return Stream(self, username, "download", lambda: f.read(DOWNLOAD_BLOCK) or None, f.close)

    async def zip(self, username: str, area: Area, parts: Parts) -> Stream:
        """A folder as a zip, block by block, made in the file threads as it
        is read; the first block vets the folder."""
        chunks = self.store.zip_chunks(area, parts)
        return Stream(self, username, "zip", lambda: next(chunks, None), chunks.close)

    async def python_modules(self, username: str, area: Area, folder: Parts, edited: str,
                             source: str) -> dict[str, str]:
        """{file name: text} of the Python modules beside the edited file
        `edited` in `folder` that editing help needs (modules.py)."""
        result = await self._threaded(username, "assist", modules, self.store, area, folder, edited, source)
        return result

    # -- changing (each change is announced to the open IDEs) --------------------------

    async def save(self, username: str, area: Area, parts: Parts, data: bytes, if_match: str | None) -> dict[str, Any]:
        """Save a file (only if its etag is still `if_match`, when given; "*":
        any existing file): its meta."""
        meta: Meta = await self._in_process(username, "save", Op.SAVE, area, parts, data, if_match)
        self._changed(username, area, "save", "/".join(parts), etag=meta.get("etag"))
        return meta

    async def mkdir(self, username: str, area: Area, parts: Parts) -> None:
        await self._in_process(username, "mkdir", Op.MKDIR, area, parts)
        self._changed(username, area, "mkdir", "/".join(parts))

    async def move(self, username: str, area: Area, parts: Parts, dest: Parts) -> None:
        await self._in_process(username, "move", Op.MOVE, area, parts, dest)
        self._changed(username, area, "move", "/".join(parts), to="/".join(dest))

    async def delete(self, username: str, area: Area, parts: Parts) -> dict[str, Any]:
        """Delete a file or folder (into the area's trash): what was deleted."""
        done: Meta = await self._in_process(username, "delete", Op.DELETE, area, parts)
        self._changed(username, area, "delete", "/".join(parts))
        return done

    async def restore(self, username: str, area: Area, parts: Parts, version: str) -> dict[str, Any]:
        """Save an earlier version of a file as its newest: its meta."""
        meta: Meta = await self._in_process(username, "restore", Op.RESTORE, area, parts, version)
        self._changed(username, area, "save", "/".join(parts), etag=meta.get("etag"))
        return meta

    async def trash_restore(self, username: str, area: Area, record: str, path: str | None) -> dict[str, Any]:
        """Put back one delete (or the file `path` of it): {"restored", "skipped"}."""
        report: Meta = await self._in_process(username, "restore", Op.TRASH_RESTORE, area, record, path)
        for restored in report["restored"]:
            self._changed(username, area, "save", restored)
        return report

    async def upload(self, username: str, area: Area, folder: Parts, uploads: builtins.list[tuple[str, bytes]],
                     overwrite: bool) -> dict[str, Any]:
        """Save uploaded (file name, bytes) into `folder`: every name is vetted
        first (nothing is saved if one is bad), then each file is saved or
        refused on its own (an existing file only with `overwrite`)."""
        if not uploads:
            raise Refused(400, "no_files", "The upload holds no files.")
        names = [paths.parse(name, allow_root=False) for name, _ in uploads]
        saved, refused = [], []
        for (_, data), name in zip(uploads, names):
            try:
                saved.append(await self._in_process(username, "upload", Op.SAVE, area, folder + name, data,
                                                    "*" if overwrite else None))
            except Refused as e:
                if e.status == 503 and not saved:  # the storage fails, not this file: say so, as a save would
                    raise
                refused.append({"path": "/".join(folder + name), "error": e.code, "message": e.message})
        for meta in saved:
            self._changed(username, area, "save", meta["path"], etag=meta.get("etag"))
        return {"saved": saved, "refused": refused}

    async def push(self, username: str, course: Area, source: Parts, usernames: builtins.list[str],
                   as_pushed: dict[tuple[str, str], str], changed: str = "keep") -> Pushed:
        """Copy `source` of the course area `course` into the homes of
        `usernames` (push.py; `changed`: what becomes of copies they
        changed); their open editors show it at once, and one whose copy
        was replaced is told where theirs is kept."""
        # A push writes into every chosen home: its deadline grows with the class.
        done = await self._threaded(username, "push", copy_into_homes, self.store, course, tuple(source), usernames,
                                    as_pushed, changed, seconds=self.cfg.FILE_DEADLINE * (2 + len(usernames) // 10))
        for owner, pushed, etag, kept in done.announced:
            self._changed(username, Area.home(owner), "save", pushed, etag, kept=kept)
        return done

    async def ensure_area(self, username: str, area: Area) -> None:
        """A course area's folder, made if it is not there yet."""
        await self._in_process(username, "area", Op.ENSURE_AREA, area)
        self._areas_made.add(area.key)

    # -- for runs ----------------------------------------------------------------------

    async def runnable_size(self, username: str, area: Area, parts: Parts) -> int:
        """Refused unless `parts` is a file that may run, in a home within its
        quota; what the home holds (bytes) as recorded."""
        result: int = await self._in_process(username, "run", Op.RUNNABLE_SIZE, area, parts)
        return result

    async def runnable_listed(self, username: str, area: Area,
                              parts: Parts) -> tuple[int, tuple[builtins.list[Meta], bool]]:
        """runnable_size, and the home's tree (as `tree`), in one call."""
        result: tuple[int, tuple[builtins.list[Meta], bool]] = await self._in_process(
            username, "run", Op.RUNNABLE_LISTED, area, parts)
        return result

    async def course_copy(self, username: str, course: Area, parts: Parts) -> tuple[int, dict[str, bytes]]:
        """Refused unless `parts` is a file of the course area `course` that
        `username` may run from their home, within its quota: (bytes the
        home holds, {name: bytes} of the file and those beside it), which
        the sandbox runs as a read-only copy (run_copy.py)."""
        result: tuple[int, dict[str, bytes]] = await self._in_process(username, "run", Op.COURSE_COPY, course, parts,
                                                                      Area.home(username))
        return result

    async def snapshot(self, username: str, parts: Parts, area: Area | None = None) -> dict[str, bytes]:
        """The file `parts` of `username`'s home (or of their exam folder
        `area`) and the files beside it (run_copy.py's bounds), read once:
        what every run of an attempt runs, whatever its programs do
        meanwhile. Refused as course_copy is."""
        home = area or Area.home(username)
        copy: tuple[int, dict[str, bytes]] = await self._in_process(username, "run", Op.COURSE_COPY, home, parts, home)
        return copy[1]

    async def quota_problem(self, username: str, area: Area) -> str | None:
        """While a program runs: the sentence saying the area is over its
        quota, measured afresh; None within it."""
        result: str | None = await self._in_process(username, "quota", Op.QUOTA_PROBLEM, area, True)
        return result

    async def room_left(self, username: str, area: Area) -> int | None:
        """While a program runs: the bytes its quota leaves, measured afresh;
        None when it is over."""
        used, _, problem = await self._in_process(username, "quota", Op.MEASURE, area)
        return None if problem else self.cfg.QUOTA_BYTES - used

    async def measure(self, username: str, area: Area) -> tuple[int, int, str | None]:
        """After a run: (bytes, files, the over-quota sentence or None) the area holds."""
        result: tuple[int, int, str | None] = await self._in_process(username, "measure", Op.MEASURE, area)
        return result

    # -- homes ---------------------------------------------------------------------------

    async def prepare_home(self, user: dict[str, Any]) -> None:
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

    async def ensure_home(self, user: dict[str, Any]) -> str:
        """The user's home, made at first use (0700, theirs; a student's with
        the welcome file once); its path."""
        await self._in_process(user["username"], "home", Op.ENSURE_HOME, user["username"],
                               user["role"] == "student", run_uid(self.cfg, user["id"]))
        self._homes_made.add(user["username"])
        return self.store.home_path(user["username"])


def _unexpected_logged(task: "asyncio.Task[str]") -> None:
    """Read a background call's outcome; a refusal is expected, anything else a bug."""
    if not task.cancelled() and task.exception() is not None and not isinstance(task.exception(), Refused):
        log.error("making a home failed", exc_info=task.exception())


class Stream:
    """A download or a zip read block by block, each in its user's place
    in the file threads (Files.download, Files.zip)."""

    def __init__(self, files: Files, username: str, op: str, next_block: Callable[[], bytes | None],
             close: Callable[[], object]) -> None:
        self._files, self._username, self._op = files, username, op
        self._next_block, self._close = next_block, close

    async def next(self) -> bytes | None:
        """The next block; None at the end."""
        return await self._files._threaded(self._username, self._op, self._next_block)

    async def close(self) -> None:
        """Give the open file back: never refused, waited for until the
        deadline at most (Files._release)."""
        await self._files._release(self._close)
