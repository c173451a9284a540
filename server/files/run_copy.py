"""What a run of a course folder's file is given: the file and the files
beside it (its sibling modules, a data file it reads), read here and sent
to the sandbox, which runs them as a read-only copy of its own
(runs/child/launcher.py). The course folder itself is never shown to a
sandbox, so no program can change it. Blocking: the store's course_copy,
a file operation (Op.COURSE_COPY)."""
from typing import TYPE_CHECKING

from ..errors import Refused
from .area import Area
from .paths import Parts, is_plain

if TYPE_CHECKING:  # the store calls this module
    from .store import Store

COPY_FILES = 50  # files beside the one run, at most
COPY_FILE_BYTES = 256 << 10  # a larger one beside it is left out
COPY_BYTES = 1 << 20  # all of them together (the file run included), at most


def course_copy(store: "Store", course: Area, parts: Parts, home: Area) -> tuple[int, dict[str, bytes]]:
    """(bytes the runner's home holds, {name: bytes}) for running the file
    `parts` of the course area `course` from the home `home`: the file and
    the regular files beside it, within the bounds above. Refused when it
    is not a file, too large to run this way, or the home is over its quota."""
    if not store.is_file(course, parts):
        raise Refused(400, "not_a_file", "Only a file can be run.")
    data = store.read(course, parts, limit=COPY_BYTES)[0]
    if data is None:
        raise Refused(413, "file_too_large", "This course file is too large to run from the course folder: "
                                             "copy it to My files and run it there.")
    files, total = {parts[-1]: data}, len(data)
    for entry in store.list(course, parts[:-1]):
        name = entry["name"]
        if len(files) > COPY_FILES or entry["kind"] != "file" or name in files or not is_plain(name):
            continue
        if entry["size"] > COPY_FILE_BYTES or total + entry["size"] > COPY_BYTES:
            continue
        try:
            found = store.read(course, parts[:-1] + (name,), limit=COPY_FILE_BYTES)[0]
        except Refused:  # gone meanwhile, or not a file: left out
            continue
        if found is not None and total + len(found) <= COPY_BYTES:
            files[name] = found
            total += len(found)
    return store.room_to_run(home), files
