"""Otter-Grader as the peer bench_checks compares PyClassroom's Check with:
`otter generate` and `otter run`, installed on demand into a scratch
virtualenv (cached under ~/.cache/pyclassroom-peer/, as loadtest/jupyter.py
installs Jupyter), never a dependency of the project.

Otter grades a .py submission by running it in a Jupyter kernel, hence
ipykernel beside it (pinned as loadtest/jupyter.py pins it).
"""
import asyncio
import contextlib
import json
import os
import resource
import signal
import subprocess
import time

from . import peer_venv
from .cli import Aborted

OTTER_GRADER = "7.0.0"
IPYKERNEL = "7.4.0"


def folder(cache=None):
    return os.path.join(cache or peer_venv.CACHE, f"otter-grader-{OTTER_GRADER}-ipykernel-{IPYKERNEL}")


def cached(venv=None):
    """(the venv's `otter`, whether it is installed)."""
    venv = venv or folder()
    return os.path.join(venv, "bin", "otter"), peer_venv.installed(venv)


def install(venv=None):
    """The `otter` of a virtualenv holding the pinned Otter-Grader and
    ipykernel, made the first time (a minute or two) and reused after."""
    venv = venv or folder()
    peer_venv.make(venv, [f"otter-grader=={OTTER_GRADER}", f"ipykernel=={IPYKERNEL}"], "Otter-Grader")
    return cached(venv)[0]


def environment(base):
    """Otter's (and its kernels') Jupyter folders in `base`, not in ~/.jupyter."""
    return {**os.environ, "PYTHONUNBUFFERED": "1",
            **{f"JUPYTER_{what.upper()}_DIR": os.path.join(base, f"jupyter-{what}")
               for what in ("config", "runtime", "data")}}


def generate(otter, base, tests, timeout):
    """Write the tests (`{name: text}`) into base/tests and make the
    autograder zip with `otter generate`; returns its path."""
    os.makedirs(os.path.join(base, "tests"))
    for name, text in tests.items():
        with open(os.path.join(base, "tests", name), "w") as f:
            f.write(text)
    out = os.path.join(base, "autograder.zip")
    done = subprocess.run([otter, "generate", "-t", "tests", "-o", out, "--no-config", "--no-requirements",
                           "--no-environment"], cwd=base, capture_output=True, text=True, timeout=timeout,
                          env=environment(base))
    if done.returncode != 0 or not os.path.exists(out):
        raise Aborted("otter generate failed:\n" + (done.stdout + done.stderr)[-3000:])
    return out


def scores(results_file):
    """(score, max score, {test name: passed}) of an otter results.json."""
    with open(results_file) as f:
        tests = [t for t in json.load(f)["tests"] if t.get("max_score") is not None]
    got = sum(float(t.get("score") or 0) for t in tests)
    return got, sum(float(t["max_score"]) for t in tests), \
        {t["name"]: float(t.get("score") or 0) == float(t["max_score"]) for t in tests}


def _idle():
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


async def run_one(otter, base, autograder, submission, out_dir, timeout, idle=False):
    """`otter run -a autograder submission`, in its own session (killed
    whole on a timeout or a cancel); returns seconds it took. Raises
    Aborted-free errors: TimeoutError, or RuntimeError with its output.
    `idle`: at SCHED_IDLE, the CPU priority of PyClassroom's sandboxes
    (their cgroup's cpu.idle), for a like-for-like comparison on a busy host."""
    os.makedirs(out_dir)
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        otter, "run", "-a", autograder, "-o", out_dir, "--no-logo", submission,
        cwd=os.path.dirname(submission), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT, start_new_session=True, env=environment(base),
        preexec_fn=_idle if idle else None)
    try:
        output, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(proc.wait(), 10)
        raise
    finally:
        # Its kernel is its child in a session of its own: nothing of it may outlive it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    if proc.returncode != 0:
        raise RuntimeError(f"otter run exited {proc.returncode}: {output.decode(errors='replace')[-1500:]}")
    return time.perf_counter() - started


def children_cpu():
    """CPU seconds (user + system) of this process's reaped descendants so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
