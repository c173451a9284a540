"""A run's kernel limits come from its RunSpec: the launcher sets the
spec's open files, processes, file size, memory and CPU on the program at
`go`, lowered from those its sandbox started with, never raised above them
(a RunSpec made on another host must not buy a run more than its sandbox
was sized for). Through the worker's own wiring, as tests/test_jobs.py.

Needs root (programs run as students' uids, in cgroups)."""
import asyncio
import dataclasses
import json
import os

import pytest

from server.runs.spec import Limits
from tests import test_jobs
from tests.test_jobs import TIMEOUT, Collector, asked, save

worker_here = test_jobs.worker_here  # the fixture: a worker made in this process

if os.geteuid() != 0:
    pytest.skip("programs run as students' uids in cgroups: these tests need root", allow_module_level=True)

PROGRAM = """\
import json, resource
names = ["NOFILE", "NPROC", "FSIZE", "AS", "CPU"]
print(json.dumps({n: resource.getrlimit(getattr(resource, "RLIMIT_" + n))[0] for n in names}))
opened = []
try:
    while len(opened) < 200:
        opened.append(open("limits.py"))
except OSError as e:
    print("refused after", len(opened), e.errno)
"""


def rlimits_of(ctx, user, session, limits):
    async def run():
        collector, request = Collector(), asked(user, session, ("limits.py",))
        request = dataclasses.replace(request, spec=dataclasses.replace(request.spec, limits=limits))
        job = ctx.jobs.start(request, collector)
        await asyncio.wait_for(job.done.wait(), TIMEOUT)
        [exit_] = collector.of("exit")
        assert exit_["reason"] == "ok", exit_
        first, last = "".join(m["data"] for m in collector.of("output")).splitlines()[:2]
        return json.loads(first), last
    return run()


def test_the_specs_limits_reach_the_program_and_never_exceed_the_sandboxes(worker_here):
    async def story(ctx, user, session):
        await save(ctx, user, "limits.py", PROGRAM)
        sandbox = Limits.of(ctx.cfg)
        tight = dataclasses.replace(sandbox, open_files=24, processes=7, file_mb=3, memory_mb=300, cpu_seconds=2)
        got, refused = await rlimits_of(ctx, user, session, tight)
        assert got == {"NOFILE": 24, "NPROC": 7, "FSIZE": 3 << 20, "AS": 300 << 20, "CPU": 2}
        assert refused.startswith("refused after ") and refused.endswith(" 24")  # EMFILE, below 24 files
        # Asking for more than the sandbox has gets the sandbox's own.
        more = dataclasses.replace(sandbox, open_files=sandbox.open_files * 4, memory_mb=sandbox.memory_mb * 4)
        got, _ = await rlimits_of(ctx, user, session, more)
        assert got["NOFILE"] == sandbox.open_files and got["AS"] == sandbox.memory_mb << 20
    worker_here(story)
