"""A child process that must not outlive the process that started it."""
import os
import signal


def die_with_parent(parent_pid: int) -> None:
    """Ask Linux to SIGTERM this process if its parent dies (even by
    SIGKILL), so that no orphan (a worker, a runner) goes on with nobody
    supervising it."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(0)
