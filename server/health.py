"""Liveness, readiness and metrics endpoints for load balancers and Prometheus."""
from . import db, metrics
from .web import BaseHandler


class HealthzHandler(BaseHandler):
    """The process is alive and its IOLoop answers; no database involved."""

    def get(self):
        self.finish_json({"status": "ok"})


class ReadyzHandler(BaseHandler):
    """Ready for traffic: the database answers and the schema is current."""

    async def get(self):
        try:
            version = await db.schema_version(self.ctx.pool)
        except Exception as e:  # any failure to reach the database means "not ready"
            return self.finish_json({"status": "unavailable", "error": "database_unreachable",
                                     "message": f"The database does not answer: {type(e).__name__}."}, 503)
        if version < db.LATEST:
            return self.finish_json({"status": "unavailable", "error": "migrations_pending",
                                     "message": f"Schema version {version}, expected {db.LATEST}."}, 503)
        if self.ctx.draining:
            return self.finish_json({"status": "unavailable", "error": "shutting_down",
                                     "message": "This worker is shutting down."}, 503)
        self.finish_json({"status": "ready", "schema_version": version})


class MetricsHandler(BaseHandler):
    async def get(self):
        metrics.update_pool(self.ctx.pool)
        body = await self.ctx.files.run(metrics.render)
        self.set_header("Content-Type", metrics.CONTENT_TYPE_LATEST)
        self.finish(body)
