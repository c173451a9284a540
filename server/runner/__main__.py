"""`python -m server.runner`: a runner, which starts sandboxes for the web
tier (service.py) and holds nothing else.

Its settings, from the environment:

    RUNNER_ID      its name, as the web tier's RUNNERS gives it (a-z, 0-9, -)
    RUNNER_KEY     its key: `python -m server.runner --key ID` prints it from RUNNER_SECRET
    RUNNER_FLEET, RUNNER_FLEET_KEY  instead of those two, for runners an autoscaler starts alike:
                   it names itself FLEET-<random> and enrolls with the fleet's key (the web
                   tier's RUNNER_FLEET_KEY) at RUNNER_SERVER, which answers with its own key
    RUNNER_HOST    the address to listen on (127.0.0.1)
    RUNNER_PORT    the port (0: any free one; the serving line says which)
    RUNNER_PARENT  (a server's child runner) the pid it stops with
    RUNNER_CAPACITY  sandboxes it holds at once at most, ready or running: each student with an IDE
                   open holds one (default: 50 per CPU; an idle one is a waiting interpreter)
    RUNNER_SERVER  the web tier's address (http://host:port): register there with a heartbeat a
                   second, for a server whose runners come and go (no RUNNERS needed)
    RUNNER_ADDRESS the address the web tier reaches it at (ws://host:port; default: RUNNER_HOST,
                   or with 0.0.0.0 the address its packets to RUNNER_SERVER leave from, and the port)

and the server's own sandbox settings (SANDBOX, SANDBOX_PYTHON, RUN_*,
SANDBOX_UID_BASE, DATA_DIR for its font cache and its sandboxes' homes, in
DATA_DIR/homes). It refuses to start with COOKIE_SECRET, DATABASE_URL,
RUNNER_SECRET or STORAGE_ROOT in its environment: a runner that holds
them would hand them to the first sandbox escape.
"""
import argparse
import asyncio
import logging
import os
import re
import secrets
import signal
import socket
import sys
from urllib.parse import urlsplit

from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from .. import config
from ..runs import sandbox
from ..runs.sandbox import SandboxError
from ..config import RUNNER_ID
from ..parent import die_with_parent
from ..runs.sandbox.tickets import runner_key
from .service import Runner

