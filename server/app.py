"""make_app(): the route table, the one place to see every URL."""
import logging
import time
from typing import TYPE_CHECKING

from tornado import web

from . import metrics
from .accounts.handlers import (ImportUsersHandler, LoginHandler, LogoutHandler, MeHandler, PasswordHandler,
                                UserActiveHandler, UserPasswordHandler, UsersHandler)
from .admin.handlers import StatusHandler
from .assist.handlers import OP as ASSIST_OP, AssistHandler
from .replay.handlers import ReplayHandler
from .exams.handlers import (ClassExamsHandler, ExamHandler, ExtraTimeHandler, GradeHandler,
                             GradesHandler as ExamGradesHandler, MyExamHandler, SignalsHandler)
from .exercises.handlers import (SLUG, AttemptHandler, ClassExerciseHandler, ClassExercisesHandler, ExerciseHandler,
                                 GradesHandler, GridHandler, MyExercisesHandler, StartHandler)
from .files.handlers import AREA, FilesHandler, HistoryHandler, TrashHandler, UploadHandler, ZipHandler
from .health import HealthzHandler, MetricsHandler, PerfCheckHandler, ReadyzHandler
from .pages import (AdminPage, AssetHandler, ClassPage, IconHandler, IdePage, LoginPage, NotFoundHandler,
                    TeacherPage)
from .placement.handlers import HeartbeatHandler
from .runs.handlers import RunSocket
from .signin.handlers import BindingHandler, CallbackHandler as SignInCallback, StartHandler as SignInStart
from .teaching.handlers import (ClassesHandler, ClassHandler, ClassMembersHandler, ClassMessagesHandler,
                                ClassPasswordsHandler, ClassSocket, HandHandler, HandsHandler, PushHandler,
                                RosterHandler, StarterHandler, TalkHandler)
from .web import WorkerHeaders, client_address

if TYPE_CHECKING:  # the worker imports this module
    from .worker import Context

access_log = logging.getLogger("server.access")

ROUTES = [
    (r"/", LoginPage),
    (r"/ide", IdePage),
    (r"/teacher", TeacherPage),
    (r"/admin", AdminPage),
    (r"/class/([0-9]{1,18})", ClassPage),
    (r"/signin/callback", SignInCallback),
    (r"/signin/([a-z0-9-]{1,40})", SignInStart),
    (r"/static/dist/([A-Za-z0-9._-]+)", AssetHandler),
    (r"/favicon\.(?:svg|ico)", IconHandler),
    (r"/healthz", HealthzHandler),
    (r"/readyz", ReadyzHandler),
    (r"/api/runners/heartbeat", HeartbeatHandler),
    (r"/metrics", MetricsHandler),
    (r"/sys_perf_check", PerfCheckHandler),
    (r"/api/login", LoginHandler),
    (r"/api/logout", LogoutHandler),
    (r"/api/me", MeHandler),
    (r"/api/password", PasswordHandler),
    (r"/api/status", StatusHandler),
    (rf"/api/files/{AREA}(?:/(.*))?", FilesHandler),
    (rf"/api/history/{AREA}/(.+)", HistoryHandler),
    (rf"/api/upload/{AREA}(?:/(.*))?", UploadHandler),
    (rf"/api/zip/{AREA}(?:/(.*))?", ZipHandler),
    (rf"/api/trash/{AREA}", TrashHandler),
    (r"/api/roster", RosterHandler),
    (r"/api/course/push", PushHandler),
    (r"/api/classes", ClassesHandler),
    (r"/api/classes/([0-9]{1,18})", ClassHandler),
    (r"/api/classes/([0-9]{1,18})/members", ClassMembersHandler),
    (r"/api/classes/([0-9]{1,18})/messages", ClassMessagesHandler),
    (r"/api/classes/([0-9]{1,18})/hand", HandHandler),
    (r"/api/classes/([0-9]{1,18})/hands(?:/([^/]{1,64}))?", HandsHandler),
    (r"/api/talk", TalkHandler),
    (r"/api/classes/([0-9]{1,18})/starters/(take|aside)", StarterHandler),
    (r"/api/classes/([0-9]{1,18})/passwords", ClassPasswordsHandler),
    (r"/api/classes/([0-9]{1,18})/exercises", ClassExercisesHandler),
    (rf"/api/classes/([0-9]{{1,18}})/exercises/{SLUG}", ClassExerciseHandler),
    (rf"/api/classes/([0-9]{{1,18}})/exercises/{SLUG}/attempts/([^/]+)", AttemptHandler),
    (r"/api/classes/([0-9]{1,18})/grid", GridHandler),
    (r"/api/classes/([0-9]{1,18})/grades\.csv", GradesHandler),
    (r"/api/exercises", MyExercisesHandler),
    (rf"/api/exercises/([0-9]{{1,18}})/{SLUG}", ExerciseHandler),
    (rf"/api/exercises/([0-9]{{1,18}})/{SLUG}/start", StartHandler),
    (r"/api/classes/([0-9]{1,18})/exams", ClassExamsHandler),
    (r"/api/exams/([0-9]{1,18})", ExamHandler),
    (r"/api/exams/([0-9]{1,18})/students/([^/]+)/extra", ExtraTimeHandler),
    (r"/api/exams/([0-9]{1,18})/signals", SignalsHandler),
    (rf"/api/replay/{AREA}(?:/(.*))?", ReplayHandler),
    (r"/api/exams/([0-9]{1,18})/grade", GradeHandler),
    (r"/api/exams/([0-9]{1,18})/grades", ExamGradesHandler),
    (r"/api/exam", MyExamHandler),
    (r"/api/admin/users", UsersHandler),
    (r"/api/admin/users/import", ImportUsersHandler),
    (r"/api/admin/users/([a-z0-9][a-z0-9._-]{0,63})/password", UserPasswordHandler),
    (r"/api/admin/users/([a-z0-9][a-z0-9._-]{0,63})/active", UserActiveHandler),
    (r"/api/admin/users/([a-z0-9][a-z0-9._-]{0,63})/school/([a-z0-9-]{1,40})", BindingHandler),
    (rf"/api/assist/{ASSIST_OP}", AssistHandler),
    (r"/ws/run", RunSocket),
    (r"/ws/class/([0-9]{1,18})", ClassSocket),
]
ROUTE_OF = {route[1]: route[0] for route in ROUTES}


