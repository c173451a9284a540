"""The load test's figures, tables, verdicts and files, for
`loadtest.loadtest` (the charts are in `charts`). Everything here works on
plain dicts (what goes into results.json), so a report can be redrawn from
a saved run.
"""
import csv
import json
import os

from . import charts
from .cli import write_json
from .loadgen import SWEEP_PARTS
from .recording import CPU_WARNING, fmt

NOISE = 0.10  # a p95 difference below this share is within noise
STAT_COLUMNS = ("avg_ms", "p50_ms", "min_ms", "max_ms", "p95_ms", "p99_ms", "rps")
HEADINGS = ("avg ms", "median", "min", "max", "p95", "p99", "req/s")
# What a growing part means, for the sweep's verdict.
MEANING = {
    "wait": "requests wait for their turn in a worker's line (REQUESTS_AT_ONCE): the worker is saturated",
    "hash_wait": "logins wait for a password-hashing thread (HASH_THREADS, CPUs)",
    "hash": "each password hash itself takes longer: the CPUs are shared by more at once",
    "fs_wait": "requests wait for a file process (FILE_PROCESSES) because file calls are slow or many",
    "fs": "the file system itself answers more slowly",
    "db": "PostgreSQL queries, or waiting for a pool connection (DB_POOL_MAX), take longer",
    "app": "the handlers' own work and their wait for a busy IOLoop: the workers' CPU",
    "queue": "requests wait before a worker even reads them: every IOLoop is busy (CPU)",
}


# -- figures -----------------------------------------------------------------------

def row_stats(recorder, wall):
    """avg, median, min, max, p95, p99 (ms, of successes), req/s and errors."""
    h, n = recorder.histogram, recorder.count
    return {"count": n, "errors": recorder.error_count, "errors_by_kind": dict(sorted(recorder.errors.items())),
            "avg_ms": round(h.get_mean_value() / 1000, 3) if n else None,
            "p50_ms": recorder.percentile_ms(50), "min_ms": h.get_min_value() / 1000 if n else None,
            "max_ms": h.get_max_value() / 1000 if n else None,
            "p95_ms": recorder.percentile_ms(95), "p99_ms": recorder.percentile_ms(99),
            "rps": round(n / wall, 2) if wall else 0.0,
            "by_worker": {str(pid): k for pid, k in sorted(recorder.workers.items())}}


def cell_record(mode, scenario_name, concurrency, outcome, loop):
    """The JSON record of one measurement (see cell.run_cell)."""
    scenario, window = outcome["scenario"], outcome["window"]
    rows = {name: row_stats(rec, window.wall) for name, rec in outcome["recorders"].items()}
    own = [name for name in scenario.metrics if name not in scenario.aggregates]
    errors_by_kind = {}
    for name in own:
        for kind, n in rows[name]["errors_by_kind"].items():
            errors_by_kind[f"{name}: {kind}" if len(own) > 1 else kind] = n
    timing = outcome["server_timing"].means_ms()
    primary = rows[scenario.primary]
    if timing is not None and primary["avg_ms"] is not None and scenario.timed_requests:
        timing["queue"] = round(max(0.0, primary["avg_ms"] - timing["total"]), 3)
    return {"mode": mode["label"], "processes": mode.get("processes"), "url": mode["url"],
            "scenario": scenario_name, "concurrency": concurrency, "about": scenario.about,
            "loop": "paced" if scenario.paced else loop, "primary": scenario.primary,
            "metrics": rows, "errors": sum(rows[name]["errors"] for name in own), "errors_by_kind": errors_by_kind,
            "wall_s": round(window.wall, 3), "active_users": outcome["active_users"],
            "server_timing_ms": timing, "server_timing_responses": outcome["server_timing"].responses,
            "loadgen_cpu": round(window.cpu_share, 3), "loadgen_cpu_warning": window.cpu_share > CPU_WARNING,
            "server_cpu": outcome.get("server_cpu"), "machine_busy": outcome.get("machine_busy"),
            "open_loop": outcome["open_loop"], "counts": outcome.get("counts", {})}


def column(value, width=8):
    """A figure right-aligned in a table column, without decimals once large."""
    return f"{fmt(value, '.0f' if value is not None and abs(value) >= 10000 else '.1f'):>{width}}"


def pct_diff(a, b):
    """(b - a) / a, or None when it cannot be said."""
    if a is None or b is None or not a:
        return None
    return (b - a) / a


