"""Benchmark: a class reloads the IDE, then presses Run. The first run on
each student's new sandbox, on a runner, and what it sends there.

    python -m loadtest.bench_reload [--students 10] [--files 100] [--kib 4]
                                    [--reloads 4] [--server-root DIR] [--json OUT]

One server (one worker, SANDBOX=remote: its child runner) on a fresh
database. Every student has --files files of --kib KiB in their home and
the echo program. Then, --reloads + 1 times: every student opens the IDE
(a new sandbox is started for each, on the runner), we wait until the
server reports them ready, every student runs the echo program once, and
closes the IDE (the sandbox ends). Timed: `run` sent -> first output. The
first round is a home the runner has never seen; the others follow a
reload. Reported per kind of round: p50/p95/max, and the files sent to
the runner per run (pyclassroom_runner_files_sent_total; "-" for a server
that does not count them). Measure an earlier commit with --server-root in
the same sitting to compare. Bounded: --timeout per wait, --max-seconds
for all.
"""
import argparse
import asyncio
import contextlib
import sys
import time

from .cli import Aborted, bounds, run_benchmark, say, server_root_option
from .client import save_file
from .recording import fmt, recorded

SAVES_AT_ONCE = 20


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_reload", description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=10, help="students (default 10)")
    parser.add_argument("--files", type=int, default=100, help="files in each student's home (default 100)")
    parser.add_argument("--kib", type=int, default=4, help="KiB per file (default 4)")
    parser.add_argument("--reloads", type=int, default=4, help="reloads after the first round (default 4)")
    server_root_option(parser)
    bounds(parser, max_seconds=900, what="wait")
    args = parser.parse_args(argv)
    if args.students < 1 or args.files < 0 or args.kib < 0 or args.reloads < 1:
        parser.error("--students and --reloads must be at least 1, --files and --kib at least 0")
    return args


async def rounds(url, credentials, args):
    """[{"round", "first_output_s": [...], "errors", "files_sent"}] per round."""
    import aiohttp
    from .run_client import ECHO_PROGRAM
    from .run_phases import ECHO_PATH, ides, log_in, save_everywhere
    from .server_metrics import sandbox_starts, server_metrics, wait_for_sandboxes
    found = []
    async with contextlib.AsyncExitStack() as stack:
        users = await log_in(url, credentials, stack, args.timeout)
        await save_everywhere(users, ECHO_PATH, ECHO_PROGRAM)
        text = ("x" * 63 + "\n") * (args.kib * 16)
        line = asyncio.Semaphore(SAVES_AT_ONCE)

        async def one(user, i):
            async with line:
                await save_file(user, f"data/file{i:04d}.txt", text)
        await asyncio.gather(*(one(user, i) for user in users for i in range(args.files)))
        http = await stack.enter_async_context(aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(args.timeout)))
        for number in range(args.reloads + 1):
            say(f"round {number + 1} of {args.reloads + 1} ...")
            before = await sandbox_starts(http, url)
            sent_before = (await server_metrics(http, url)).get("pyclassroom_runner_files_sent_total")
            async with contextlib.AsyncExitStack() as page:
                sockets = await ides(url, users, page, args.timeout)
                if before[0] is None or not await wait_for_sandboxes(http, url, before[0] + len(sockets)):
                    raise Aborted("the server did not report the students' sandboxes ready")
                outcomes = await asyncio.gather(*(sock.echo_run(ECHO_PATH) for sock in sockets),
                                                return_exceptions=True)
            sent_after = (await server_metrics(http, url)).get("pyclassroom_runner_files_sent_total")
            found.append({"round": number, "first_output_s": [o["first"] for o in outcomes if isinstance(o, dict)],
                          "errors": sum(isinstance(o, Exception) for o in outcomes),
                          "files_sent": None if sent_before is None or sent_after is None
                          else (sent_after - sent_before) / len(users)})
            await asyncio.sleep(1.0)  # the sandboxes end (and their copies are kept) before the next round
    return found


def measure(args, deadline):
    from .harness import fresh_server, make_credentials, run_async, scratch
    settings = {"SANDBOX": "remote", "RUN_MAX_CONCURRENT": str(args.students * 2),
                "QUOTA_BYTES": str(max(200 << 20, 2 * args.files * args.kib << 10))}
    with scratch("pyclassroom-bench-reload-") as (base, pg):
        admin_dsn = pg.start()
        credentials = make_credentials(args.students)
        with fresh_server(admin_dsn, base, 1, credentials, "bench_reload", **settings) as (server, logins):
            began = time.monotonic()
            found = run_async(rounds(server.url, logins, args), deadline)
            say(f"measured in {time.monotonic() - began:.0f} s")
    return found


def report(info, found):
    lines = []
    for label, mine in (("first sandbox (the runner has never seen the home)", found[:1]),
                        ("after a reload (a new sandbox)", found[1:])):
        s = recorded(v for r in mine for v in r["first_output_s"])
        sent = [r["files_sent"] for r in mine if r["files_sent"] is not None]
        lines.append(f"{label}: {len(mine)} round(s), run -> first output p50 {fmt(s['p50_ms'])} ms, "
                     f"p95 {fmt(s['p95_ms'])} ms, max {fmt(s['max_ms'])} ms; errors {sum(r['errors'] for r in mine)}; "
                     f"files sent per run {fmt(sum(sent) / len(sent)) if sent else '-'}")
    lines.append(f"machine: {info['cpus']} CPUs, the load generator on the same machine")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    _, status = run_benchmark(args, measure, report, lambda: vars(args))
    return status or 0


if __name__ == "__main__":
    sys.exit(main())
