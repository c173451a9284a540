"""Areas: the trees of files that one lock and one quota cover."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Area:
    key: str          # 'home/ada', 'course', 'class/3', 'checks/3' or 'exam/5/ada'
    parts: tuple[str, ...]  # folders below STORAGE_ROOT
    quota: bool       # homes have quotas; the course area does not

    @staticmethod
    def home(username: str) -> "Area":
        return Area("home/" + username, ("home", username), True)

    @staticmethod
    def course() -> "Area":
        """The course folder of the default class (all there was before classes)."""
        return Area("course", ("course",), False)

    @staticmethod
    def of_class(class_id: int) -> "Area":
        """The course folder of any other class."""
        return Area(f"class/{class_id}", ("classes", str(class_id)), False)

    @staticmethod
    def of_key(key: str) -> "Area":
        """The course folder whose key is `key` ('course', 'class/3'), as a run names it."""
        if key == "course":
            return Area.course()
        kind, _, class_id = key.partition("/")
        if kind != "class" or not class_id.isdigit():
            raise ValueError(f"not a course folder's key: {key!r}")
        return Area.of_class(int(class_id))

    @staticmethod
    def checks(class_id: int) -> "Area":
        """A class's exercises with their checks: its teachers' only (students
        must never read the hidden checks, nor their programs reach them)."""
        return Area(f"checks/{class_id}", ("checks", str(class_id)), False)

    @staticmethod
    def exam(exam_id: int, username: str) -> "Area":
        """A student's folder in an exam: theirs until their end, then
        read-only through every path (exams/service.py)."""
        return Area(f"exam/{exam_id}/{username}", ("exams", str(exam_id), username), True)

    @property
    def exam_id(self) -> int | None:
        """The exam whose folder this is, if it is one."""
        return int(self.parts[1]) if self.parts[0] == "exams" else None

    @property
    def slug(self) -> str:
        """The key as one file name, for the store's own records of the area."""
        return self.key.replace("/", "--")
