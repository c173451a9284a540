"""HTTP endpoints of exams: a class's exams and extra time (teachers), the
exam one is taking (students). Parse, authorize, call the service
(service.py), answer. The exam folders themselves are files like any
other: /api/files/exam/<id>/... (files/handlers.py)."""
from ..accounts import rules, sessions
from ..web import ApiError, ApiHandler
from .. import seb
from .grading import Grading
from .service import Exams

STAFF = ("teacher", "admin")


class ExamsBase(ApiHandler):
    @property
    def exams(self) -> Exams:
        return self.ctx.exams

    @property
    def seb_proof(self) -> seb.Proof:
        """What this request shows of Safe Exam Browser (seb.py)."""
        return seb.proof_of(self, self.ctx.cfg)


class ClassExamsHandler(ExamsBase):
    """GET a class's exams; POST a new one (teachers)."""

    async def get(self, number: str) -> None:
        teacher = await self.require_user(*STAFF)
        self.finish_json({"exams": await self.exams.list(teacher, int(number))})

    async def post(self, number: str) -> None:
        teacher = await self.require_user(*STAFF)
        self.finish_json({"exam": await self.exams.create(teacher, int(number), self.json_body())}, status=201)


class ExamHandler(ExamsBase):
    """GET an exam: with every student's end for its teachers, as it is
    for them for a student of its class."""

    async def get(self, number: str) -> None:
        user = await self.require_user()
        if user["role"] in STAFF:
            self.finish_json({"exam": await self.exams.for_staff(user, int(number))})
        else:
            await self.exams.require_seb(user, int(number), self.seb_proof)
            self.finish_json({"exam": await self.exams.for_student(user, int(number))})


class ExtraTimeHandler(ExamsBase):
    """PUT {"minutes"}: a student's extra time in an exam (teachers)."""

    async def put(self, number: str, username: str) -> None:
        teacher = await self.require_user(*STAFF)
        if rules.username_problem(username):
            raise ApiError(404, "no_such_student", "There is no such student in this exam's class.")
        self.finish_json(await self.exams.give_extra_time(teacher, int(number), username,
                                                           self.json_body().get("minutes")))


class MyExamHandler(ExamsBase):
    """GET the exam running for the student now, else the next: {"exam": ... | null}."""

    async def get(self) -> None:
        user = await self.require_user()
        self.finish_json({"exam": await self.exams.current(user) if user["role"] == "student" else None})


class SignalsHandler(ExamsBase):
    """POST one of the student's own signals ({"kind", ...}: service.py's
    BROWSER_SIGNALS); GET the exam's, for its teachers (?student=<username>,
    ?after=<id>)."""

    async def post(self, number: str) -> None:
        student = await self.require_user("student")
        await self.exams.require_seb(student, int(number), self.seb_proof)
        self.finish_json({"signal": await self.exams.signal(student, int(number), self.json_body())}, status=201)

    async def get(self, number: str) -> None:
        teacher = await self.require_user(*STAFF)
        username = self.get_argument("student", None)
        if username is not None and rules.username_problem(username):
            raise ApiError(404, "no_such_student", "There is no such student in this exam's class.")
        after = self.get_argument("after", "0")
        if not after.isdigit() or len(after) > 18:
            raise ApiError(400, "bad_after", "'after' is the id of the last signal you have, a whole number.")
        self.finish_json({"signals": await self.exams.signals(teacher, int(number), username, int(after))})


class GradeHandler(ExamsBase):
    """POST {"student": <username>} or {}: grade that student's submission,
    or every one whose end has passed (teachers); 202 with what was queued."""

    async def post(self, number: str) -> None:
        teacher = await self.require_user(*STAFF)
        body = self.json_body()
        username = self.field(body, "student", required=False, max_len=64)
        if username is not None and rules.username_problem(username):
            raise ApiError(404, "no_such_student", "There is no such student in this exam's class.")
        grading: Grading = self.ctx.exam_grading
        assert self.session_token is not None  # (require_user found the session)
        self.finish_json({"grading": await grading.grade(teacher, sessions.token_hash(self.session_token),
                                                         int(number), username)}, status=202)


class GradesHandler(ExamsBase):
    """GET the exam's grades (teachers): every check's outcome, hidden ones included."""

    async def get(self, number: str) -> None:
        teacher = await self.require_user(*STAFF)
        grading: Grading = self.ctx.exam_grading
        self.finish_json(await grading.grades(teacher, int(number)))
