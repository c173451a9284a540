"""HTTP and WebSocket endpoints of teaching: classes and their members, the
roster, pushing starter files, new passwords for a class's students, the
live class view (/ws/class/<id>), and talking to the class (messages,
raised hands)."""
import logging

from tornado import websocket

from .. import public_url
from ..accounts import sessions
from ..errors import Refused
from ..files import paths
from ..sockets import answering, message_of, refuse, send_json
from ..web import ApiError, ApiHandler, user_for_session
from .classes import MAX_MEMBERS_CHANGE
from .talk import MAX_FILE, MAX_NOTE, MAX_TEXT

log = logging.getLogger(__name__)


def _number(text, error, message):
    """A number from a URL, None without one, or 400 (`error`, `message`)."""
    if text is None:
        return None
    if not text.isascii() or not text.isdigit() or len(text) > 18:
        raise ApiError(400, error, message)
    return int(text)


def class_id(text):
    """A class id from a URL, or 400."""
    return _number(text, "bad_class", "class must be a class's number.")


def exam_id(text):
    """An exam id from a URL's ?exam=, or 400."""
    return _number(text, "bad_exam", "exam must be an exam's number: open the proctor view from the class's Exams.")


class ClassesHandler(ApiHandler):
    """GET the classes one teaches or is in (an admin: all); POST {"name"}
    (admins) makes a class."""

    async def get(self):
        user = await self.require_user()
        self.finish_json({"classes": await self.ctx.teaching.classes.visible(user)})

    async def post(self):
        admin = await self.require_user("admin")
        name = self.field(self.json_body(), "name", str, max_len=1000)
        self.finish_json({"class": await self.ctx.teaching.create_class(admin["username"], name)}, 201)


class ClassHandler(ApiHandler):
    """POST {"name"} (admins): rename a class."""

    async def post(self, number):
        admin = await self.require_user("admin")
        name = self.field(self.json_body(), "name", str, max_len=1000)
        await self.ctx.teaching.classes.rename(admin["username"], class_id(number), name)
        self.finish_json({"id": class_id(number), "name": name.strip()})


class ClassMembersHandler(ApiHandler):
    """GET a class's teachers and students; POST {"add": [usernames],
    "remove": [usernames]} (admins) changes them."""

    async def get(self, number):
        await self.require_user("admin")
        self.finish_json({"members": await self.ctx.teaching.classes.members(class_id(number))})

    async def post(self, number):
        admin = await self.require_user("admin")
        body = self.json_body()
        add, remove = (self.usernames(body, name) for name in ("add", "remove"))
        self.finish_json(await self.ctx.teaching.classes.change_members(admin["username"], class_id(number),
                                                                        add, remove))

    def usernames(self, body, name):
        found = self.field(body, name, list, required=False, default=[])
        if len(found) > MAX_MEMBERS_CHANGE or not all(isinstance(u, str) and len(u) <= 64 for u in found):
            raise ApiError(400, "wrong_type", f"The field '{name}' must be a list of usernames.")
        return found


class ClassPasswordsHandler(ApiHandler):
    """POST {"students": [usernames]?}: new passwords (shown once) for the
    class's active students, or those named, by its teachers and admins;
    with the address the slips print (`sign_in_at`)."""

    async def post(self, number):
        teacher = await self.require_user("teacher", "admin")
        chosen = self.field(self.json_body(), "students", list, required=False)
        if chosen is not None and (len(chosen) > MAX_MEMBERS_CHANGE
                                   or not all(isinstance(u, str) and len(u) <= 64 for u in chosen)):
            raise ApiError(400, "wrong_type", "The field 'students' must be a list of usernames.")
        made = await self.ctx.teaching.new_passwords(teacher, class_id(number), chosen)
        self.finish_json({**made, "sign_in_at": public_url.sign_in_at(self.ctx.cfg)})


