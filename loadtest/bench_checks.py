"""A class pressing Check at once: PyClassroom's grader against
Otter-Grader's on the same submissions, in one sitting.

    python -m loadtest.bench_checks [--students 60] [--processes 1] [--rounds 1]
                                    [--no-otter] [--otter-venv DIR] [--otter-jobs N]
                                    [--server-root DIR] [--json OUT]

PyClassroom (a fresh database and data folder, SANDBOX=local, --processes
workers): a class of --students students and a teacher, who writes the
exercise of loadtest/check_exercise.py (10 checks: 5 output checks, a
program reading numbers and printing their average, and 5 function checks,
tests.py with plain asserts) and gives it. Each student starts it and saves
a submission: the right one for every other student, a wrong one (which
loses a known 6 of the 12 points) for the others. Every student opens the
IDE's socket (/ws/run) and, once the server reports their warm sandboxes,
all of them press Check within one second, evenly spread. Timed per
student: from sending `check` to the `done` attempt. Every score is
verified (right: full marks and every check passed; wrong: exactly the
points and checks it must get); a wrong score counts as an error, as does
a refusal or a timeout (--timeout).

Otter-Grader (pinned in loadtest/otter.py, installed on demand into a
scratch virtualenv cached under ~/.cache/pyclassroom-peer/, --otter-venv):
the same 10 checks as OK-format test files, an autograder zip made with
`otter generate`, then `otter run -a autograder.zip average.py` for each of
the same submissions, --otter-jobs at once (default: as many as the
machine has CPUs). Timed per submission: the `otter run` process, start to
exit; its results.json verified the same way.

Both: p50, p95 and max per student, checks per second (students x 10
checks / the wall time from the first click, or start, to the last
result), host CPU per check. PyClassroom's: its server's processes, the
scratch PostgreSQL's and its sandboxes' cgroups (every group of its
workers, sampled), as bench_run_cost reads them; Otter's: every otter
process and their children (kernels, the submissions' runs), reaped. With
--rounds N the two are measured alternately N times on the same server.
The ratios (PyClassroom / Otter) and the issue's targets (p95 <= 5 s, at
least 5x Otter's throughput) are printed with whether they are met.
Everything is bounded in time and removed on exit, error or Ctrl-C.
"""
import argparse
import os
import sys
import time

from .cli import Aborted, bounds, run_benchmark, say, server_root_option
from .machine import describe
from .recording import error_lines, fmt

CHECK_TIMEOUT = 120.0  # default seconds allowed one student's check, or one otter run
SPREAD = 1.0  # seconds over which the class presses Check
TARGET_P95_S = 5.0
TARGET_RATIO = 5.0
SAMPLE_EVERY = 0.1  # seconds between readings of the sandboxes' cgroups


