"""HTTP endpoints of exercises: the teacher's (a class's exercises, the
grid, grades.csv, a student's latest attempt) and the student's (their
exercises, one as they may see it, starting one). Parse, authorize, call
the service (service.py), answer."""
from ..accounts import rules
from ..web import ApiError, ApiHandler
from . import model
from .service import Exercises

STAFF = ("teacher", "admin")
SLUG = r"([^/]+)"  # any segment: the service answers a bad one with a sentence


class ExercisesBase(ApiHandler):
    @property
    def exercises(self) -> Exercises:
        return self.ctx.exercises


class ClassExercisesHandler(ExercisesBase):
    """GET a class's exercises, each with its problems (teachers)."""

    async def get(self, number: str) -> None:
        teacher = await self.require_user(*STAFF)
        self.finish_json({"exercises": await self.exercises.list(teacher, int(number))})


class ClassExerciseHandler(ExercisesBase):
    """GET one exercise whole; PUT the browser's form to create or replace
    it ({title, file, due, checks, instructions, tests, starter, etag});
    DELETE it (into the checks area's trash). Teachers."""

    max_body = model.MAX_TEXT * 8  # instructions, tests and starter files

    async def get(self, number: str, slug: str) -> None:
        teacher = await self.require_user(*STAFF)
        self.finish_json(await self.exercises.read(teacher, int(number), slug))

    async def put(self, number: str, slug: str) -> None:
        teacher = await self.require_user(*STAFF)
        self.finish_json(await self.exercises.save(teacher, int(number), slug, self.json_body()))

    async def delete(self, number: str, slug: str) -> None:
        teacher = await self.require_user(*STAFF)
        await self.exercises.delete(teacher, int(number), slug)
        self.finish_json({"deleted": slug})


class AttemptHandler(ExercisesBase):
    """GET a student's latest attempt at an exercise, with every check's
    details (teachers)."""

    async def get(self, number: str, slug: str, username: str) -> None:
        teacher = await self.require_user(*STAFF)
        if rules.username_problem(username):
            raise ApiError(404, "no_such_student", "There is no such student in this class.")
        self.finish_json(await self.exercises.latest_attempt(teacher, int(number), slug, username))


class GridHandler(ExercisesBase):
    """GET the class x exercises grid (teachers)."""

    async def get(self, number: str) -> None:
        teacher = await self.require_user(*STAFF)
        self.finish_json(await self.exercises.grid(teacher, int(number)))


class GradesHandler(ExercisesBase):
    """GET grades.csv: a row per student, a column per exercise (teachers)."""

    async def get(self, number: str) -> None:
        teacher = await self.require_user(*STAFF)
        text = await self.exercises.grades_csv(teacher, int(number))
        self.set_header("Content-Type", "text/csv; charset=utf-8")
        self.set_header("Content-Disposition", f'attachment; filename="grades-{int(number)}.csv"')
        self.set_header("Cache-Control", "no-store")
        self.finish("\ufeff" + text)  # the byte order mark: spreadsheets then read UTF-8 as UTF-8


class MyExercisesHandler(ExercisesBase):
    """GET the exercises of every class one is in, with one's progress."""

    async def get(self) -> None:
        user = await self.require_user()
        self.finish_json({"exercises": await self.exercises.assigned(user)})


class ExerciseHandler(ExercisesBase):
    """GET one exercise as a student may see it."""

    async def get(self, number: str, slug: str) -> None:
        user = await self.require_user()
        self.finish_json(await self.exercises.student_view(user, int(number), slug))


class StartHandler(ExercisesBase):
    """POST: copy the starter files into <slug>/ of one's home (never over
    one's own work); the path of the file the checks read."""

    async def post(self, number: str, slug: str) -> None:
        user = await self.require_user()
        self.finish_json(await self.exercises.start(user, int(number), slug))
