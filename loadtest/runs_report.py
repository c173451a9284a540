"""The report of bench_runs: its tables, warnings, and the figures its
targets are about."""
from .machine import describe
from .recording import error_lines, fmt, pct
from .run_phases import ECHO_PATH
from .server_metrics import READY_WAIT

TARGET_LOCAL_RATIO = 2.0  # local first-output p50 / bare interpreter p50
TARGET_DOCKER_MS = 150.0  # docker first-output p50
TARGET_SAVE_P95_MS = 100.0  # save p95 while the hogs run


def targets(results, bare):
    """The figures the targets are about, per sandbox and student count."""
    out = []
    for block in results:
        for r in block["runs"]:
            p50 = r["first_output_p50_ms"]
            if p50 is None:
                continue
            near = block.get("bare_interpreter_before") or bare
            if block["sandbox"] == "local" and near["p50_ms"]:
                ratio = round(p50 / near["p50_ms"], 2)
                out.append({"sandbox": "local", "students": r["students"], "figure": "first-output p50 / bare p50",
                            "value": ratio, "target": f"<= {TARGET_LOCAL_RATIO:g}",
                            "met": ratio <= TARGET_LOCAL_RATIO})
            if block["sandbox"] == "docker":
                out.append({"sandbox": "docker", "students": r["students"], "figure": "first-output p50 ms",
                            "value": p50, "target": f"< {TARGET_DOCKER_MS:g}", "met": p50 < TARGET_DOCKER_MS})
        resp = block.get("responsiveness")
        if resp and resp["busy"]["p95_ms"] is not None:
            out.append({"sandbox": block["sandbox"], "students": resp["hogs"],
                        "figure": "save p95 ms with endless loops", "value": resp["busy"]["p95_ms"],
                        "target": f"< {TARGET_SAVE_P95_MS:g}", "met": resp["busy"]["p95_ms"] < TARGET_SAVE_P95_MS})
    return out


