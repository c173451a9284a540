"""What runs tell the rest of the server: `RunEvents`, the interface the
live class view implements (teaching/service.py), and the error of a
failed run (kind, message, the student's file and line), which runs read
from its stderr because they own it.

The calls are made on the IOLoop from the run's own steps: they must be
cheap, never wait (teaching only notes the event for a batched write) and
never raise; `Guarded` logs what raises anyway, so a bug there never
reaches a run or its student.
"""
import logging
import re
from typing import Any, Callable, Protocol

from ..valid_text import valid_text

log = logging.getLogger(__name__)

# A traceback's last line names the exception: "ZeroDivisionError: division by zero".
EXCEPTION_LINE = re.compile(r"^(?P<kind>[A-Za-z_][\w.]{0,100}(Error|Exception|Exit|Interrupt|Warning|Iteration))"
                            r"(?::\s?(?P<message>.*))?$")
FRAME = re.compile(r'^\s+File "(?P<file>.{1,1000}?)", line (?P<line>\d{1,9})(?!\d)')
SANDBOX_HOME = "/home/student/"  # the home inside a sandbox (runs/sandbox/launch.py)
TAIL = 8192  # characters of stderr read: a traceback's end


class RunEvents(Protocol):
    def student_online(self, user: dict[str, Any], online: bool) -> None:
        """An IDE socket (/ws/run) of `user` opened (True) or closed (False) here."""

    def run_started(self, user: dict[str, Any]) -> None:
        """A program of `user` started."""

    def run_ended(self, user: dict[str, Any], exit_message: dict[str, Any], error: dict[str, Any] | None) -> None:
        """It ended: `exit_message` is its `exit` message (docs/run-protocol.md),
        `error` what its stderr says went wrong (`run_error`), if anything."""

    def run_console(self, user: dict[str, Any], message: dict[str, Any]) -> None:
        """A message of a run an IDE shows (`started`, `output`, `image`,
        `input`, `exit`: docs/run-protocol.md), as its student is sent it."""


class NoEvents:
    """Nobody listens (a worker whose services are not up yet, tests)."""

    def student_online(self, user: dict[str, Any], online: bool) -> None:
        pass

    def run_started(self, user: dict[str, Any]) -> None:
        pass

    def run_ended(self, user: dict[str, Any], exit_message: dict[str, Any], error: dict[str, Any] | None) -> None:
        pass

    def run_console(self, user: dict[str, Any], message: dict[str, Any]) -> None:
        pass


class Guarded:
    """RunEvents passed on to `events`, with whatever they raise logged."""

    def __init__(self, events: RunEvents):
        self.events = events

    def student_online(self, user: dict[str, Any], online: bool) -> None:
        self._call(self.events.student_online, user, online)

    def run_started(self, user: dict[str, Any]) -> None:
        self._call(self.events.run_started, user)

    def run_ended(self, user: dict[str, Any], exit_message: dict[str, Any], error: dict[str, Any] | None) -> None:
        self._call(self.events.run_ended, user, exit_message, error)

    def run_console(self, user: dict[str, Any], message: dict[str, Any]) -> None:
        self._call(self.events.run_console, user, message)

    @staticmethod
    def _call(hook: Callable[..., None], *args: Any) -> None:
        try:
            hook(*args)
        except Exception:
            log.exception("telling the class view of a run failed")


def run_error(stderr_tail: str, username: str) -> dict[str, Any] | None:
    """What a failed program's stderr says went wrong, read from its end:
    {"kind", "message", "file", "line", "text"}. `text` is the line that
    names the error (the exception line of a traceback, else the last line
    written); `kind` and `message` come from an exception line, `file` (in
    the student's home) and `line` from the innermost frame of the last
    traceback that is in the student's own files (never the standard
    library's or ours). What is not found is None; None if nothing was written.

    The program wrote this text and can forge it: it is only matched, and
    what is taken from it is for its own student's tile alone."""
    lines = valid_text(stderr_tail[-TAIL:]).splitlines()  # stored in PostgreSQL, which refuses a NUL
    end = next((i for i in range(len(lines) - 1, -1, -1) if EXCEPTION_LINE.match(lines[i])), None)
    if end is None:
        shown = [line.strip() for line in lines if line.strip()]
        return {"kind": None, "message": None, "file": None, "line": None, "text": shown[-1]} if shown else None
    found = EXCEPTION_LINE.match(lines[end])
    assert found is not None  # `end` is the line it matched
    error = {"kind": found["kind"], "message": (found["message"] or "").strip(), "file": None, "line": None,
             "text": lines[end].strip()}
    # The traceback above it: indented lines, up to its "Traceback" header (a
    # SyntaxError of the main file has none); a chained exception's own
    # traceback ends at the sentence between them, so it is not read.
    start = end
    while start > 0 and lines[start - 1][:1].isspace():
        start -= 1
    for line in reversed(lines[start:end]):
        frame = FRAME.match(line)
        path = frame and home_path(frame["file"], username)
        if frame and path:
            error["file"], error["line"] = path, int(frame["line"])
            break
    return error


def home_path(file: str, username: str) -> str | None:
    """The path in the student's home of a file a traceback names, or None
    (a library's). The local sandbox runs in the home's real folder."""
    if file.startswith(SANDBOX_HOME):
        return file[len(SANDBOX_HOME):] or None
    real = f"/home/{username}/"
    at = file.rfind(real)
    return file[at + len(real):] or None if at >= 0 else None
