"""The one exception services raise to refuse a request.

Services know nothing of HTTP handlers, but a refusal still carries what
the user must be told: a status, a stable code and a sentence. Handlers
answer it as `{"error": code, "message": message, **extra}`.
"""
from typing import Any


class Refused(Exception):
    def __init__(self, status: int, code: str, message: str, retry_after: float | None = None,
                 **extra: Any) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.retry_after, self.extra = retry_after, extra

    def __reduce__(self):
        # Pickled whole (a file process raises it in the worker): the
        # subclasses' constructors take other arguments.
        return _rebuilt, (type(self), self.__dict__)


def _rebuilt(cls, state):
    refusal = Exception.__new__(cls)
    Exception.__init__(refusal, state["message"])
    refusal.__dict__.update(state)
    return refusal
