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
        """The course folder or exam folder whose key is `key` ('course',
        'class/3', 'exam/5/ada'), as a run names the folder it copies from."""
        if key == "course":
            return Area.course()
        kind, _, rest = key.partition("/")
        if kind == "exam" and rest.count("/") == 1 and rest.split("/")[0].isdigit():
            exam_id, username = rest.split("/")
            return Area.exam(int(exam_id), username)
        if kind != "class" or not rest.isdigit():
            raise ValueError(f"not a course or exam folder's key: {key!r}")
        return Area.of_class(int(rest))

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
