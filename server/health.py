"""Liveness, readiness and metrics endpoints for load balancers and Prometheus."""
import asyncio
import os
import time

from . import db, metrics
from .files import faults
from .web import ApiError, BaseHandler


class HealthzHandler(BaseHandler):
    """The process is alive and its IOLoop answers; no database involved."""

    takes_turn = False

    def get(self):
        self.finish_json({"status": "ok"})


class ReadyzHandler(BaseHandler):
    """Ready for traffic: the database answers, the schema is current and
    the file storage answers and takes changes. Answers within about
    BUDGET seconds either way, so a load balancer's probe never hangs on a
    frozen database or storage (both are probed at once). A storage that
    is failing (I/O errors, no answer) or read-only takes the instance out
    of service: often only this instance's mount is at fault. Slow or full
    storage does not (another instance would do no better) but is named."""

    BUDGET = 1.0
    takes_turn = False
    _probes: set[asyncio.Task[object]] = set()  # probes still running after their answer was given

    async def get(self):
        # The storage's probe runs in a thread of its own (files/faults.py).
        storage = asyncio.ensure_future(self.ctx.files.health.condition_now(self.BUDGET))
        # The probe runs as a task of its own: giving up on it at the budget
        # does not wait for its connection to be reset (asyncpg shields that);
        # it ends by itself within the pool's timeouts.
        probe = asyncio.ensure_future(db.schema_version(self.ctx.pool, timeout=self.BUDGET))
        self._probes.add(probe)
        probe.add_done_callback(self._probes.discard)
        probe.add_done_callback(lambda task: task.cancelled() or task.exception())  # retrieved: no log noise
        try:
            version = await asyncio.wait_for(asyncio.shield(probe), self.BUDGET)
        except (db.DatabaseUnavailable, TimeoutError):
            return self.finish_json({"status": "unavailable", "error": "database_unreachable",
                                     "message": f"The database did not answer within {self.BUDGET:g} s."}, 503)
        if version < db.LATEST:
            return self.finish_json({"status": "unavailable", "error": "migrations_pending",
                                     "message": f"Schema version {version}, expected {db.LATEST}."}, 503)
        if self.ctx.draining:
            return self.finish_json({"status": "unavailable", "error": "shutting_down",
                                     "message": "This worker is shutting down."}, 503)
        storage = await storage
        if storage["state"] in (faults.FAILING, faults.READ_ONLY):
            return self.finish_json({"status": "unavailable", "error": "storage_" + storage["state"],
                                     "message": storage["message"], "storage": storage}, 503)
        self.finish_json({"status": "ready", "schema_version": version, "storage": storage})


class PerfCheckHandler(BaseHandler):
    """`?ms=N`: N milliseconds of CPU work on the IOLoop and nothing else (no
    database, no files), so that a sweep of it shows what the process model
    itself costs. Off unless PERF_CHECK=1: it blocks the loop on purpose."""

    MAX_MS = 1000

    def get(self):
        if not self.ctx.cfg.PERF_CHECK:
            raise ApiError(404, "not_found", "There is nothing at /sys_perf_check (PERF_CHECK is off).")
        try:
            ms = int(self.get_argument("ms", "10"))
        except ValueError:
            ms = -1
        if not 0 <= ms <= self.MAX_MS:
            raise ApiError(400, "bad_ms", f"ms must be a whole number from 0 to {self.MAX_MS}.")
        end = time.thread_time() + ms / 1000
        spins = 0
        while time.thread_time() < end:
            spins += 1
        self.finish_json({"ms": ms, "spins": spins, "pid": os.getpid()})


class MetricsHandler(BaseHandler):
    takes_turn = False

    async def get(self):
        metrics.update_pool(self.ctx.pool)
        body = await self.ctx.file_threads.call(metrics.render)
        self.set_header("Content-Type", metrics.CONTENT_TYPE_LATEST)
        self.finish(body)