def log_request(handler):
    """Count and time every request by route; log failures."""
    status = handler.get_status()
    seconds = time.perf_counter() - handler._started if hasattr(handler, "_started") else 0.0
    route = ROUTE_OF.get(type(handler), "other")
    metrics.observe_request(route, handler.request.method, status, seconds)
    # 503s (server busy, database unavailable) and 507s (a home over its
    # quota, a full storage) are expected refusals like 4xx: a student over
    # quota whose editor keeps saving is not an error a thousand times; the
    # outage itself is logged once, by the database pool or the file layer.
    level = logging.ERROR if status >= 500 and status not in (503, 507) else \
        logging.INFO if status >= 400 else logging.DEBUG
    if access_log.isEnabledFor(level):
        access_log.log(level, "%d %s %s (%s) %.1fms", status, handler.request.method,
                       handler.request.uri, client_address(handler), seconds * 1000)


def make_app(ctx: "Context") -> web.Application:
    app = web.Application(
        ROUTES,
        ctx=ctx,
        cookie_secret=ctx.cookie_secret,
        xsrf_cookies=True,
        xsrf_cookie_kwargs={"samesite": "Lax"},
        default_handler_class=NotFoundHandler,
        log_function=log_request,
        websocket_max_message_size=128 << 10,
        websocket_ping_interval=30,
    )
    app.add_transform(Compress)
    app.add_transform(WorkerHeaders)
    return app


class Compress(web.GZipContentEncoding):
    """gzip, except for small JSON answers: a file's few KB cross a class's
    network in well under a millisecond, while gzipping them cost the
    worker a tenth of a save + load's CPU. Pages and scripts are gzipped
    from 1 KB, as Tornado does."""

    SMALL_JSON = 8 << 10

    def transform_first_chunk(self, status_code, headers, chunk, finishing):
        if finishing and len(chunk) < self.SMALL_JSON and \
                headers.get("Content-Type", "").startswith("application/json"):
            self._gzipping = False
        return super().transform_first_chunk(status_code, headers, chunk, finishing)
