"""POST /api/runners/heartbeat: a runner says it is alive, where it listens
and how busy it is (registry.py); a fleet member's first one enrolls it and
is answered with its own key (runs/sandbox/tickets.py). No session and no
cookie: the heartbeat's signature is its only credential."""
import logging

from ..runs.sandbox.tickets import Refused, read_heartbeat, runner_key
from ..web import ApiError, BaseHandler

log = logging.getLogger(__name__)


class HeartbeatHandler(BaseHandler):
    max_body = 4096

    def check_xsrf_cookie(self) -> None:
        pass  # a runner has no cookie to forge a request with; the signature is checked instead

    async def post(self) -> None:
        cfg = self.ctx.cfg
        if cfg.SANDBOX != "remote" or not cfg.RUNNER_SECRET:
            raise ApiError(404, "not_found", "This server takes no runners (it needs SANDBOX=remote and "
                                             "RUNNER_SECRET).")
        try:
            fleets = {cfg.RUNNER_FLEET: bytes.fromhex(cfg.RUNNER_FLEET_KEY)} if cfg.RUNNER_FLEET_KEY else {}
            fields = read_heartbeat(cfg.RUNNER_SECRET, self.json_body().get("heartbeat"), fleets=fleets)
        except Refused as e:
            log.warning("refused a runner's heartbeat from %s: %s", self.request.remote_ip, e)
            raise ApiError(403, "refused", "This heartbeat is not signed by the runner it names, or is "
                                           "too old.") from None
        if fields["fleet"] is not None:
            if not await self.ctx.registry.enroll(fields):
                log.warning("refused to enroll runner %s from %s: that name is enrolled already",
                            fields["runner"], self.request.remote_ip)
                raise ApiError(409, "enrolled", "A runner of this name enrolled already.")
            log.info("runner %s of fleet %s enrolled, at %s", fields["runner"], fields["fleet"], fields["address"])
            return self.finish_json({"ok": True, "key": runner_key(cfg.RUNNER_SECRET, str(fields["runner"])).hex()})
        if not await self.ctx.registry.record(fields):
            log.warning("refused runner %s's heartbeat from %s: not later than its last (a replay?)",
                        fields["runner"], self.request.remote_ip)
            raise ApiError(409, "replayed", "This heartbeat is not later than the runner's last one.")
        self.finish_json({"ok": True})