def fmt_pct(share, width=8):
    return f"{'-':>{width}}" if share is None else f"{share * 100:>+{width - 1}.0f}%"


# -- verdicts ----------------------------------------------------------------------

def verdict(records):
    """(label of the mode to pick, one sentence why) for one scenario and
    concurrency measured in several modes (records in mode order, the
    simplest first). Errors decide first; then the primary p95, where a
    difference under NOISE is noise and the simplest mode wins."""
    if len(records) < 2:
        return None, "one mode measured: nothing to compare"
    fewest = min(r["errors"] for r in records)
    candidates = [r for r in records if r["errors"] == fewest]
    simplest = candidates[0]
    note = loadgen_note(records) + load_note(records)
    if len(candidates) < len(records):
        worst = [r for r in records if r["errors"] != fewest]
        against = "; ".join(f"{r['errors']} with {r['mode']} ({kinds(r)})" for r in worst)
        if len(candidates) > 1:
            pick, why = p95_pick(candidates)
            return pick["mode"], f"pick {pick['mode']}: {fewest} errors against {against}; {why}{note}"
        return simplest["mode"], f"pick {simplest['mode']}: {fewest} errors against {against}{note}"
    pick, why = p95_pick(candidates)
    return pick["mode"], f"{why} at the same error count ({fewest}){note}" if why.startswith("pick") else why + note


def p95_pick(candidates):
    simplest = candidates[0]
    measured = [r for r in candidates if p95(r) is not None]
    if not measured or p95(simplest) is None:
        return simplest, f"pick {simplest['mode']}: no latency to compare (no successes)"
    others = [r for r in measured if r is not simplest]
    if not others:
        return simplest, f"pick {simplest['mode']}"
    # The fastest against the simplest, or (when the simplest is the fastest) the next fastest.
    winner = min(measured, key=p95)
    loser = min(others, key=p95) if winner is simplest else simplest
    share = pct_diff(p95(loser), p95(winner))
    figures = f"{p95(winner):.1f} vs {p95(loser):.1f} ms"
    if -share < NOISE:
        how = "apart" if winner is simplest else f"lower with {winner['mode']}"
        return simplest, (f"within noise: p95 {-share:.0%} {how} ({figures}, under {NOISE:.0%}): "
                          f"pick {simplest['mode']} for simplicity")
    return winner, f"pick {winner['mode']}: p95 {-share:.0%} lower than with {loser['mode']} ({figures})"


def p95(record):
    return record["metrics"][record["primary"]]["p95_ms"]


def kinds(record):
    return ", ".join(f"{k} {n}" for k, n in record["errors_by_kind"].items()) or "none"


def loadgen_note(records):
    busy = [r for r in records if r["loadgen_cpu_warning"]]
    if not busy:
        return ""
    return (f" (careful: the load generator used {max(r['loadgen_cpu'] for r in busy):.0%} of a core, "
            "so it may be the bottleneck)")


def load_note(records):
    """A caution when the machine was much busier during one mode than
    another (other work: the modes are measured one after the other)."""
    loads = [(r["mode"], sum(r["load_average"]) / 2) for r in records if r.get("load_average")]
    if len(loads) < 2:
        return ""
    (low_mode, low), (high_mode, high) = min(loads, key=lambda x: x[1]), max(loads, key=lambda x: x[1])
    if high - low < (os.cpu_count() or 1):
        return ""
    return (f" (careful: this machine's load average was {high:.1f} while {high_mode} was measured and {low:.1f} "
            f"while {low_mode} was: other work may have favoured one)")


def verdicts(records, modes):
    """[{scenario, concurrency, pick, text}] for every scenario and
    concurrency, in the order measured."""
    out, seen = [], []
    for r in records:
        key = (r["scenario"], r["concurrency"])
        if key not in seen:
            seen.append(key)
    for scenario, concurrency in seen:
        group = [r for m in modes for r in records
                 if r["mode"] == m and r["scenario"] == scenario and r["concurrency"] == concurrency]
        pick, text = verdict(group)
        out.append({"scenario": scenario, "concurrency": concurrency, "pick": pick, "text": text})
    return out


