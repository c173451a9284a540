"""The load test's charts (matplotlib, Agg backend): latency percentiles by
mode and load, and the sweep's server parts by load."""
from .loadgen import SWEEP_PARTS


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