class RosterHandler(ApiHandler):
    """GET ?class=<id> (default: the default class): its students, live."""

    async def get(self):
        teacher = await self.require_user("teacher", "admin")
        self.finish_json(await self.ctx.teaching.roster(teacher, class_id(self.get_argument("class", None))))


class PushHandler(ApiHandler):
    """POST {"path": in the course folder, "area": "course" or "class/<id>"
    (default "course"), "students": [...] (default: the class's active
    students), "changed": "keep" (default), "overwrite" or "new_file"}:
    copy a starter file or folder into their homes; copies they have not
    changed are updated, the others kept, overwritten (theirs kept in
    history) or given the starter beside them."""

    async def post(self):
        teacher = await self.require_user("teacher", "admin")
        body = self.json_body()
        source = paths.parse(self.field(body, "path", str, max_len=paths.MAX_PATH_BYTES), allow_root=False)
        spec = self.field(body, "area", str, max_len=40, required=False, default="course")
        chosen = self.field(body, "students", list, required=False)
        if chosen is not None and not all(isinstance(u, str) for u in chosen):
            raise ApiError(400, "wrong_type", "The field 'students' must be a list of usernames.")
        changed = self.field(body, "changed", str, max_len=20, required=False, default="keep")
        self.finish_json(await self.ctx.teaching.push(teacher, spec, source, chosen, changed))


class ClassSocket(websocket.WebSocketHandler):
    """/ws/class/<id>: the live view of a class, for its teachers and admins.
    The server sends `snapshot` (every student) and `update` (those that
    changed) messages, with `hands` (the raised hands, oldest first)
    whenever they changed. The client may send `{"type": "follow",
    "username"}` (a student of the class; null: nobody): then `console`
    messages tell that student's console (following.py); a refusal is an
    `error` message. With ?exam=<id> (an exam of the class), the proctor
    view: each student's row has their `exam` fields (live.py)."""

    @property
    def live(self):
        return self.application.settings["ctx"].teaching.live

    @property
    def teaching(self):
        return self.application.settings["ctx"].teaching

    async def prepare(self):
        """Refuse the upgrade with a JSON 4xx (a 503 while the database
        cannot tell) unless a teacher of the class asks."""
        self.watcher, self.gone, self.follower = None, False, None
        try:
            if self.request.headers.get("Upgrade", "").lower() != "websocket":
                raise ApiError(400, "not_a_websocket", "Open the live class view with a WebSocket.")
            self.user, problem, token = await user_for_session(self)
            if self.user is None:
                raise Refused(401, problem, "Log in first.")
            ctx = self.application.settings["ctx"]
            found = await ctx.teaching.classes.teaching(self.user, class_id(self.path_args[0]))
            self.exam_id = exam_id(self.get_argument("exam", None))
            if self.exam_id is not None:
                await ctx.exams.proctoring(self.user, self.exam_id, found["id"])
        except (Refused, ApiError) as e:
            return refuse(self, e)
        self.class_id, self.token_hash = found["id"], sessions.token_hash(token)

    async def open(self, _number):
        self.set_nodelay(True)
        try:
            watcher = await self.live.watch(self.user, self.token_hash, self.class_id, self.send, self.close,
                                            self.exam_id)
        except Exception as e:
            if not isinstance(e, Refused):
                log.exception("could not open the live view of class %s", self.class_id)
            return self.close(1011, "The class cannot be shown now; trying again.")
        if self.gone:
            self.live.unwatch(watcher)
        else:
            self.watcher = watcher
            self.follower = self.teaching.following.follower(self.send)

    def on_close(self):
        self.gone = True
        if self.watcher is not None:
            self.live.unwatch(self.watcher)
        if self.follower is not None:
            self.teaching.following.closed(self.follower)

    async def on_message(self, message):
        if self.follower is not None:  # else not open (yet), or closing
            await answering(self.send, lambda: self.act(message_of(message)), "a /ws/class message")

    async def act(self, msg):
        if msg["type"] != "follow":
            raise Refused(400, "unknown_type", f"Unknown message type {msg['type'][:40]!r}.")
        username = msg.get("username")
        if username is not None and not (isinstance(username, str) and 0 < len(username) <= 64):
            raise Refused(400, "bad_field", "'username' must be a student's username, or null.")
        await self.teaching.follow(self.follower, self.class_id, username)

    async def send(self, message):
        await send_json(self, message)