def overall(found, modes):
    picks = [v["pick"] for v in found if v["pick"]]
    if not picks:
        return None
    counts = {m: picks.count(m) for m in modes}
    best = max(modes, key=lambda m: (counts[m], -modes.index(m)))  # ties: the simpler mode
    return (f"overall: pick {best} ({counts[best]} of {len(picks)} measurements; "
            + ", ".join(f"{m}: {counts[m]}" for m in modes) + ")")


# -- tables ------------------------------------------------------------------------

def comparison_table(records, modes, found):
    """Per scenario and concurrency: the primary row in every mode, the
    difference in percent from the first mode, and the verdict."""
    width = max(len(m) for m in modes + ["difference"]) + 2
    head = (f"{'scenario':<10} {'users':>5}  {'mode':<{width}}" + "".join(f"{h:>8}" for h in HEADINGS)
            + f"{'errors':>8}")
    lines = [head, "-" * len(head)]
    by = {(r["mode"], r["scenario"], r["concurrency"]): r for r in records}
    for v in found:
        first = True
        group = [by[m, v["scenario"], v["concurrency"]] for m in modes if (m, v["scenario"], v["concurrency"]) in by]
        for r in group:
            row = r["metrics"][r["primary"]]
            lead = f"{v['scenario']:<10} {v['concurrency']:>5}" if first else " " * 16
            lines.append(f"{lead}  {r['mode']:<{width}}" + "".join(column(row[c]) for c in STAT_COLUMNS)
                         + f"{r['errors']:>8}")
            first = False
        base = group[0]
        for r in group[1:]:
            label = "difference" if len(group) == 2 else f"{r['mode'].split()[0]} vs {base['mode'].split()[0]}"
            a, b = base["metrics"][base["primary"]], r["metrics"][r["primary"]]
            lines.append(" " * 16 + f"  {label:<{width}}" + "".join(fmt_pct(pct_diff(a[c], b[c])) for c in STAT_COLUMNS)
                         + f"{r['errors'] - base['errors']:>+8d}")
        if len(group) > 1:
            lines.append(" " * 18 + "-> " + v["text"])
    return lines


def details_table(records):
    """Every row of every measurement, with where the server's time went."""
    head = (f"{'scenario':<10} {'users':>5}  {'mode':<14} {'row':<17}" + "".join(f"{h:>8}" for h in HEADINGS)
            + f"{'errors':>8}")
    lines = [head, "-" * len(head)]
    for r in records:
        for name, row in r["metrics"].items():
            lines.append(f"{r['scenario']:<10} {r['concurrency']:>5}  {r['mode'][:14]:<14} {name[:17]:<17}"
                         + "".join(column(row[c]) for c in STAT_COLUMNS) + f"{row['errors']:>8}")
    lines.append("")
    lines.append("server time per request (Server-Timing, mean ms; queue = client avg - server total: waiting "
                 "before the server read the request, and the network), CPU (server: of one core; machine: of all), "
                 "this machine's load average before and after")
    lines.append(f"{'scenario':<10} {'users':>5}  {'mode':<14}" + "".join(f"{p:>10}" for p in SWEEP_PARTS)
                 + f"{'server':>8}{'machine':>8}{'loadgen':>8}{'load':>12}")
    for r in records:
        t = r["server_timing_ms"] or {}
        lines.append(f"{r['scenario']:<10} {r['concurrency']:>5}  {r['mode'][:14]:<14}"
                     + "".join(column(t.get(p), 10) for p in SWEEP_PARTS)
                     + "".join(f"{'-':>8}" if r[k] is None else f"{r[k]:>8.0%}"
                               for k in ("server_cpu", "machine_busy", "loadgen_cpu"))
                     + ("{:>12}".format("{:.1f}-{:.1f}".format(*r["load_average"])) if r.get("load_average") else ""))
    notes = []
    for r in records:
        where = f"{r['scenario']}, {r['concurrency']} users, {r['mode']}"
        if r["errors_by_kind"]:
            notes.append(f"errors, {where}: {kinds(r)}")
        if r["loadgen_cpu_warning"]:
            notes.append(f"WARNING, {where}: the load generator used {r['loadgen_cpu']:.0%} of a core; it, not "
                         "the server, may be the bottleneck")
        ol = r["open_loop"]
        if ol and (ol["waited"] or ol["late"] or ol["not_sent"]):
            notes.append(f"open loop, {where}: {ol['scheduled']} due at {ol['rate']:g}/s, {ol['sent']} sent, "
                         f"{ol['waited']} waited for a free user, {ol['late']} started late (latest "
                         f"{ol['max_lag_ms']:.0f} ms), {ol['not_sent']} never sent (errors); waiting counts in "
                         "the latency: if the server was not busy, more users (--concurrency) or a lower --rate")
        if r["counts"].get("queued_messages"):
            notes.append(f"{where}: {r['counts']['queued_messages']} `queued` messages: runs waited in the "
                         "server's line (RUN_MAX_CONCURRENT programs were already running on the host)")
        if r["active_users"] < r["concurrency"]:
            notes.append(f"{where}: only {r['active_users']} of {r['concurrency']} users got set up")
    return lines + ([""] + notes if notes else [])


