"""One measurement of the load test ("cell": one scenario at one
concurrency against one server), the check made before measuring, and the
registry of scenarios by name, for `loadtest.loadtest`.
"""
import contextlib

from . import loadgen
from .classroom import Classroom
from .client import REQUEST_TIMEOUT, VirtualUser, save_file
from .machine import CpuWatch
from .recording import Recorder
from .run_client import ECHO_PROGRAM, RunClient
from .scenarios import RUN_PATH, Budget, Files, Login, Perf, Run, SetupFailed

SCENARIOS = {cls.name: cls for cls in (Login, Files, Run, Classroom, Perf)}


# -- one cell ------------------------------------------------------------------------

def merged(recs, latencies, errors):
    out = Recorder()
    for name in latencies:
        out.merge(recs[name])
    out.errors.clear()  # only the rows in `errors` count theirs
    for name in errors:
        out.errors.update(recs[name].errors)
    return out


async def run_cell(name, cell, budget, warmup, server_pids=()):
    """Set the scenario up, run it `warmup` seconds uncounted, then within
    `budget`, counted. Returns {recorders (aggregates included), window,
    open_loop, server_timing, cpu, users}."""
    scenario = SCENARIOS[name](cell)
    cell.only = scenario.timed_requests
    recs = scenario.recorders()
    async with contextlib.AsyncExitStack() as stack:
        actors = await scenario.setup(stack, recs)
        if warmup > 0:
            cell.tally = loadgen.ServerTiming()  # thrown away with the warm-up's recorders
            await scenario.measure(actors, Budget(duration=warmup), scenario.recorders())
        cell.tally = loadgen.ServerTiming()
        watch, before = CpuWatch(server_pids).start(), scenario.counters(actors)
        window, open_stats = await scenario.measure(actors, budget, recs)
        used = watch.stop()
        counts = {k: v - before[k] for k, v in scenario.counters(actors).items()}
        tally, cell.tally = cell.tally, loadgen.ServerTiming()  # teardown's requests are not counted
    for row, (latencies, errors) in scenario.aggregates.items():
        recs[row] = merged(recs, latencies, errors)
    return {"scenario": scenario, "recorders": {m: recs[m] for m in scenario.metrics}, "window": window,
            "open_loop": open_stats.summary() if open_stats else None, "server_timing": tally, "counts": counts,
            "active_users": len(actors) if not scenario.paced else len(cell.credentials), **used}


# -- the check before measuring ------------------------------------------------------

async def verify(url, username, password, timeout=REQUEST_TIMEOUT):
    """One user logs in, saves a program and runs it with one input, every
    answer checked. Returns the run's times; raises SetupFailed saying
    which step failed and how."""
    step = "log in"
    try:
        async with VirtualUser(url, timeout) as user:
            await user.sign_in(username, password)
            step = f"save {RUN_PATH}"
            await save_file(user, RUN_PATH, ECHO_PROGRAM)
            step = f"run {RUN_PATH} with one input"
            async with RunClient(url, user.cookies(), timeout=timeout, keep=False) as sock:
                times = await sock.echo_run(RUN_PATH)
            step = "log out"
            await user.logout()
            return times
    except Exception as e:
        raise SetupFailed(f"user {username!r} could not {step} at {url}: {e}") from None
