"""What one run costs the host, and where: CPU per run by process, server,
PostgreSQL and sandbox apart, with the server's hottest functions.

    python -m loadtest.bench_run_cost [--runs 300] [--sandbox local] [--py-spy] [--json OUT]

One student on an open IDE runs a one-line program (`print(1)`) again and
again, one run after the other, with the machine otherwise quiet. Before
and after, it reads the CPU time (user + system) of every process that
takes part: the server's (psutil), PostgreSQL's backends (psutil), and the
sandboxes' cgroup (cpuacct: the launcher, bubblewrap and every program,
including the short-lived ones psutil cannot catch), the launcher alone
(psutil) and the whole machine (/proc/stat: what no process above owns is
the kernel's and this client's). Divided by the runs, that is the cost of
a run. With --py-spy (pip install py-spy) the server is sampled meanwhile
and its hottest functions are listed, inclusive share first.
"""
import argparse
import os
import sys
import time

from .cli import Aborted, bounds, clean_up_on_sigterm, say, write_json
from .machine import file_processes, machine_busy

PROGRAM = "print(1)\n"
ONE_SANDBOX_MAX_RUNS = 780  # the warm-up runs and these within 800, a sandbox's fewest runs


def cpu_of(procs):
    """(their own, their reaped children's) CPU seconds, summed over `procs`;
    a process that is gone adds nothing (its time was counted till then)."""
    own = children = 0.0
    for proc in procs:
        try:
            t = proc.cpu_times()
        except Exception:
            continue
        own += t.user + t.system
        children += t.children_user + t.children_system
    return own, children


def machine_seconds():
    """Busy CPU seconds of the whole machine so far."""
    return machine_busy()[0] / os.sysconf("SC_CLK_TCK")


def sandbox_group_seconds():
    """CPU of everything in the sandboxes' cgroups (v1 cpuacct or v2 cpu.stat)."""
    from server.runs import cgroups
    groups = cgroups.Groups.detect()
    if groups is None:
        return None
    try:
        if groups.version == 1:
            path = groups.parents.get("cpuacct")
            with open(os.path.join(path, "cpuacct.usage")) as f:
                return int(f.read()) / 1e9
        with open(os.path.join(groups.parents[""], "cpu.stat")) as f:
            for line in f:
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) / 1e6
    except (OSError, KeyError, TypeError, ValueError):
        return None
    return None


class Snapshot:
    def __init__(self, server_procs, postgres_procs, launchers):
        # The server's own time: its reaped children are sandboxes (bubblewrap),
        # counted in their cgroup, or on their own where there is none.
        self.server, self.server_children = cpu_of(server_procs)
        self.postgres = sum(cpu_of(postgres_procs))
        self.launchers = cpu_of(launchers)
        self.sandboxes = sandbox_group_seconds()
        self.machine = machine_seconds()
        self.at = time.monotonic()


def postgres_processes(psutil, base):
    """The scratch PostgreSQL's postmaster and its children (backends, writers)."""
    for p in psutil.process_iter(["cmdline"]):
        cmdline = p.info["cmdline"] or []
        if cmdline and cmdline[0].endswith("postgres") and any(a.startswith(base) for a in cmdline):
            return [p] + p.children(recursive=True)
    return []


def user_id(dsn, username):
    import psycopg2
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id FROM users WHERE username = %s", (username,))
            return cur.fetchone()[0]
    finally:
        conn.close()


def launcher_processes(psutil, uid):
    return [p for p in psutil.process_iter(["uids", "cmdline"])
            if p.info["uids"] and p.info["uids"].real == uid and p.info["cmdline"]
            and any(a.startswith('"""The launcher') for a in p.info["cmdline"])]


async def run_loop(url, cookies, runs, timeout):
    from .run_client import RunClient
    async with RunClient(url, cookies, timeout=timeout, keep=False) as rc:
        for _ in range(3):  # the sandbox is started and warm; a first run or two settle things
            await rc.run("cost.py")
        yield rc
        for _ in range(runs):
            exit_ = await rc.run("cost.py")
            if exit_["reason"] != "ok":
                raise Aborted(f"a run ended with {exit_['reason']}: {exit_['message']}")