# -- the sweep -----------------------------------------------------------------------

def sweep_step(record):
    """A sweep step's figures: the client's latency and each server part."""
    row = record["metrics"][record["primary"]]
    return {"users": record["concurrency"], "rps": row["rps"], "errors": record["errors"],
            "client_avg_ms": row["avg_ms"], "client_p95_ms": row["p95_ms"], "client_p99_ms": row["p99_ms"],
            **{p: (record["server_timing_ms"] or {}).get(p) for p in SWEEP_PARTS + ("total",)}}


def bottleneck(steps):
    """(part, sentence): the server part whose mean time per request grew
    most from the first step to the last."""
    usable = [s for s in steps if s["client_avg_ms"] is not None and s["total"] is not None]
    if len(usable) < 2:
        return None, "not enough steps with answers to say"
    a, b = usable[0], usable[-1]
    growth = {p: (b[p] or 0.0) - (a[p] or 0.0) for p in SWEEP_PARTS}
    part = max(growth, key=growth.get)
    client = b["client_avg_ms"] - a["client_avg_ms"]
    others = ", ".join(f"{p} {g:+.1f}" for p, g in sorted(growth.items(), key=lambda kv: -kv[1]) if p != part)
    if client < max(1.0, 0.2 * a["client_avg_ms"]) or growth[part] <= 0:
        largest = max(SWEEP_PARTS, key=lambda p: b[p] or 0.0)
        return None, (f"latency flat from {a['users']} to {b['users']} users (client avg {client:+.1f} ms): no "
                      f"bottleneck reached; most time in {largest} ({b[largest] or 0:.1f} ms per request)")
    return part, (f"bottleneck: {part}: {growth[part]:+.1f} ms per request from {a['users']} to {b['users']} users "
                  f"(client avg {client:+.1f} ms; {others}): {MEANING[part]}")


def sweep_lines(sweeps):
    lines = []
    for s in sweeps:
        lines.append(f"sweep: {s['scenario']}, {s['mode']} (mean ms per request; queue = client avg - server total)")
        lines.append(f"{'users':>5}{'req/s':>9}{'errors':>7}{'avg':>9}{'p95':>9}" + "".join(f"{p:>10}" for p in SWEEP_PARTS))
        for st in s["steps"]:
            lines.append(f"{st['users']:>5}{st['rps']:>9.1f}{st['errors']:>7}{column(st['client_avg_ms'], 9)}"
                         f"{column(st['client_p95_ms'], 9)}" + "".join(column(st[p], 10) for p in SWEEP_PARTS))
        lines.append(f"  -> {s['scenario']}, {s['mode']}: {s['verdict']}")
        lines.append("")
    return lines


# -- the whole report ------------------------------------------------------------------

def write_out(args, document, text):
    """report.txt, results.json and .csv, the chart (and the sweep's CSV)
    into --out; returns {kind: path}."""
    records, sweeps = document["results"], document["sweeps"]
    os.makedirs(args.out, exist_ok=True)
    labels = [m["label"] for m in document["modes"]]
    files = {"json": os.path.join(args.out, "results.json"), "csv": os.path.join(args.out, "results.csv")}
    write_csv(files["csv"], records)
    if sweeps:
        files["sweep_csv"] = os.path.join(args.out, "sweep.csv")
        files["chart"] = os.path.join(args.out, "sweep.png")
        write_sweep_csv(files["sweep_csv"], sweeps)
        charts.sweep_chart(files["chart"], sweeps)
    else:
        files["chart"] = os.path.join(args.out, "latency.png")
        charts.latency_chart(files["chart"], records, labels)
    files["report"] = os.path.join(args.out, "report.txt")
    document["files"] = files
    write_json(files["json"], document)
    with open(files["report"], "w") as f:
        f.write(text + "\n")
    return files