log = logging.getLogger("server.runner")
FORBIDDEN = ("COOKIE_SECRET", "DATABASE_URL", "RUNNER_SECRET", "ADMIN_PASSWORD", "STORAGE_ROOT", "AWS_ACCESS_KEY_ID",
             "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server.runner", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--key", metavar="ID", help="print runner ID's key (from RUNNER_SECRET) and exit")
    args = parser.parse_args(argv)
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.key:
        secret = os.environ.get("RUNNER_SECRET", "")
        if len(secret) < 32:
            print("Set RUNNER_SECRET (at least 32 characters, the web tier's) to make a runner's key.",
                  file=sys.stderr)
            return 2
        print(runner_key(secret, args.key).hex())
        return 0
    if os.environ.get("RUNNER_PARENT", "").isdigit():
        die_with_parent(int(os.environ["RUNNER_PARENT"]))
    held = [name for name in FORBIDDEN if os.environ.get(name)]
    if held:
        print(f"A runner must not hold {', '.join(held)}: unset them in its environment. It needs only "
              "RUNNER_ID, RUNNER_KEY, DATA_DIR and the sandbox settings.", file=sys.stderr)
        return 2
    fleet = os.environ.get("RUNNER_FLEET", "")
    if fleet:  # a fleet member names itself, and is given its own key as it enrolls (tickets.py)
        runner_id, key_hex = f"{fleet}-{secrets.token_hex(5)}", os.environ.get("RUNNER_FLEET_KEY", "")
    else:
        runner_id, key_hex = os.environ.get("RUNNER_ID", ""), os.environ.get("RUNNER_KEY", "")
    try:
        key = bytes.fromhex(key_hex)
    except ValueError:
        key = b""
    if not RUNNER_ID.fullmatch(runner_id) or len(runner_id) > 40 or len(key) != 32 \
            or fleet and not os.environ.get("RUNNER_SERVER"):
        print("Set RUNNER_ID (a-z, 0-9 and -) and RUNNER_KEY (64 hex digits, from `python -m server.runner --key "
              "ID` where RUNNER_SECRET is set); or, for one of a fleet, RUNNER_FLEET (a-z, 0-9 and -, up to 29), "
              "RUNNER_FLEET_KEY (the web tier's) and RUNNER_SERVER.", file=sys.stderr)
        return 2
    try:
        cfg = config.load(os.environ)
        # Its sandboxes' homes are its own (service.py); the storage is the web tier's.
        cfg = cfg.but(STORAGE_ROOT=os.path.join(cfg.DATA_DIR, "homes"))
        os.makedirs(cfg.STORAGE_ROOT, mode=0o711, exist_ok=True)
        cfg = cfg.but(SANDBOX=sandbox.resolve(cfg))
    except (config.ConfigError, SandboxError, OSError) as e:
        print(f"The runner cannot start: {e}", file=sys.stderr)
        return 2
    if cfg.SANDBOX not in ("local", "docker"):
        print(f"The runner cannot start: its sandboxes must be local (bubblewrap) or docker, not {cfg.SANDBOX} "
              "(which isolates nothing). Install bubblewrap, or start Docker with the sandbox image.",
              file=sys.stderr)
        return 2
    server = os.environ.get("RUNNER_SERVER", "").rstrip("/")
    capacity_text = os.environ.get("RUNNER_CAPACITY", "") or str(50 * (os.cpu_count() or 1))
    if server and not re.match(r"^https?://[^/\s]+$", server) or not capacity_text.isdigit() \
            or not 1 <= int(capacity_text) <= 10000:
        print("Set RUNNER_SERVER to the web tier's http(s)://host:port and RUNNER_CAPACITY to a number of "
              "sandboxes (1-10000).", file=sys.stderr)
        return 2
    return asyncio.run(serve(cfg, runner_id, key, int(capacity_text), server, fleet or None))


async def serve(cfg: config.Config, runner_id: str, key: bytes, capacity: int, server: str,
                fleet: str | None) -> int:
    kind = sandbox.create(cfg)
    runner = Runner(cfg, kind, runner_id, key, capacity, fleet)
    await asyncio.get_running_loop().run_in_executor(None, runner.remove_leftovers)
    sockets = bind_sockets(int(os.environ.get("RUNNER_PORT", "0")), os.environ.get("RUNNER_HOST", "127.0.0.1"))
    http = HTTPServer(runner.app())
    http.add_sockets(sockets)
    host, port = sockets[0].getsockname()[:2]
    print(f"runner {runner_id} serving ws://{host}:{port} ({sandbox.describe(kind.name, kind.defences())})",
          flush=True)
    forgetting, beating = asyncio.ensure_future(runner.forgets()), None
    if server:
        address = os.environ.get("RUNNER_ADDRESS") or f"ws://{reachable_host(host, server)}:{port}"
        beating = asyncio.ensure_future(runner.heartbeats(server, address))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    if beating is not None:
        beating.cancel()
    http.stop()
    for socket in list(runner.sandboxes):
        socket.close(1001, "the runner stops")
    await asyncio.sleep(0.1)
    forgetting.cancel()
    await runner.forget(0)
    kind.close()
    return 0


def reachable_host(host: str, server: str) -> str:
    """The address the web tier at `server` reaches this runner at, when it
    listens on all of them (a task's own, given by its platform): the one
    its packets to the web tier leave from (a UDP connect sends nothing)."""
    if host not in ("0.0.0.0", "::"):
        return host
    parts = urlsplit(server)
    with socket.socket(socket.AF_INET6 if host == "::" else socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((parts.hostname or "", parts.port or 80))
        return str(probe.getsockname()[0])


if __name__ == "__main__":
    sys.exit(main())
