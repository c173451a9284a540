"""Which host uid is a user's: the owner of their home and of their
programs. Here, at the bottom, because both the files service (a new home
is chowned to it) and runs (a program runs as it) need it."""
import os

from ..config import Config


def run_uid(cfg: Config, user_id: int) -> int | None:
    """The host uid a user's programs run as: their own when the server is
    root (so one student's processes cannot touch another's), else ours."""
    return cfg.SANDBOX_UID_BASE + user_id if os.geteuid() == 0 else None
