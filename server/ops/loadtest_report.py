"""The load test's figures, tables, verdicts, files and charts, for
`server.ops.loadtest`. Everything here works on plain dicts (what goes into
results.json), so a report can be redrawn from a saved run.
"""
import csv
import json
import os

from . import loadgen

NOISE = 0.10  # a p95 difference below this share is within noise
STAT_COLUMNS = ("avg_ms", "p50_ms", "min_ms", "max_ms", "p95_ms", "p99_ms", "rps")
HEADINGS = ("avg ms", "median", "min", "max", "p95", "p99", "req/s")
SWEEP_PARTS = loadgen.SERVER_PARTS + ("queue",)
# What a growing part means, for the sweep's verdict.
MEANING = {
    "hash_wait": "logins wait for a password-hashing thread (HASH_THREADS, CPUs)",
    "hash": "each password hash itself takes longer: the CPUs are shared by more at once",
    "fs_wait": "requests wait for a file thread (FILE_THREADS) because file calls are slow or many",
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
    """The JSON record of one measurement (see loadtest_scenarios.run_cell)."""
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
            "loadgen_cpu": round(window.cpu_share, 3), "loadgen_cpu_warning": window.cpu_share > loadgen.CPU_WARNING,
            "server_cpu": outcome.get("server_cpu"), "machine_busy": outcome.get("machine_busy"),
            "open_loop": outcome["open_loop"], "counts": outcome.get("counts", {})}


def fmt(value, width=8):
    if value is None:
        return f"{'-':>{width}}"
    return f"{value:>{width}.0f}" if abs(value) >= 10000 else f"{value:>{width}.1f}"


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
    best = min(measured, key=p95)
    if best is simplest:
        others = [r for r in measured if r is not simplest]
        if not others:
            return simplest, f"pick {simplest['mode']}"
        runner_up = min(others, key=p95)
        share = pct_diff(p95(runner_up), p95(simplest))
        if -share < NOISE:
            return simplest, (f"within noise: p95 {abs(share):.0%} apart ({p95(simplest):.1f} vs "
                              f"{p95(runner_up):.1f} ms, under {NOISE:.0%}): pick {simplest['mode']} for simplicity")
        return simplest, (f"pick {simplest['mode']}: p95 {-share:.0%} lower than with {runner_up['mode']} "
                          f"({p95(simplest):.1f} vs {p95(runner_up):.1f} ms)")
    share = pct_diff(p95(simplest), p95(best))
    if -share < NOISE:
        return simplest, (f"within noise: p95 {-share:.0%} lower with {best['mode']} ({p95(best):.1f} vs "
                          f"{p95(simplest):.1f} ms, under {NOISE:.0%}): pick {simplest['mode']} for simplicity")
    return best, (f"pick {best['mode']}: p95 {-share:.0%} lower than with {simplest['mode']} "
                  f"({p95(best):.1f} vs {p95(simplest):.1f} ms)")


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
            lines.append(f"{lead}  {r['mode']:<{width}}" + "".join(fmt(row[c]) for c in STAT_COLUMNS)
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
                         + "".join(fmt(row[c]) for c in STAT_COLUMNS) + f"{row['errors']:>8}")
    lines.append("")
    lines.append("server time per request (Server-Timing, mean ms; queue = client avg - server total: waiting "
                 "before the server read the request, and the network), CPU (server: of one core; machine: of all), "
                 "this machine's load average before and after")
    lines.append(f"{'scenario':<10} {'users':>5}  {'mode':<14}" + "".join(f"{p:>10}" for p in SWEEP_PARTS)
                 + f"{'server':>8}{'machine':>8}{'loadgen':>8}{'load':>12}")
    for r in records:
        t = r["server_timing_ms"] or {}
        lines.append(f"{r['scenario']:<10} {r['concurrency']:>5}  {r['mode'][:14]:<14}"
                     + "".join(fmt(t.get(p), 10) for p in SWEEP_PARTS)
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
            lines.append(f"{st['users']:>5}{st['rps']:>9.1f}{st['errors']:>7}{fmt(st['client_avg_ms'], 9)}"
                         f"{fmt(st['client_p95_ms'], 9)}" + "".join(fmt(st[p], 10) for p in SWEEP_PARTS))
        lines.append(f"  -> {s['scenario']}, {s['mode']}: {s['verdict']}")
        lines.append("")
    return lines


# -- files -----------------------------------------------------------------------------

def write_json(path, document):
    with open(path, "w") as f:
        json.dump(document, f, indent=2, default=str)
        f.write("\n")


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


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def latency_chart(path, records, modes):
    """p50/p95/p99 of each scenario's primary row by concurrency, one line per mode."""
    plt = _pyplot()
    scenarios = list(dict.fromkeys(r["scenario"] for r in records))
    cols = min(2, len(scenarios))
    rows = -(-len(scenarios) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.4 * cols, 4.4 * rows), squeeze=False)
    for ax in axes.flat[len(scenarios):]:
        ax.set_visible(False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, scenario in zip(axes.flat, scenarios):
        for i, mode in enumerate(modes):
            rows = sorted((r for r in records if r["scenario"] == scenario and r["mode"] == mode),
                          key=lambda r: r["concurrency"])
            xs = [r["concurrency"] for r in rows]
            for stat, style in (("p50_ms", "o-"), ("p95_ms", "s--"), ("p99_ms", "^:")):
                ys = [r["metrics"][r["primary"]][stat] for r in rows]
                ax.plot(xs, [float("nan") if y is None else y for y in ys], style, color=colours[i % len(colours)],
                        label=f"{mode} {stat[:-3]}")
        primary = next(r["primary"] for r in records if r["scenario"] == scenario)
        ax.set_title(f"{scenario} ({primary})")
        ax.set_xticks(sorted({r["concurrency"] for r in records if r["scenario"] == scenario}))
        ax.set_xlabel("concurrent users")
        ax.set_ylabel("ms")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("latency percentiles by mode and concurrency")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def sweep_chart(path, sweeps):
    """Per sweep: the server parts stacked (mean ms per request) and the
    client's average and p95, by number of users."""
    plt = _pyplot()
    fig, axes = plt.subplots(len(sweeps), 1, figsize=(8, 3.6 * len(sweeps)), squeeze=False)
    for ax, s in zip(axes[:, 0], sweeps):
        xs = [st["users"] for st in s["steps"]]
        ax.stackplot(xs, *[[st[p] or 0.0 for st in s["steps"]] for p in SWEEP_PARTS], labels=SWEEP_PARTS, alpha=0.8)
        ax.plot(xs, [st["client_p95_ms"] or float("nan") for st in s["steps"]], "k--", label="client p95")
        ax.set_title(f"{s['scenario']}, {s['mode']}: bottleneck {s['bottleneck'] or 'not reached'}", fontsize=9)
        ax.set_xlabel("concurrent users")
        ax.set_ylabel("ms per request")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