def latencies(values):
    """{p50_ms, p95_ms, max_ms, mean_ms} of a class's seconds, exactly (nearest
    rank; a class is small): the recorders' histograms stop at 60 s, which a
    class waiting for Otter goes past."""
    if not values:
        return {"p50_ms": None, "p95_ms": None, "max_ms": None, "mean_ms": None}
    ordered = sorted(values)

    def rank(p):
        return round(ordered[max(0, -(-len(ordered) * p // 100) - 1)] * 1000, 1)
    return {"p50_ms": rank(50), "p95_ms": rank(95), "max_ms": round(ordered[-1] * 1000, 1),
            "mean_ms": round(sum(ordered) * 1000 / len(ordered), 1)}


# -- PyClassroom's CPU -----------------------------------------------------------------

class SandboxGroups:
    """CPU of the sandboxes of the given workers, from their cgroups
    (`w<pid>-<start>.<n>` under the sandboxes' parent, cgroup v1 cpuacct or
    v2 cpu.stat), read every SAMPLE_EVERY s in a thread: a group gone
    between two readings loses at most its last tenth of a second. Other
    servers' sandboxes on this host (their groups are named after their
    own workers) are not counted. `seconds()` is None without cgroups."""

    def __init__(self, worker_pids):
        from server.runs import cgroups
        self.groups = cgroups.Groups.detect()
        self.prefixes = tuple(f"w{pid}-" for pid in worker_pids)
        self.first, self.last = {}, {}
        self._stop = None

    def _usage(self, name):
        try:
            if self.groups.version == 1:
                with open(os.path.join(self.groups.parents["cpuacct"], name, "cpuacct.usage")) as f:
                    return int(f.read()) / 1e9
            with open(os.path.join(self.groups.parents[""], name, "cpu.stat")) as f:
                for line in f:
                    if line.startswith("usage_usec "):
                        return int(line.split()[1]) / 1e6
        except (OSError, KeyError, ValueError):
            return None
        return None

    def _read(self, initial=False):
        parent = self.groups.parents.get("cpuacct") if self.groups.version == 1 else self.groups.parents.get("")
        try:
            names = [n for n in os.listdir(parent) if n.startswith(self.prefixes)]
        except OSError:
            return
        for name in names:
            used = self._usage(name)
            if used is None:
                continue
            if name not in self.first:
                self.first[name] = used if initial else 0.0
            self.last[name] = used

    def start(self):
        import threading
        if self.groups is None:
            return self
        self._read(initial=True)
        self._stop = threading.Event()

        def sample():
            while not self._stop.wait(SAMPLE_EVERY):
                self._read()
        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._stop is None:
            return None
        self._stop.set()
        self._thread.join()
        self._read()
        return sum(self.last[name] - self.first[name] for name in self.last)


class PyClassroomCpu:
    """Host CPU seconds over a stretch: the server's processes (the
    Tornado workers, the main process, the file processes), PostgreSQL's
    and the server's sandboxes' (SandboxGroups); and the whole machine's."""

    def __init__(self, server, base):
        import psutil

        from .bench_run_cost import postgres_processes
        from .machine import file_processes
        pids = [*server.pids, *file_processes(server.pids), server.proc.pid]
        self.server_procs = [psutil.Process(pid) for pid in dict.fromkeys(pids)]
        self.postgres_procs = postgres_processes(psutil, base)
        self.worker_pids = list(dict.fromkeys([*server.pids, server.proc.pid]))

    def _now(self):
        from .bench_run_cost import cpu_of, machine_seconds
        return sum(cpu_of(self.server_procs)[:1]), sum(cpu_of(self.postgres_procs)), machine_seconds()

    def start(self):
        self.sandboxes = SandboxGroups(self.worker_pids).start()
        self.before = self._now()
        return self

    def stop(self):
        after = self._now()
        sandboxes = self.sandboxes.stop()
        server, postgres, whole = (a - b for a, b in zip(after, self.before))
        return {"server": server, "postgres": postgres, "sandboxes": sandboxes, "machine": whole}


# -- PyClassroom -----------------------------------------------------------------------

STEP_METRICS = {  # what /metrics says of the steps of the checks (all workers): label -> histogram
    "runs": "pyclassroom_run_duration_seconds",  # a check's programs: its output runs, the served program
    "run_queue_waits": "pyclassroom_run_queue_wait_seconds",
    "sandbox_starts": "pyclassroom_sandbox_start_seconds",  # new sandboxes (checker ones among them)
}


async def step_metrics(url):
    """{label: (count, seconds)} of STEP_METRICS so far; {} if /metrics cannot say."""
    import re

    import aiohttp
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
            async with http.get(url.rstrip("/") + "/metrics") as resp:
                text = await resp.text()
    except Exception:
        return {}
    found = {}
    for label, name in STEP_METRICS.items():
        count = re.search(rf"^{name}_count\s+(\S+)$", text, re.M)
        total = re.search(rf"^{name}_sum\s+(\S+)$", text, re.M)
        if count and total:
            found[label] = (float(count.group(1)), float(total.group(1)))
    return found


def steps_between(before, after):
    """{label: {count, mean_ms}} between two step_metrics readings."""
    out = {}
    for label in STEP_METRICS:
        if label in before and label in after:
            n = after[label][0] - before[label][0]
            out[label] = {"count": int(n),
                          "mean_ms": round((after[label][1] - before[label][1]) * 1000 / n, 1) if n else None}
    return out


async def set_up_class(server, logins, teacher, timeout):
    """The class and its teacher's exercise: (class id, slug, file,
    submission(index))."""
    from .client import Client
    admin = Client(server.url)
    admin.login_ok("admin", server.env["ADMIN_PASSWORD"])
    r = admin.post("/api/classes", json={"name": f"bench checks {time.time_ns()}"})
    if r.status_code != 201:
        raise Aborted(f"could not make the class: {r.status_code} {r.text[:300]}")
    class_id = r.json()["class"]["id"]
    r = admin.post(f"/api/classes/{class_id}/members", json={"add": [teacher[0]] + [u for u, _ in logins]})
    if r.status_code != 200:
        raise Aborted(f"could not fill the class: {r.status_code} {r.text[:300]}")
    return (class_id, *write_exercise(server.url, class_id, teacher))


def write_exercise(url, class_id, teacher):
    """The teacher writes loadtest/check_exercise.py's exercise in the
    class: (its slug, the file students submit, submission(index))."""
    from .check_exercise import FILE, SLUG, pyclassroom_form, submission
    from .client import Client
    writer = Client(url)
    writer.login_ok(*teacher)
    r = writer.request("PUT", f"/api/classes/{class_id}/exercises/{SLUG}", json=pyclassroom_form())
    if r.status_code != 200 or r.json().get("problems"):
        raise Aborted(f"the teacher could not write the exercise: {r.status_code} {r.text[:500]}")
    return SLUG, FILE, submission


async def start_and_save(users, class_id, slug, file, submission):
    """Each student starts the exercise and saves their submission: [(etag, right?)]."""
    import asyncio
    import json

    async def one(index, user):
        resp, body = await user.request("POST", f"/api/exercises/{class_id}/{slug}/start", {})
        if resp.status != 200:
            raise Aborted(f"a student could not start the exercise: {resp.status} {body[:300]!r}")
        source, right = submission(index)
        resp, body = await user.put_file(f"{slug}/{file}", source)
        if resp.status != 200:
            raise Aborted(f"a student could not save the submission: {resp.status} {body[:300]!r}")
        return json.loads(body)["etag"], right
    return await asyncio.gather(*(one(i, u) for i, u in enumerate(users)))


async def exercise_shown(http, url, sockets):
    """Each IDE shows the exercise, as a student does before pressing Check:
    it tells the server (`prepare_check`), which starts the check's sandbox
    ahead of time; wait until it has (a server without that answers each
    with an error, which is read here, and starts nothing)."""
    import asyncio
    from .server_metrics import sandbox_starts, wait_for_sandboxes
    before, _ = await sandbox_starts(http, url)
    for sock in sockets:
        await sock.send(type="prepare_check")
    if before is not None and not await wait_for_sandboxes(http, url, before + len(sockets),
                                                           timeout=10 + len(sockets) / 4):
        say("  (the server did not start every check's sandbox ahead of time: a server without prepare_check?)")
    for sock in sockets:
        while True:
            try:
                message = await sock.receive(0.05)
            except asyncio.TimeoutError:
                break
            if message.get("type") == "error" and message.get("error") != "unknown_type":
                raise Aborted(f"prepare_check was refused: {message}")


async def press_check(sock, class_id, slug, etag, right, timeout, seen):
    """One student's press of Check: seconds to the attempt, verified;
    CheckFailed otherwise. `seen` gathers the queue positions and estimates."""
    from .check_exercise import expected
    from .client import CheckFailed
    started = running = time.perf_counter()
    deadline = time.monotonic() + timeout
    await sock.send(type="check", **{"class": class_id, "exercise": slug, "etag": etag})
    while True:
        message = await sock.receive(deadline - time.monotonic())
        kind = message.get("type")
        if kind == "error":
            raise CheckFailed("refused_" + str(message.get("error")), message.get("message", ""))
        if kind != "check":
            continue  # nothing else is expected; a late message of an earlier run is not this check's
        state = message.get("state")
        if state == "queued":
            seen["positions"].append(message.get("position"))
            seen["estimates"].append(message.get("estimate"))
        elif state == "running":
            seen["waits"].append(time.perf_counter() - started)
            running = time.perf_counter()
        elif state == "done":
            took = time.perf_counter() - started
            seen["runnings"].append(time.perf_counter() - running)
            attempt = message.get("attempt") or {}
            score, passed = expected(right)
            got_passed = sum(1 for r in attempt.get("results") or [] if r.get("passed") is True)
            if attempt.get("not_gradable"):
                raise CheckFailed("not_gradable", attempt.get("note", ""))
            if attempt.get("score") != score or got_passed != passed:
                raise CheckFailed("wrong_score", f"{'right' if right else 'wrong'} submission: score "
                                                 f"{attempt.get('score')}/{attempt.get('max_score')}, "
                                                 f"{got_passed} checks passed; expected {score}, {passed}")
            return took


async def class_checks(url, sockets, submissions, class_id, slug, timeout, cpu):
    """Every student presses Check, spread evenly over SPREAD s: the figures."""
    import asyncio
    import random

    from .check_exercise import CHECKS
    from .client import error_kind
    from .recording import Recorder, cpu_seconds
    recorder = Recorder()
    seen = {"positions": [], "estimates": [], "failures": [], "waits": [], "runnings": []}
    count = len(sockets)
    order = list(range(count))
    random.Random(count).shuffle(order)  # who clicks when: fixed, and right and wrong ones mixed
    at = {student: SPREAD * slot / count for slot, student in enumerate(order)}
    ends, took = [], []

    async def student(index):
        await asyncio.sleep(max(0.0, begun + at[index] - time.perf_counter()))
        etag, right = submissions[index]
        try:
            took.append(await press_check(sockets[index], class_id, slug, etag, right, timeout, seen))
            recorder.success(took[-1])
        except Exception as e:  # every failure is a counted error
            recorder.error(error_kind(e))
            if len(seen["failures"]) < 5:
                seen["failures"].append(str(e)[:300])
        ends.append(time.perf_counter())

    cpu.start()
    own = cpu_seconds()
    begun = time.perf_counter()
    await asyncio.gather(*(student(i) for i in range(count)))
    wall = max(ends) - begun
    used = cpu.stop()
    own = cpu_seconds() - own
    s = recorder.summary()
    checks = s["count"] * len(CHECKS)
    host = [used[k] for k in ("server", "postgres", "sandboxes") if used[k] is not None]
    return {"system": "PyClassroom", "students": count, "graded": s["count"], "checks": checks,
            "errors": s["errors"], "errors_by_kind": s["errors_by_kind"], "first_failures": seen["failures"],
            **latencies(took),
            "wall_s": round(wall, 3), "checks_per_s": round(checks / wall, 2) if wall else None,
            "cpu_ms_per_check": round(sum(host) * 1000 / checks, 2) if checks else None,
            "cpu_ms_per_check_by_part": {k: (round(v * 1000 / checks, 2) if checks and v is not None else None)
                                         for k, v in used.items()},
            "loadgen_cpu_s": round(own, 3),
            "max_queue_position": max((p for p in seen["positions"] if isinstance(p, int)), default=None),
            "max_estimate_s": max((e for e in seen["estimates"] if isinstance(e, (int, float))), default=None),
            "queued_messages": len(seen["positions"]),
            # click -> `running` (in line), and `running` -> `done` (the check itself, and recording it)
            **{f"{part}_{k}": v for part in ("wait", "running") for k, v in latencies(seen[part + "s"]).items()}}


async def pyclassroom_round(server, users, sockets, submissions, class_id, slug, timeout, base):
    before = await step_metrics(server.url)
    figures = await class_checks(server.url, sockets, submissions, class_id, slug, timeout,
                                 PyClassroomCpu(server, base))
    return {**figures, "server_steps": steps_between(before, await step_metrics(server.url))}


# -- Otter-Grader ----------------------------------------------------------------------

async def otter_round(otter, base, autograder, submissions, jobs, timeout, round_number, idle=False):
    """`otter run` of every submission, `jobs` at once: the figures."""
    import asyncio

    from . import otter as peer
    from .check_exercise import CHECKS, FILE, expected
    from .recording import Recorder
    recorder, runs, results = Recorder(), [], []  # errors; each `otter run`; submitted -> result (all at once)
    failures = []
    gate = asyncio.Semaphore(jobs)
    folder = os.path.join(base, f"otter-round-{round_number}")

    async def one(index, source, right):
        where = os.path.join(folder, f"student{index:04d}")
        os.makedirs(where)
        path = os.path.join(where, FILE)
        with open(path, "w") as f:
            f.write(source)
        async with gate:
            try:
                took = await peer.run_one(otter, base, autograder, path, os.path.join(where, "out"), timeout,
                                         idle)
                got, _, passed = peer.scores(os.path.join(where, "out", "results.json"))
                score, count = expected(right)
                if got != score or sum(passed.values()) != count:
                    raise ValueError(f"{'right' if right else 'wrong'} submission: score {got}, "
                                     f"{sum(passed.values())} tests passed; expected {score}, {count}")
            except Exception as e:
                kind = "timeout" if isinstance(e, asyncio.TimeoutError) else \
                    "wrong_score" if isinstance(e, ValueError) else \
                    "no_results" if isinstance(e, (OSError, KeyError)) else "otter_failed"
                recorder.error(kind)
                if len(failures) < 5:
                    failures.append(f"{kind}: {str(e)[:300]}")
            else:
                runs.append(took)
                results.append(time.perf_counter() - begun)
                recorder.success(took)

    from .check_exercise import submission
    cpu = peer.children_cpu()
    begun = time.perf_counter()
    await asyncio.gather(*(one(i, *submission(i)) for i in range(len(submissions))))
    wall = time.perf_counter() - begun
    cpu = peer.children_cpu() - cpu
    s = recorder.summary()
    checks = s["count"] * len(CHECKS)
    return {"system": "Otter-Grader", "students": len(submissions), "graded": s["count"], "checks": checks,
            "errors": s["errors"], "errors_by_kind": s["errors_by_kind"], "first_failures": failures,
            **latencies(results),
            "wall_s": round(wall, 3), "checks_per_s": round(checks / wall, 2) if wall else None,
            "cpu_ms_per_check": round(cpu * 1000 / checks, 2) if checks else None, "jobs": jobs, "idle": idle,
            "otter_run_p50_ms": latencies(runs)["p50_ms"], "otter_run_p95_ms": latencies(runs)["p95_ms"]}


# -- both ------------------------------------------------------------------------------

def measure(args, deadline):
    import asyncio
    import contextlib

    import aiohttp
    import psycopg2

    from server import config

    from . import otter as peer
    from .check_exercise import otter_tests
    from .harness import fresh_server, make_credentials, run_async, scratch
    from .run_phases import ides, log_in, sandbox_problem
    from .server_metrics import sandbox_starts, wait_for_sandboxes
    problem = sandbox_problem("local", config.load())
    if problem:
        raise Aborted(f"PyClassroom cannot run checks here: {problem}")
    otter = None if args.no_otter else peer.install(args.otter_venv)
    results = []
    with scratch("pyclassroom-bench-checks-") as (base, pg):
        say("starting PostgreSQL and hashing passwords ...")
        admin_dsn = pg.start()
        credentials = make_credentials(args.students + 1)
        autograder = None
        if otter:
            say("writing the Otter tests and its autograder zip (otter generate) ...")
            autograder = peer.generate(otter, os.path.join(base, "otter"), otter_tests(), args.timeout)
        settings = {"SANDBOX": "local", "RUN_MAX_CONCURRENT": "200", "RUN_QUEUE_MAX": "200"}
        if args.checks_at_once:
            settings["CHECKS_AT_ONCE"] = str(args.checks_at_once)
        with fresh_server(admin_dsn, base, args.processes, credentials, f"bench_checks_{args.processes}p",
                          **settings) as (server, logins):
            *students, teacher = logins
            conn = psycopg2.connect(server.env["DATABASE_URL"])
            try:
                with conn, conn.cursor() as cur:
                    cur.execute("UPDATE users SET role = 'teacher' WHERE username = %s", (teacher[0],))
            finally:
                conn.close()

            async def sitting():
                async with contextlib.AsyncExitStack() as stack:
                    say(f"PyClassroom: a class of {len(students)}, the exercise, the submissions ...")
                    class_id, slug, file, submission = await set_up_class(server, students, teacher, args.timeout)
                    users = await log_in(server.url, students, stack, args.timeout)
                    submissions = await start_and_save(users, class_id, slug, file, submission)
                    http = await stack.enter_async_context(
                        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=args.timeout)))
                    for number in range(1, args.rounds + 1):
                        # Fresh IDEs each round, as a class opening them (an IDE left idle
                        # through Otter's minutes may have been closed by the server).
                        async with contextlib.AsyncExitStack() as round_stack:
                            before, _ = await sandbox_starts(http, server.url)
                            sockets = await ides(server.url, users, round_stack, args.timeout)
                            if before is not None and not await wait_for_sandboxes(
                                    http, server.url, before + len(sockets), timeout=60 + len(sockets)):
                                say("  (the server did not report every warm sandbox: measuring anyway)")
                            await exercise_shown(http, server.url, sockets)
                            await asyncio.sleep(1.0)
                            say(f"round {number}: PyClassroom, {len(sockets)} students press Check within "
                                f"{SPREAD:g} s ...")
                            r = await pyclassroom_round(server, users, sockets, submissions, class_id, slug,
                                                        args.timeout, base)
                        results.append({"round": number, "processes": args.processes, **r})
                        server.ensure_running()
                        if otter:
                            say(f"round {number}: Otter-Grader, {len(submissions)} submissions, "
                                f"{args.otter_jobs} at once ...")
                            r = await otter_round(otter, os.path.join(base, "otter"), autograder, submissions,
                                                  args.otter_jobs, args.timeout, number, args.otter_idle)
                            results.append({"round": number, **r})
            run_async(sitting(), deadline)
    return results


# -- report ----------------------------------------------------------------------------

def comparisons(results):
    """Per round: {round, checks_per_s ratio, p95 ratio, and the targets}."""
    out = []
    for number in sorted({r["round"] for r in results}):
        ours = next((r for r in results if r["round"] == number and r["system"] == "PyClassroom"), None)
        theirs = next((r for r in results if r["round"] == number and r["system"] == "Otter-Grader"), None)
        row = {"round": number,
               "p95_target_met": ours is not None and not ours["errors"] and ours["p95_ms"] is not None
               and ours["p95_ms"] <= TARGET_P95_S * 1000}
        if ours and theirs and theirs["checks_per_s"] and ours["checks_per_s"] and theirs["p95_ms"]:
            row["throughput_ratio"] = round(ours["checks_per_s"] / theirs["checks_per_s"], 2)
            row["p95_ratio"] = round(ours["p95_ms"] / theirs["p95_ms"], 3)
            row["throughput_target_met"] = row["throughput_ratio"] >= TARGET_RATIO and not ours["errors"]
        out.append(row)
    return out


def report(args, info, results):
    from .check_exercise import CHECKS, MAX_SCORE, WRONG_SCORE
    lines = [f"{args.students} students press Check within {SPREAD:g} s on an exercise of {len(CHECKS)} checks "
             f"(5 output, 5 function); half the submissions right ({MAX_SCORE}/{MAX_SCORE}), half wrong "
             f"({WRONG_SCORE}/{MAX_SCORE}); every score verified",
             "time per student: click -> full result (PyClassroom); submitted -> result, every submission "
             "handed to Otter at once, --otter-jobs `otter run` at a time (Otter); checks/s: graded checks / wall time",
             f"{'round':>5} {'system':<14}{'graded':>7}{'p50 s':>8}{'p95 s':>8}{'max s':>8}{'wall s':>8}"
             f"{'checks/s':>10}{'CPU ms/check':>14}{'errors':>7}"]
    for r in results:
        lines.append(f"{r['round']:>5} {r['system']:<14}{r['graded']:>7}{fmt(ms(r['p50_ms']), '.2f'):>8}"
                     f"{fmt(ms(r['p95_ms']), '.2f'):>8}{fmt(ms(r['max_ms']), '.2f'):>8}{r['wall_s']:>8.1f}"
                     f"{fmt(r['checks_per_s'], '.1f'):>10}{fmt(r['cpu_ms_per_check'], '.1f'):>14}{r['errors']:>7}")
    lines.append("")
    for r in results:
        where = f"round {r['round']}, {r['system']}"
        if r["system"] == "PyClassroom":
            parts = r["cpu_ms_per_check_by_part"]
            lines.append(f"{where}: CPU ms per check: server {fmt(parts['server'], '.1f')}, PostgreSQL "
                         f"{fmt(parts['postgres'], '.1f')}, sandboxes {fmt(parts['sandboxes'], '.1f')} "
                         f"(whole machine, others' work included: {fmt(parts['machine'], '.1f')}); "
                         f"largest queue position {fmt(r['max_queue_position'], 'd')}, largest estimate "
                         f"{fmt(r['max_estimate_s'], '.1f')} s ({r['queued_messages']} queued messages); "
                         f"this client used {r['loadgen_cpu_s']:.1f} CPU s")
            steps = r.get("server_steps") or {}
            if steps:
                lines.append("  the server's /metrics meanwhile: " + "; ".join(
                    f"{label.replace('_', ' ')} {v['count']} (mean {fmt(ms(v['mean_ms']), '.3f')} s)"
                    for label, v in steps.items()))
            lines.append(f"  click -> running (waiting in line): p50 {fmt(ms(r['wait_p50_ms']), '.2f')} s, p95 "
                         f"{fmt(ms(r['wait_p95_ms']), '.2f')} s; running -> result: p50 "
                         f"{fmt(ms(r['running_p50_ms']), '.2f')} s, p95 {fmt(ms(r['running_p95_ms']), '.2f')} s")
        else:
            lines.append(f"{where}: {r['jobs']} `otter run` at once{' at SCHED_IDLE' if r['idle'] else ''}, each "
                         f"taking p50 {fmt(ms(r['otter_run_p50_ms']), '.2f')} s, p95 "
                         f"{fmt(ms(r['otter_run_p95_ms']), '.2f')} s; CPU: every otter process and its children "
                         "(kernels, the submissions' runs)")
        lines += error_lines(where, r["errors_by_kind"])
        lines += [f"  e.g. {f}" for f in r["first_failures"][:3]]
    lines += ["", f"targets (issue 23): p95 <= {TARGET_P95_S:g} s; PyClassroom's checks/s >= {TARGET_RATIO:g}x "
                  "Otter-Grader's, on the same submissions"]
    for c in comparisons(results):
        text = f"  round {c['round']}: p95 target {'MET' if c['p95_target_met'] else 'NOT met'}"
        if "throughput_ratio" in c:
            text += (f"; PyClassroom / Otter: checks/s {c['throughput_ratio']:.2f}x "
                     f"(target {'MET' if c['throughput_target_met'] else 'NOT met'}), p95 {c['p95_ratio']:.3f}x")
        lines.append(text)
    if not args.no_otter:
        from .otter import IPYKERNEL, OTTER_GRADER
        lines.append(f"peer: otter-grader {OTTER_GRADER} (ipykernel {IPYKERNEL}), `otter run` without containers")
    lines.append(f"PyClassroom: {args.processes} worker process(es), SANDBOX=local, CHECKS_AT_ONCE "
                 f"{args.checks_at_once or 'default'}")
    if args.server_root:
        lines.append(f"PyClassroom's server ran from {args.server_root}")
    lines.append(describe(info))
    lines.append("the client, both graders and whatever else runs on this host share its CPUs: figures are noisy")
    return "\n".join(lines)


def ms(value):
    return None if value is None else value / 1000


# -- main ------------------------------------------------------------------------------

def positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, not {text!r}")
    return value


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_checks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=positive, default=60, help="students pressing Check (default 60, "
                                                                     "at most 500)")
    parser.add_argument("--processes", type=int, choices=(1, 2), default=1,
                        help="PyClassroom worker processes (default 1)")
    parser.add_argument("--rounds", type=positive, default=1,
                        help="measure PyClassroom then Otter this many times, alternately (default 1, at most 5)")
    parser.add_argument("--checks-at-once", type=positive, default=None,
                        help="PyClassroom's CHECKS_AT_ONCE (default: the server's default)")
    parser.add_argument("--no-otter", action="store_true", help="measure PyClassroom alone (installs nothing)")
    parser.add_argument("--otter-venv", default=None,
                        help="the virtualenv of Otter-Grader, made there if need be "
                             "(default ~/.cache/pyclassroom-peer/otter-grader-<version>-ipykernel-<version>)")
    parser.add_argument("--otter-jobs", type=positive, default=os.cpu_count() or 1,
                        help=f"`otter run` processes at once (default: the CPUs, {os.cpu_count()})")
    parser.add_argument("--otter-idle", action="store_true",
                        help="run Otter at SCHED_IDLE, the CPU priority of PyClassroom's sandboxes (their cgroup "
                             "is cpu.idle), for a like-for-like comparison on a host others keep busy")
    server_root_option(parser)
    bounds(parser, max_seconds=3600, what="check or otter run")
    parser.set_defaults(timeout=CHECK_TIMEOUT)
    for action in parser._actions:
        if action.dest == "timeout":
            action.help = f"seconds allowed one student's check, or one otter run (default {CHECK_TIMEOUT:g})"
    args = parser.parse_args(argv)
    if args.students > 500 or args.rounds > 5:
        parser.error("--students is at most 500 and --rounds at most 5")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)

    def settings():
        from .otter import IPYKERNEL, OTTER_GRADER
        return {**{k: getattr(args, k) for k in ("students", "processes", "rounds", "checks_at_once", "no_otter",
                                                 "otter_jobs", "otter_idle", "timeout", "server_root")},
                "spread_s": SPREAD, "otter_grader": OTTER_GRADER, "ipykernel": IPYKERNEL}
    _, status = run_benchmark(args, measure, lambda info, results: report(args, info, results), settings,
                              lambda results: {"comparisons": comparisons(results),
                                               "targets": {"p95_s": TARGET_P95_S, "throughput_ratio": TARGET_RATIO}})
    return status or 0


if __name__ == "__main__":
    sys.exit(main())
