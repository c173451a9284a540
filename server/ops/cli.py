"""What the operator tools' command lines share. Standard library only, so
that tools meant for a server host (efs_bench) can use it too."""
import argparse
import contextlib
import signal


def int_list(text):
    """argparse type: "1,8,32" -> [1, 8, 32] (positive whole numbers)."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive whole numbers separated by commas, not {text!r}")
    return values


def _terminate(signum, frame):
    raise KeyboardInterrupt


def clean_up_on_sigterm():
    """Make SIGTERM behave like Ctrl-C, so a tool's cleanup (its servers,
    its PostgreSQL, its temporary folders) runs when it is stopped either way."""
    signal.signal(signal.SIGTERM, _terminate)


@contextlib.contextmanager
def uninterrupted():
    """Cleanup that a second Ctrl-C or a SIGTERM must not cut short, leaving
    servers or PostgreSQL running (each step is bounded in time)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN), signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])
