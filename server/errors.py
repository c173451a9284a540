"""The one exception services raise to refuse a request.

Services know nothing of HTTP handlers, but a refusal still carries what
the user must be told: a status, a stable code and a sentence. Handlers
answer it as `{"error": code, "message": message, **extra}`.
"""


class Refused(Exception):
    def __init__(self, status, code, message, retry_after=None, **extra):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.retry_after, self.extra = retry_after, extra
