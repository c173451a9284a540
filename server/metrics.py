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
RUNS_ACTIVE = Gauge("pyclassroom_runs_active", "Programs running", multiprocess_mode="livesum")
RUN_QUEUE = Gauge("pyclassroom_run_queue_length", "Runs waiting for a place", multiprocess_mode="livesum")
RUN_QUEUE_WAIT = Histogram("pyclassroom_run_queue_wait_seconds", "Time a run waited for a place",
                           buckets=LATENCY_BUCKETS)
SANDBOX_START = Histogram("pyclassroom_sandbox_start_seconds", "Time to start a sandbox until ready",
                          buckets=LATENCY_BUCKETS)
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


def worker_exited(pid):
    """Drop a dead worker's live gauges (called by the parent)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(pid)
