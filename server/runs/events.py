"""What runs tell the rest of the server: `RunEvents`, the interface the
live class view implements (teaching/service.py), and the error line of a
failed run, which runs read from its stderr because they own it.

The calls are made on the IOLoop from the run's own steps: they must be
cheap, never wait (teaching only notes the event for a batched write) and
never raise; `Guarded` logs what raises anyway, so a bug there never
reaches a run or its student.
"""
import logging
import re
from typing import Protocol

log = logging.getLogger(__name__)

# A traceback's last line names the exception: "ZeroDivisionError: division by zero".
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b(:|$)")


class RunEvents(Protocol):
    def student_online(self, user: dict, online: bool) -> None:
        """An IDE socket (/ws/run) of `user` opened (True) or closed (False) here."""

    def run_started(self, user: dict) -> None:
        """A program of `user` started."""

    def run_ended(self, user: dict, exit_message: dict, error_line: str | None) -> None:
        """It ended: `exit_message` is its `exit` message (PROTOCOL.md),
        `error_line` the line of its stderr that names its error, if any."""

    def run_console(self, user: dict, message: dict) -> None:
        """A message of a run an IDE shows (`started`, `output`, `image`,
        `input`, `exit`: PROTOCOL.md), as its student is sent it."""


class NoEvents:
    """Nobody listens (a worker whose services are not up yet, tests)."""

    def student_online(self, user, online):
        pass

    def run_started(self, user):
        pass

    def run_ended(self, user, exit_message, error_line):
        pass

    def run_console(self, user, message):
        pass


class Guarded:
    """RunEvents passed on to `events`, with whatever they raise logged."""

    def __init__(self, events: RunEvents):
        self.events = events

    def student_online(self, user, online):
        self._call(self.events.student_online, user, online)

    def run_started(self, user):
        self._call(self.events.run_started, user)

    def run_ended(self, user, exit_message, error_line):
        self._call(self.events.run_ended, user, exit_message, error_line)

    def run_console(self, user, message):
        self._call(self.events.run_console, user, message)

    @staticmethod
    def _call(hook, *args):
        try:
            hook(*args)
        except Exception:
            log.exception("telling the class view of a run failed")


def error_line(stderr_tail: str) -> str | None:
    """The line that names a failed program's error, from the end of what
    it wrote to stderr: the exception line of a traceback, else the last
    line written."""
    lines = [line.strip() for line in stderr_tail.splitlines() if line.strip()]
    for line in reversed(lines):
        if EXCEPTION_LINE.match(line):
            return line
    return lines[-1] if lines else None