# -- talking to the class (talk.py) ---------------------------------------------------


class ClassMessagesHandler(ApiHandler):
    """POST {"text", "students": [usernames] (default: the whole class)}
    (the class's teachers, admins): a message to the students' open IDEs."""

    async def post(self, number):
        teacher = await self.require_user()
        body = self.json_body()
        text = self.field(body, "text", str, max_len=10 * MAX_TEXT)
        chosen = self.field(body, "students", list, required=False)
        if chosen is not None and (len(chosen) > MAX_MEMBERS_CHANGE or not all(
                isinstance(u, str) and len(u) <= 64 for u in chosen)):
            raise ApiError(400, "wrong_type", "The field 'students' must be a list of usernames.")
        self.finish_json(await self.ctx.teaching.talk.broadcast(teacher, class_id(number), text, chosen), 201)


class TalkHandler(ApiHandler):
    """GET: what an IDE opened now shows: the latest messages sent to the
    user in the last minutes, their raised hands, and the starters their
    teachers sent that they kept their own version of."""

    async def get(self):
        user = await self.require_user()
        teaching = self.ctx.teaching
        self.finish_json({**await teaching.talk.recent_for(user), "starters": await teaching.starters.pending_for(user)})


class StarterHandler(ApiHandler):
    """POST /api/classes/<id>/starters/take {"path"}: the new version of a
    starter the student kept their own of, saved beside theirs (where:
    {"path"}); .../starters/aside {"path"}: not now, thanks."""

    async def post(self, number, action):
        student = await self.require_user()
        path = "/".join(paths.parse(self.field(self.json_body(), "path", str, max_len=paths.MAX_PATH_BYTES),
                                    allow_root=False))
        starters = self.ctx.teaching.starters
        if action == "take":
            self.finish_json(await starters.take(student, class_id(number), path))
        else:
            await starters.put_aside(student, class_id(number), path)
            self.finish_json({"path": path})


class HandHandler(ApiHandler):
    """POST {"note"?, "file"?, "line"?} (a student of the class): raise
    one's hand; DELETE: lower it."""

    async def post(self, number):
        student = await self.require_user()
        await self.ctx.exams.forbids(student, "ask")
        body = self.json_body()
        note = self.field(body, "note", str, max_len=10 * MAX_NOTE, required=False, default="")
        file = self.field(body, "file", str, max_len=10 * MAX_FILE, required=False)
        line = self.field(body, "line", int, required=False)
        self.finish_json({"hand": await self.ctx.teaching.talk.raise_hand(student, class_id(number), note, file,
                                                                           line)})

    async def delete(self, number):
        await self.ctx.teaching.talk.lower_hand(await self.require_user(), class_id(number))
        self.finish_json({"up": False})


class HandsHandler(ApiHandler):
    """GET (the class's teachers, admins): its raised hands, oldest first
    (the live socket sends them too); DELETE .../hands/<username>: that
    hand is answered."""

    async def get(self, number, username=None):
        teacher = await self.require_user()
        if username:
            raise ApiError(405, "method_not_allowed", "Read the whole queue: GET .../hands.")
        self.finish_json({"hands": await self.ctx.teaching.talk.queue(teacher, class_id(number))})

    async def delete(self, number, username=None):
        teacher = await self.require_user()
        if not username:
            raise ApiError(405, "method_not_allowed", "Answer one student's hand: DELETE .../hands/<username>.")
        await self.ctx.teaching.talk.answer(teacher, class_id(number), username)
        self.finish_json({"answered": username})