def report(args, info, bare, python, results, skipped):
    lines = [f"runs over /ws/run: each student runs {ECHO_PATH} (print, input(), print) in a loop for "
             f"{args.duration:g} s, a random {args.think * 0.5:g}-{args.think * 1.5:g} s pause between runs; WARM starts (the IDE's socket is open "
             "and its sandbox pre-started before the first run, and again during each pause)",
             f"server: {args.processes} process(es), RUN_MAX_CONCURRENT={args.max_concurrent} (nothing "
             f"queues), RUN_CPU_SECONDS={args.cpu_seconds}; first output = `run` sent -> first `output` frame "
             "(includes the server's output coalescing, up to 25 ms); exit = `run` sent -> `exit`",
             f"{'sandbox':>8} {'students':>8} {'runs':>5} {'errors':>6}  {'started':>7}  {'first p50':>9} {'p95':>6} "
             f"{'p99':>6}  {'exit p50':>8} {'p95':>6} {'p99':>6}  {'tail p95':>8} (ms)  {'runs/s':>6}  "
             f"{'sbx start':>9} {'new/reused':>10}  {'srv cpu':>7}  {'dockerd':>7}  {'machine':>7}  {'gen cpu':>7}"]
    for block in results:
        for r in block["runs"]:
            starts = r["server_sandbox_starts"] or {}
            lines.append(f"{r['sandbox']:>8} {r['students']:>8} {r['runs']:>5} {r['errors']:>6}  "
                         f"{fmt(r['started_p50_ms']):>7}  {fmt(r['first_output_p50_ms']):>9} "
                         f"{fmt(r['first_output_p95_ms']):>6} {fmt(r['first_output_p99_ms']):>6}  "
                         f"{fmt(r['exit_p50_ms']):>8} {fmt(r['exit_p95_ms']):>6} {fmt(r['exit_p99_ms']):>6}  "
                         f"{fmt(r['exit_after_output_p95_ms']):>8}       {r['runs_per_s']:>6.1f}  "
                         f"{fmt(starts.get('mean_ms')):>9} "
                         f"{str(starts.get('count', '-')) + '/' + str(r.get('server_sandbox_reuses', '-')):>10}  "
                         f"{pct(r['server_cpu']):>7}  "
                         f"{pct(r['docker_daemon_cpu'] if r['sandbox'] == 'docker' else None):>7}  "
                         f"{pct(r['machine_busy']):>7}  {r['loadgen_cpu']:>7.0%}")
    lines.append("(started: `run` -> `started` (p50); tail: last output frame -> `exit`; sbx start: the server's "
                 "mean time to start a sandbox until ready, during the loop, from its /metrics; new/reused: "
                 "sandboxes started afresh / made ready again after a run to serve the student's next one "
                 "(RUN_SANDBOX_RUNS), during the loop; srv cpu: the "
                 "server's processes, share of one core, sandboxes not included; dockerd: dockerd + containerd, of one "
                 "core; machine: all CPUs busy, of all; gen cpu: this load generator, of one core)")
    for block in results:
        near = block.get("bare_interpreter_before")
        if near:
            lines.append(f"bare interpreter right before the {block['sandbox']} runs: p50 {near['p50_ms']:.1f} ms, "
                         f"p95 {near['p95_ms']:.1f} ms")
    lines.append(f"bare interpreter at the start: {python} -c 'print(1)', start -> first stdout byte, {bare['samples']} times: "
                 f"p50 {bare['p50_ms']:.1f} ms, p95 {bare['p95_ms']:.1f} ms")
    lines.append("")
    resp_blocks = [b for b in results if b.get("responsiveness")]
    if resp_blocks:
        lines.append(f"file saves (PUT, If-Match, 2-4 KiB) by {args.savers} other students, closed loop "
                     f"{args.duration:g} s: idle, then while {args.hogs} students each run `while True: pass`")
        lines.append(f"{'sandbox':>8} {'load':>10} {'saves':>6} {'errors':>6}  {'p50':>7} {'p95':>7} {'p99':>7} "
                     f"{'max':>7} (ms)  {'saves/s':>7}  {'srv cpu':>7}  {'machine':>7}  {'gen cpu':>7}")
        for block in resp_blocks:
            resp = block["responsiveness"]
            for label, s in (("idle", resp["idle"]), (f"{resp['hogs_running']} loops", resp["busy"])):
                lines.append(f"{block['sandbox']:>8} {label:>10} {s['saves']:>6} {s['errors']:>6}  "
                             f"{fmt(s['p50_ms']):>7} {fmt(s['p95_ms']):>7} {fmt(s['p99_ms']):>7} "
                             f"{fmt(s['max_ms']):>7}       {s['saves_per_s']:>7.1f}  {pct(s['server_cpu']):>7}  "
                             f"{pct(s['machine_busy']):>7}  {s['loadgen_cpu']:>7.0%}")
            for label, s in (("idle", resp["idle"]), ("loops", resp["busy"])):
                parts = s.get("server_timing_ms") or {}
                lines.append(f"{'':>8} {label:>10} server time per save (Server-Timing, mean ms): " + ", ".join(
                    f"{k} {v:.1f}" for k, v in parts.items() if v))
            ratio = resp["busy_to_idle"]
            lines.append(f"{'':>8} {'busy/idle':>10} {'':>6} {'':>6}  {fmt(ratio.get('p50_ms'), '.2f'):>7} "
                         f"{fmt(ratio.get('p95_ms'), '.2f'):>7} {fmt(ratio.get('p99_ms'), '.2f'):>7}")
        lines.append("")
    for t in targets(results, bare):
        lines.append(f"target, {t['sandbox']}, {t['students']} students: {t['figure']} = {t['value']:.2f} "
                     f"(target {t['target']}): {'met' if t['met'] else 'NOT met'}")
    for block in results:
        kind = block["sandbox"]
        for r in block["runs"]:
            where = f"{kind}, {r['students']} students"
            lines += error_lines(where, r["errors_by_kind"])
            starts = r["server_sandbox_starts"] or {}
            if starts.get("mean_ms") and starts["mean_ms"] > r["think_s"] * 500:
                lines.append(f"WARNING, {where}: a sandbox took {starts['mean_ms']:.0f} ms on average to start, "
                             f"longer than the shortest pause ({r['think_s'] * 500:.0f} ms): some runs may have "
                             "waited for their sandbox, i.e. were not warm starts (a high `started` shows it)")
            if r["all_sandboxes_ready_s"] is not None and r["students"] > 1:
                lines.append(f"{where}: {r['students']} IDEs opened at once had all their sandboxes ready after "
                             f"{r['all_sandboxes_ready_s']:.2f} s")
            if not r["warm_sandboxes_reported"]:
                lines.append(f"WARNING, {where}: the server did not report every pre-started sandbox within "
                             f"{READY_WAIT:g} s: the first runs may not have been warm")
            if r["queued_messages"]:
                lines.append(f"WARNING, {where}: {r['queued_messages']} `queued` messages: admission queued "
                             "runs despite RUN_MAX_CONCURRENT")
            if r["loadgen_cpu_warning"]:
                lines.append(f"WARNING, {where}: the load generator used {r['loadgen_cpu']:.0%} of a core; "
                             "it may be the bottleneck")
        resp = block.get("responsiveness")
        if resp:
            where = f"{kind}, saves"
            for label in ("idle", "busy"):
                if resp[label]["errors_by_kind"]:
                    lines.append(f"errors, {where} ({label}): {resp[label]['errors_by_kind']}")
                if resp[label]["loadgen_cpu_warning"]:
                    lines.append(f"WARNING, {where} ({label}): the load generator used "
                                 f"{resp[label]['loadgen_cpu']:.0%} of a core")
            if resp["hog_start_errors"]:
                lines.append(f"endless loops that did not start, {kind}: {resp['hog_start_errors']}")
            if set(resp["hog_exit_reasons"]) - {"killed"}:
                lines.append(f"endless loops' exit reasons, {kind} (expected: killed): {resp['hog_exit_reasons']}")
        if block.get("docker_containers_left_after_stop"):
            lines.append(f"docker: {block['docker_containers_left_after_stop']} sandbox containers of the server "
                         "were still on the daemon after it stopped (removed by the benchmark)")
        if block["server_log_problems"]:
            lines.append(f"server log, {kind}: {block['server_log_problems']} records; the last ones:")
            for record in block["server_log_last_problems"]:
                lines.extend("    " + line[:300] for line in record)
    for kind, why in skipped.items():
        lines.append(f"skipped sandbox {kind}: {why}")
    lines.append(describe(info))
    lines.append("the load generator runs on the same machine and competes with the server and sandboxes for CPU")
    return "\n".join(lines)
