"""Scratch virtualenvs for the peers PyClassroom is measured against
(Jupyter Server, Otter-Grader): pinned packages, installed the first time
under ~/.cache/pyclassroom-peer/ and reused after; never the project's."""
import os
import subprocess
import sys

from .cli import Aborted, say

CACHE = os.path.join(os.path.expanduser("~"), ".cache", "pyclassroom-peer")
MARK = ".installed"  # written last: a folder without it is an install that did not finish


def installed(folder):
    return os.path.exists(os.path.join(folder, MARK))


def make(folder, pins, what):
    """Make the virtualenv `folder` holding `pins` (["name==version", ...])
    unless it is there already; `what` names the peer in what is said."""
    if installed(folder):
        return
    say(f"installing {' and '.join(pins)} for {what} into {folder} (once) ...")
    os.makedirs(os.path.dirname(os.path.abspath(folder)), exist_ok=True)
    python = os.path.join(folder, "bin", "python")
    steps = [[sys.executable, "-m", "venv", "--clear", folder],
             [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *pins]]
    for step in steps:
        finished = subprocess.run(step, capture_output=True, text=True, timeout=900)
        if finished.returncode != 0:
            raise Aborted(f"could not install {what} ({' '.join(step[:4])} ...):\n{finished.stderr[-2000:]}")
    with open(os.path.join(folder, MARK), "w") as f:
        f.write("\n".join(pins) + "\n")