def text_report(args, document):
    modes, records, found, sweeps = (document[k] for k in ("modes", "results", "verdicts", "sweeps"))
    info, labels = document["machine"], [m["label"] for m in modes]
    amount = f"{args.duration:g} s" if args.requests is None else f"{args.requests} operations"
    loop = f"open loop at {args.rate:g} operations/s" if args.rate else "closed loop"
    paced = " (classroom: its own schedule)" if "classroom" in args.scenario else ""
    lines = [f"PyClassroom load test: {' vs '.join(labels)}; {loop}{paced}, {amount} per measurement after a "
             f"{args.warmup:g} s warm-up (not counted)"]
    for m in modes:
        extra = f", worker pids {m['worker_pids']}" if m.get("worker_pids") else ""
        lines.append(f"  {m['label']}: {m['url']}{extra}; checked first: {m['verified']['user']} logged in and "
                     f"ran a program")
    lines.append("scenarios (the verdict compares the row in brackets):")
    for name in args.scenario:
        r = next(r for r in records if r["scenario"] == name)
        lines.append(f"  {name} [{r['primary']}]: {r['about']}")
    lines.append("")
    if sweeps:
        lines += sweep_lines(sweeps)
    else:
        lines += comparison_table(records, labels, found)
        lines.append("")
        best = overall(found, labels)
        if best:
            lines += [best, ""]
        lines.append("every row: ms of verified successes (HDR histogram); errors = failed or wrong answers, "
                     "never counted as latencies")
        lines.append("")
        lines += details_table(records)
    lines.append("")
    load = document["load_average"]
    lines.append(f"machine: {info['cpus']} CPUs ({info['usable_cpus']} usable, {info['cpu_model']}), "
                 f"{info['memory_gib']} GiB memory, {info['platform']}; load average {load['start']:.1f} at the "
                 f"start, {load['end']:.1f} at the end")
    if max(load["start"], load["end"]) > info["cpus"]:
        lines.append(f"WARNING: the load average exceeded the {info['cpus']} CPUs: other work competed with the "
                     "test, so the figures are noisier and slower than on a quiet machine")
    v = document["versions"]
    lines.append(f"versions: Python {v['python']}, Tornado {v['tornado']}, server {v['server']}; git "
                 f"{(document['git']['commit'] or '?')[:12]}{' (uncommitted changes)' if document['git']['dirty'] else ''}")
    if not args.url:
        a = document["settings"]["argon2"]
        lines.append(f"argon2id m={a['memory_kib'] // 1024} MiB t={a['time_cost']} p={a['parallelism']}; "
                     "server settings: " + ", ".join(f"{k}={v}" for k, v in document["settings"]["server"].items()))
    lines.append("the load generator runs on the same machine and competes with the server for CPU"
                 if not args.url else "the load generator ran on this machine, the deployment elsewhere")
    lines.append(f"command: {document['command']}")
    return "\n".join(lines)


# -- files -----------------------------------------------------------------------------

def write_csv(path, records):
    parts = SWEEP_PARTS + ("total",)
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["mode", "processes", "url", "scenario", "loop", "concurrency", "row", "primary", "count",
                      "errors", *STAT_COLUMNS, "loadgen_cpu", "server_cpu", "machine_busy", "load_average",
                      *(f"server_{p}_ms" for p in parts), "errors_by_kind"])
        for r in records:
            t = r["server_timing_ms"] or {}
            for name, row in r["metrics"].items():
                out.writerow([r["mode"], r["processes"], r["url"], r["scenario"], r["loop"], r["concurrency"], name,
                              name == r["primary"], row["count"], row["errors"], *(row[c] for c in STAT_COLUMNS),
                              r["loadgen_cpu"], r["server_cpu"], r["machine_busy"],
                              " ".join(map(str, r.get("load_average") or [])), *(t.get(p) for p in parts),
                              json.dumps(row["errors_by_kind"])])


def write_sweep_csv(path, sweeps):
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        keys = ["users", "rps", "errors", "client_avg_ms", "client_p95_ms", "client_p99_ms", *SWEEP_PARTS, "total"]
        out.writerow(["scenario", "mode", *keys])
        for s in sweeps:
            for st in s["steps"]:
                out.writerow([s["scenario"], s["mode"], *(st[k] for k in keys)])
