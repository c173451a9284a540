"""Recording what a tool measured: latencies of successes in an HDR
histogram (microseconds, 1 µs to 60 s, 3 significant digits), failures
counted by kind — never as latencies — and which worker answered; and how
figures are written in the tools' tables.

Shared by every benchmark and the load generator; it needs only hdrh, so
it also runs on a file server's host without the HTTP client libraries.
hdrh is loaded with the first Recorder: a report or a --help needs only fmt.
"""
import resource
from collections import Counter

LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS = 1, 60_000_000, 3
# Above this share of one core a tool's own CPU (and the GIL) may be what is slow.
CPU_WARNING = 0.70


class Recorder:
    def __init__(self):
        from hdrh.histogram import HdrHistogram
        self.histogram = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
        self.errors = Counter()
        self.workers = Counter()  # successes per X-Worker-Pid

    def success(self, seconds, worker=None):
        self.histogram.record_value(min(max(round(seconds * 1e6), LOWEST_US), HIGHEST_US))
        if worker is not None:
            self.workers[worker] += 1

    def error(self, kind):
        self.errors[kind] += 1

    def merge(self, other):
        """Add another recorder's figures (HdrHistogram is not thread-safe,
        so threads record into their own and are merged afterwards). hdrh's
        add() takes an empty histogram's minimum, on either side, as 0."""
        if other.count:
            empty = not self.count
            self.histogram.add(other.histogram)
            if empty:
                self.histogram.min_value = other.histogram.min_value
        self.errors.update(other.errors)
        self.workers.update(other.workers)
        return self

    @property
    def count(self):
        """Successful operations."""
        return self.histogram.get_total_count()

    @property
    def error_count(self):
        return sum(self.errors.values())

    def percentile_ms(self, percentile):
        if not self.count:
            return None
        return self.histogram.get_value_at_percentile(percentile) / 1000

    def summary(self, wall=None):
        h = self.histogram
        out = {
            "count": self.count,
            "errors": self.error_count,
            "errors_by_kind": dict(sorted(self.errors.items())),
            "p50_ms": self.percentile_ms(50),
            "p95_ms": self.percentile_ms(95),
            "p99_ms": self.percentile_ms(99),
            "max_ms": h.get_max_value() / 1000 if self.count else None,
            "mean_ms": round(h.get_mean_value() / 1000, 3) if self.count else None,
            "by_worker": {str(pid): n for pid, n in sorted(self.workers.items())},
        }
        if wall is not None:
            out["ops_per_s"] = round(self.count / wall, 2) if wall else 0.0
        return out


def recorded(seconds):
    """The latencies `seconds` summarized as every tool reports them (Recorder.summary)."""
    recorder = Recorder()
    for value in seconds:
        recorder.success(value)
    return recorder.summary()


def cpu_seconds():
    """CPU time (user + system) of this process so far, all threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def fmt(value, spec=".1f"):
    """A figure in a table: "-" when there is none (no successes)."""
    return "-" if value is None else format(value, spec)


def error_lines(where, kinds):
    """The report's line naming a measurement's errors by kind, if it had any."""
    return [f"errors, {where}: " + ", ".join(f"{k} {n}" for k, n in kinds.items())] if kinds else []


def page_lines(result, where, page):
    """The report's lines on the page Chromium kept open through a
    measurement (`where` it was, `page`: whose, and what it showed): its
    errors, the records it dropped over its bound, and its memory."""
    lines = [f"the page's errors, {where}: {result['page_errors']}"] if result["page_errors"] else []
    if result["page_records_dropped"]:
        lines.append(f"the page dropped {result['page_records_dropped']} records (over its bound)")
    lines.append(f"{page}, after a garbage collection:")
    lines.append(f"  {'at s':>6}  {'JS heap MiB':>11}  {'DOM nodes':>9}  {'listeners':>9}  {'renderer RSS MiB':>16}")
    for m in result["memory"]:
        lines.append(f"  {m['at_s']:>6.0f}  {m['js_heap_used_mib']:>11.1f}  {m['dom_nodes']:>9}  "
                     f"{m['js_event_listeners']:>9}  {m['renderer_rss_mib']:>16.1f}")
    return lines


def pct(share):
    """A share (0.25) as a percentage ("25%"), "-" when there is none."""
    return fmt(share, ".0%")