def measure(args):
    import asyncio

    import psutil

    from .client import Client
    from .harness import fresh_server, make_credentials, scratch
    from .profile import Sampler, hottest
    with scratch("pyclassroom-bench-cost-") as (base, pg):
        say("starting PostgreSQL and the server ...")
        admin_dsn = pg.start()
        settings = {"SANDBOX": args.sandbox}
        if args.one_sandbox:
            settings["RUN_SANDBOX_RUNS"] = "1000"  # less its random fifth, past ONE_SANDBOX_MAX_RUNS
        with fresh_server(admin_dsn, base, 1, make_credentials(1, "cost"), "cost", **settings) as (server, users):
            username, password = users[0]
            client = Client(server.url)
            client.login_ok(username, password)
            client.request("PUT", "/api/files/home/cost.py", data=PROGRAM.encode(), headers={"If-Match": "*"})
            server_procs = [psutil.Process(pid) for pid in [*server.pids, *file_processes(server.pids),
                                                            server.proc.pid]]
            postgres_procs = postgres_processes(psutil, base)
            uid = 200000 + user_id(server.env["DATABASE_URL"], username)  # its sandbox's uid, as root
            cookies = client.http.cookies.get_dict()

            async def go():
                loop = run_loop(server.url, cookies, args.runs, args.timeout)
                await loop.__anext__()
                launchers = launcher_processes(psutil, uid) if os.geteuid() == 0 else []
                spy = None
                if args.py_spy:
                    spy = Sampler(server.pids[0])
                    await asyncio.sleep(1.0)
                before = Snapshot(server_procs, postgres_procs, launchers)
                try:
                    await loop.__anext__()
                except StopAsyncIteration:
                    pass
                after = Snapshot(server_procs, postgres_procs, launchers)
                hot = hottest(spy.stop()) if spy else None
                return before, after, hot
            return asyncio.run(go())


def report(args, before, after, hot):
    n, per = args.runs, lambda a, b: (b - a) * 1000 / args.runs
    rows = [("server (Tornado workers, file processes)", per(before.server, after.server)),
            ("PostgreSQL", per(before.postgres, after.postgres))]
    if before.sandboxes is not None and after.sandboxes is not None:
        sandbox = per(before.sandboxes, after.sandboxes)
        if args.one_sandbox:
            launcher, programs = per(before.launchers[0], after.launchers[0]), per(before.launchers[1], after.launchers[1])
            rows += [("sandbox: the launcher (relay, fork, clean-up)", launcher),
                     ("sandbox: the programs (forks of the launcher)", programs),
                     ("sandbox: the rest (bubblewrap)", sandbox - launcher - programs)]
        else:
            rows.append(("sandbox: launchers, programs, bubblewrap, new sandboxes", sandbox))
    else:  # no sandbox cgroup: the sandboxes the server reaped
        rows.append(("sandboxes ended meanwhile (the server's reaped children)",
                     per(before.server_children, after.server_children)))
    machine = per(before.machine, after.machine)
    owned = sum(v for _, v in rows)
    rows.append(("kernel threads and this client (rest of the machine)", machine - owned))
    seconds = after.at - before.at
    print(f"one student, {n} runs of print(1) one after the other in {seconds:.1f} s "
          f"({n / seconds:.1f} runs/s), {args.sandbox} sandbox; host CPU per run:")
    for name, ms in rows:
        print(f"  {name:<55} {ms:6.2f} ms")
    print(f"  {'all (the whole machine)':<55} {machine:6.2f} ms")
    if hot:
        ours, own, total = hot
        print(f"\nthe server's own functions ({total} samples of its busy time, inclusive share):")
        for share, frame in ours:
            print(f"  {share * 100:5.1f}%  {frame[:110]}")
        print("\nwhere the samples were (self share: the function on top of the stack):")
        for share, frame in own:
            print(f"  {share * 100:5.1f}%  {frame[:110]}")
    return {"runs": n, "seconds": seconds, "ms_per_run": dict(rows), "machine_ms_per_run": machine,
            "server_functions": hot[0] if hot else [], "server_self": hot[1] if hot else []}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_run_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="runs measured (default 300)")
    parser.add_argument("--sandbox", default="local", choices=["local", "docker", "process"])
    parser.add_argument("--py-spy", action="store_true", help="sample the server with py-spy meanwhile")
    parser.add_argument("--one-sandbox", action="store_true",
                        help="one sandbox serves every run (RUN_SANDBOX_RUNS above --runs), so that the launcher's "
                             "own share and its programs' are told apart; without it a sandbox is replaced "
                             "every RUN_SANDBOX_RUNS runs, as in a class, and that cost is in the figures")
    bounds(parser, 600, "run")
    args = parser.parse_args(argv)
    if args.one_sandbox and args.runs > ONE_SANDBOX_MAX_RUNS:
        parser.error(f"--one-sandbox measures at most {ONE_SANDBOX_MAX_RUNS} runs (a sandbox serves at most 1000, "
                     "less up to a fifth at random)")
    clean_up_on_sigterm()
    try:
        before, after, hot = measure(args)
    except Aborted as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    document = report(args, before, after, hot)
    if args.json:
        write_json(args.json, document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
