"""Where a server process spends its CPU, sampled with py-spy while a
benchmark runs: its hottest functions, and its samples split into parts
(session check, PostgreSQL, file system, ...) by the innermost frame that
names one. py-spy samples only threads that are running (not waiting in
epoll or for a queue), so shares are of the process's busy time."""
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter

from .cli import Aborted


def py_spy():
    """py-spy beside this interpreter (a virtualenv's bin/), else on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    found = beside if os.path.exists(beside) else shutil.which("py-spy")
    if not found:
        raise Aborted("--py-spy needs py-spy (pip install py-spy)")
    return found


class Sampler:
    """py-spy recording one process (all its threads) until `stop()`."""

    def __init__(self, pid, rate=1000):
        fd, self.raw = tempfile.mkstemp(suffix=".raw")
        os.close(fd)
        self.proc = subprocess.Popen([py_spy(), "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw",
                                      "--output", self.raw, "--nonblocking"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self):
        """{stack: samples} of what was recorded."""
        self.proc.send_signal(2)  # SIGINT: py-spy writes what it has
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        stacks = Counter()
        try:
            with open(self.raw) as f:
                for line in f:
                    stack, _, n = line.rstrip("\n").rpartition(" ")
                    if stack and n.isdigit():
                        stacks[stack] += int(n)
        finally:
            os.unlink(self.raw)
        return stacks


def hottest(stacks, limit=25):
    """([(inclusive share, function)] of the server's own frames, [(self
    share, function)] of all)."""
    inclusive, own, total = Counter(), Counter(), sum(stacks.values())
    for stack, n in stacks.items():
        frames = stack.split(";")
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    total = total or 1
    ours = [(n / total, frame) for frame, n in inclusive.most_common()
            if "server/" in frame and "__main__" not in frame and "worker.py" not in frame]
    return ours[:limit], [(n / total, frame) for frame, n in own.most_common(limit)], sum(stacks.values())


def split(stacks, parts):
    """{part: share of the samples}: each sample goes to the part whose
    pattern names its innermost frame (`parts`: [(part, (substrings...))],
    tried in order per frame), else to "other"."""
    counts, total = Counter(), sum(stacks.values()) or 1
    for stack, n in stacks.items():
        part = "other"
        for frame in reversed(stack.split(";")):
            found = next((name for name, patterns in parts if any(p in frame for p in patterns)), None)
            if found:
                part = found
                break
        counts[part] += n
    return {part: counts[part] / total for part, _ in parts + [("other", ())] if counts[part]}
