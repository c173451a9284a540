"""WebSocket /ws/run: one connection per open IDE (docs/run-protocol.md).

The handler authenticates the upgrade, turns messages into calls on the
worker's RunManager (manager.py), and sends what it is given. Whatever a
message does wrong, its answer is an `error` message; whatever ends the
socket, the manager is told, and the run stops and gives back its lock.
After a `watch` message, the same socket tells the IDE of changes to the
files it shows (the user's home, their classes' course folders:
files/changes.py) and what is said to the user (a teacher's message, a
hand answered: server/inbox.py).
"""
import asyncio
import json
import logging
from typing import Any

from tornado import websocket

from ..accounts import sessions
from ..errors import Refused
from .. import seb
from ..files import paths
from ..files.area import Area
from ..sockets import answering, message_of
from ..web import user_for_session
from . import debugging, messages
from .manager import Connection, Reply, RunManager
from .spec import DebugOptions, Limits, Mode, RunSpec

log = logging.getLogger(__name__)

DEBUG_KINDS = ("step", "step_in", "step_out", "continue", "frame", "breakpoints", "watches")


class RunSocket(websocket.WebSocketHandler):
    @property
    def manager(self) -> RunManager:
        manager: RunManager = self.application.settings["ctx"].runs
        return manager

    async def prepare(self) -> None:
        """Refuse the upgrade (a JSON 401) without a valid session, (a JSON
        503) while the database cannot tell."""
        self.conn: Connection | None = None
        self.watch: Any = None  # files/changes.py's watch, once `watch` asked for it
        self.box: Any = None  # server/inbox.py's box, likewise
        self.stream: Any = None  # replay/service.py's stream, from the first `edits`
        try:
            user, problem, token = await user_for_session(self)
        except Refused as e:  # the database is unavailable
            return self.refuse(e.status, e.code, e.message, e.retry_after)
        if user is None or token is None:
            self.refuse(401, problem or "not_logged_in", "Log in first.")
            return
        self.user: dict[str, Any] = user
        self.token: str = token
        # What the upgrade showed of Safe Exam Browser: an exam that requires it asks at each run and check.
        self.seb = seb.proof_of(self, self.application.settings["ctx"].cfg, socket=True)

    def refuse(self, status: int, code: str, message: str, retry_after: float | None = None) -> None:
        self.set_status(status)
        if retry_after:
            self.set_header("Retry-After", str(retry_after))
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(json.dumps({"error": code, "message": message}))

    def open(self, *args: str, **kwargs: str) -> None:
        self.set_nodelay(True)  # small frames must not wait for a delayed ACK
        self.conn = self.manager.open(self.user, sessions.token_hash(self.token), self.send, self.end)
        if self.conn is None:
            self.close(4002, "Too many IDEs are open for this account.")

    def start_watching(self) -> None:
        if self.watch is not None:
            return
        ctx = self.application.settings["ctx"]
        files = ctx.files
        self.watch = files.changes.watch({Area.home(self.user["username"]).key: "home"}, self.send)
        self.box = ctx.inbox.open(self.user["id"], self.send)
        asyncio.ensure_future(self.watch_courses(files, ctx.exams))

    async def watch_courses(self, files: Any, exams: Any) -> None:
        """The course folders of the user's classes too, once the database
        says which (a course folder's area key is the page's name for it),
        and the folder of the exam they are taking (which notes the IDE
        opened, exams/service.py)."""
        try:
            found = await files.classes.visible(self.user)
        except Exception:  # the database is away: the home is followed all the same
            return
        for c in found:
            if self.watch is not None:
                files.changes.also(self.watch, c["area"], c["area"])
        try:
            exam = await exams.ide_opened(self.user, sessions.token_hash(self.token))
        except Exception:
            log.warning("could not note %s's IDE in their exam", self.user["username"], exc_info=True)
            return
        if exam is not None and self.watch is not None:
            files.changes.also(self.watch, Area.exam(int(exam.split("/")[1]), self.user["username"]).key, exam)

    def on_close(self) -> None:
        if self.watch is not None:
            self.application.settings["ctx"].files.changes.unwatch(self.watch)
            self.watch = None
        if self.box is not None:
            self.application.settings["ctx"].inbox.close(self.box)
            self.box = None
        if self.conn is not None:
            self.manager.closed(self.conn)
        if self.stream is not None:
            self.application.settings["ctx"].replays.end(self.stream)

    def end(self, code: int, reason: str) -> None:
        """The manager closes the socket (a session that ended, another tab)."""
        self.close(code, reason)

    async def on_message(self, message: str | bytes) -> None:
        conn = self.conn
        if conn is not None:  # else refused at open: closing
            reply = Reply(conn, None)  # names the message's id once it is known
            await answering(reply.send, lambda: self.act(conn, message, reply), "a /ws/run message")

    async def act(self, conn: Connection, text: str | bytes, reply: Reply) -> None:
        """Do what a message asks; its answers (an error too) name its id."""
        msg = message_of(text)
        reply.re = messages.id_of(msg)
        kind = messages.validate(msg)["type"]
        if kind == "watch":
            return self.start_watching()
        if kind in ("run", "debug"):
            return self.manager.start(conn, await self.run_spec(msg, Mode(kind)), reply.re)
        if kind in DEBUG_KINDS:
            session = self.manager.debugging(conn)
            if session is None:
                raise Refused(409, "not_debugging", "No program is being debugged. Press Debug first.")
            return session.command(kind, msg)
        if kind == "viewing":
            return self.viewing(msg)
        if kind == "edits":
            replays = self.application.settings["ctx"].replays
            self.stream = self.stream or replays.stream(self.user)
            await replays.add(self.stream, msg)
            return
        if kind == "prepare_check":
            return self.manager.prepare_attempt(conn)
        if kind == "check":
            exams = self.application.settings["ctx"].exams
            if msg.get("area", "home") == "home":
                await exams.keeps_to_its_folder(self.user)  # (it checks the home's file)
                area = None
            else:
                await exams.require_seb_for(self.user, msg["area"], self.seb)
                area = await exams.checkable(self.user, msg["area"], msg["class"], msg["exercise"])
            return self.manager.attempt(conn, msg["class"], msg["exercise"], msg.get("etag"), reply.re, area)
        run = self.manager.running(conn)  # (the table knows no other type: the program's input)
        if run is None:
            raise Refused(409, "not_running", "No program is running.")
        if kind == "stdin":
            run.stdin(msg["data"])
        elif kind == "interrupt":
            session = self.manager.debugging(conn)
            if session is not None:  # paused: once it has a place again
                session.interrupt(reply.re)
            else:
                run.interrupt()
        elif kind == "eof":
            run.end_of_input()
        elif kind == "kill":
            await run.stop("killed")
        else:
            run.resize(msg["cols"], msg["rows"])

    def viewing(self, msg: dict[str, Any]) -> None:
        """The file the IDE shows now (a path of the home, or null: none),
        for the teacher's view of the student."""
        path = None
        if msg.get("path") is not None:
            path = "/".join(paths.parse(msg["path"], allow_root=False))
        self.application.settings["ctx"].teaching.student_viewing(self.user, path)

    async def course_of(self, msg: dict[str, Any]) -> Area | None:
        """The course or exam folder a `run` names (`area`), if the user may
        read it, and run in it for an exam (its file then runs as a
        read-only copy); None for their home."""
        spec = msg.get("area", "home")
        ctx = self.application.settings["ctx"]
        if spec == "home":
            await ctx.exams.keeps_to_its_folder(self.user)
            return None
        if spec.startswith("exam/"):
            await ctx.exams.require_seb_for(self.user, spec, self.seb)
            exam_area: Area = await ctx.exams.runnable(self.user, spec)
            return exam_area
        if spec != "course" and not spec.startswith("class/"):
            raise Refused(400, "not_runnable_here", "Only your own files, the course folder's and your exam's "
                                                    "can be run. Copy this file to My files to run it.")
        area: Area = await ctx.files.area(self.user, spec, write=False)
        return area

    async def run_spec(self, msg: dict[str, Any], mode: Mode) -> RunSpec:
        """The run a `run` or `debug` message (its fields' types and bounds
        validated: messages.py) asks for, its path and the debugger's options
        validated before the database is asked anything (the course folder's access)."""
        parts = paths.parse(msg["path"], allow_root=False)
        args = msg.get("args") or []
        cols, rows, etag = msg.get("cols", 80), msg.get("rows", 24), msg.get("etag")
        debug = DebugOptions.of(**debugging.options(msg)) if mode is Mode.DEBUG else None
        course = await self.course_of(msg)
        return RunSpec(self.user["id"], self.user["username"], parts, Limits.of(self.application.settings["ctx"].cfg),
                       mode, course=None if course is None else course.key, args=tuple(args), cols=cols, rows=rows,
                       etag=etag, debug=debug)

    async def send(self, message: dict[str, Any]) -> None:
        if self.ws_connection is None or self.ws_connection.is_closing():
            return
        try:
            await self.write_message(json.dumps(message))
        except websocket.WebSocketClosedError:
            pass  # on_close tells the manager
