"""Prometheus metrics, correct when several worker processes serve.

prometheus_client's multiprocess mode keeps each process's values in files
under PROMETHEUS_MULTIPROC_DIR, which `__main__` sets (to a fresh folder per
server instance) before this module is imported; `/metrics` adds them up.
"""
import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, multiprocess
from prometheus_client import CONTENT_TYPE_LATEST  # noqa: F401 - re-exported for the handler

LATENCY_BUCKETS = (.002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30)

REQUESTS = Counter("pyclassroom_http_requests_total", "HTTP requests answered",
                   ["route", "method", "status"])
LATENCY = Histogram("pyclassroom_http_request_duration_seconds", "Time to answer an HTTP request",
                    ["route", "method"], buckets=LATENCY_BUCKETS)
WORKERS = Gauge("pyclassroom_workers", "Worker processes serving", multiprocess_mode="livesum")
DB_POOL_IN_USE = Gauge("pyclassroom_db_pool_in_use", "Database connections in use",
                       multiprocess_mode="livesum")
DB_POOL_SIZE = Gauge("pyclassroom_db_pool_size", "Database connections open", multiprocess_mode="livesum")
FILE_OPS = Histogram("pyclassroom_file_op_seconds", "Time of a file operation, executor wait included",
                     ["op"], buckets=LATENCY_BUCKETS)
SOCKETS = Gauge("pyclassroom_run_sockets", "Open /ws/run connections (IDEs open)", multiprocess_mode="livesum")
RUNS_ACTIVE = Gauge("pyclassroom_runs_active", "Programs running", multiprocess_mode="livesum")
RUN_QUEUE = Gauge("pyclassroom_run_queue_length", "Runs waiting for a place", multiprocess_mode="livesum")
RUN_QUEUE_WAIT = Histogram("pyclassroom_run_queue_wait_seconds", "Time a run waited for a place",
                           buckets=LATENCY_BUCKETS)
SANDBOX_START = Histogram("pyclassroom_sandbox_start_seconds", "Time to start a sandbox until ready",
                          buckets=LATENCY_BUCKETS)
SANDBOX_START_RETRIES = Counter("pyclassroom_sandbox_start_retries_total",
                                "Sandbox starts that failed once and were tried again")
SANDBOX_START_FAILURES = Counter("pyclassroom_sandbox_start_failures_total",
                                 "Sandbox starts that failed twice (a student or an attempt was told), by reason",
                                 ["reason"])
SANDBOX_STARTING = Gauge("pyclassroom_sandbox_starts_waiting", "Sandbox starts waiting in line",
                         multiprocess_mode="livesum")
SANDBOX_REUSED = Counter("pyclassroom_sandbox_reused_total",
                         "Sandboxes made ready again after a run, to serve the same student's next run")
RUNNER_FILES_SENT = Counter("pyclassroom_runner_files_sent_total",
                            "Files of students' homes sent to runners' copies before runs")
RUNNER_COPIES_ADOPTED = Counter("pyclassroom_runner_copies_adopted_total",
                                "New sandboxes on runners that started with the copy of the home a sandbox before "
                                "them left there, so that only what changed was sent")
REPLAY_BYTES = Counter("pyclassroom_replay_bytes_total",
                       "Bytes of students' edits stored for replay (compressed; issue 33's bytes per student-hour)")
RUN_DURATION = Histogram("pyclassroom_run_duration_seconds", "How long runs lasted",
                         buckets=(.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900))
RUN_EXITS = Counter("pyclassroom_run_exits_total", "Runs ended, by reason", ["reason"])
LOGINS = Counter("pyclassroom_logins_total", "Login attempts by outcome", ["outcome"])


def observe_request(route, method, status, seconds):
    REQUESTS.labels(route, method, str(status)).inc()
    LATENCY.labels(route, method).observe(seconds)


def update_pool(pool):
    DB_POOL_SIZE.set(pool.get_size())
    DB_POOL_IN_USE.set(pool.get_size() - pool.get_idle_size())


def render():
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return generate_latest(registry)


def snapshot():
    """What the admin page shows, summed over all workers: runs, queue,
    open IDEs, and request latency percentiles (estimated from the
    histogram's buckets, as Prometheus' histogram_quantile does)."""
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    gauges, buckets, count, failures = {}, {}, 0.0, {}
    for family in registry.collect():
        for sample in family.samples:
            if sample.name in ("pyclassroom_runs_active", "pyclassroom_run_queue_length",
                               "pyclassroom_run_sockets", "pyclassroom_workers",
                               "pyclassroom_sandbox_starts_waiting", "pyclassroom_sandbox_start_retries_total"):
                gauges[sample.name] = gauges.get(sample.name, 0) + sample.value
            elif sample.name == "pyclassroom_sandbox_start_failures_total":
                reason = sample.labels["reason"]
                failures[reason] = failures.get(reason, 0) + int(sample.value)
            elif sample.name == "pyclassroom_http_request_duration_seconds_bucket":
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0) + sample.value
            elif sample.name == "pyclassroom_http_request_duration_seconds_count":
                count += sample.value
    return {
        "active_runs": int(gauges.get("pyclassroom_runs_active", 0)),
        "queued_runs": int(gauges.get("pyclassroom_run_queue_length", 0)),
        "connected_ides": int(gauges.get("pyclassroom_run_sockets", 0)),
        "sandbox_starts": {"waiting": int(gauges.get("pyclassroom_sandbox_starts_waiting", 0)),
                           "retried": int(gauges.get("pyclassroom_sandbox_start_retries_total", 0)),
                           "failed": failures},
        "requests": int(count),
        "latency_ms": {f"p{q}": _quantile(buckets, count, q / 100) for q in (50, 95, 99)},
    }


def _quantile(buckets, count, q):
    """Linear interpolation inside the bucket holding the q-th request."""
    if not count:
        return None
    rank, lower, below = q * count, 0.0, 0.0
    for bound in sorted(buckets):
        cumulative = buckets[bound]
        if cumulative >= rank:
            if bound == float("inf"):
                return round(lower * 1000, 1)  # beyond the last bucket: its lower edge
            inside = cumulative - below
            fraction = (rank - below) / inside if inside else 1.0
            return round((lower + (bound - lower) * fraction) * 1000, 1)
        lower, below = bound, cumulative
    return None


def worker_exited(pid):
    """Drop a dead worker's live gauges (called by the parent)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(pid)
