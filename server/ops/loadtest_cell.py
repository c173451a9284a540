"""One measurement of the load test ("cell": one scenario at one
concurrency against one server), and the check made before measuring, for
`server.ops.loadtest`.
"""
import contextlib

from . import bench_runs, loadgen
from .bench_runs import ECHO_PROGRAM, RunSocket
from .loadtest_classroom import Classroom
from .loadtest_scenarios import RUN_PATH, Budget, Files, Login, Perf, Run, SetupFailed, ws_session

SCENARIOS = {cls.name: cls for cls in (Login, Files, Run, Classroom, Perf)}


# -- one cell ------------------------------------------------------------------------

def merged(recs, latencies, errors):
    out = loadgen.Recorder()
    for name in latencies:
        out.histogram.add(recs[name].histogram)
        out.workers.update(recs[name].workers)
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
        watch, before = bench_runs.CpuWatch(server_pids).start(), scenario.counters(actors)
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

async def verify(url, username, password, timeout=loadgen.REQUEST_TIMEOUT):
    """One user logs in, saves a program and runs it with one input, every
    answer checked. Returns the run's times; raises SetupFailed saying
    which step failed and how."""
    step = "log in"
    try:
        async with loadgen.VirtualUser(url, timeout) as user:
            await user.fetch_xsrf()
            await user.login(username, password)
            step = f"save {RUN_PATH}"
            await bench_runs.save_file(user, RUN_PATH, ECHO_PROGRAM)
            step = f"run {RUN_PATH} with one input"
            async with ws_session(timeout) as http:
                sock = RunSocket(http, url, user, 0, timeout)
                await sock.open()
                try:
                    times = await sock.echo_run(RUN_PATH)
                finally:
                    await sock.close()
            step = "log out"
            await user.logout()
            return times
    except Exception as e:
        raise SetupFailed(f"user {username!r} could not {step} at {url}: {e}") from None
