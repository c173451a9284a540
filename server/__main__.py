"""Entry point: `python -m server`.

Reads the settings, starts the embedded PostgreSQL when DATABASE_URL is
unset, binds the listening socket, then either serves in this process
(TORNADO_PROCESSES=1) or forks N workers that share the socket and
supervises them: a worker that dies is restarted, and SIGTERM/SIGINT shut
them all down gracefully within a bound. Nothing that must not be shared
(IOLoop, threads, database pools) exists before the fork.
"""
import argparse
import logging
import os
import select
import signal
import sys
import time

from tornado.netutil import bind_sockets

from . import config, public_url
from .embedded_postgres import EmbeddedPostgres, EmbeddedPostgresError
from .instance import Instance
from .parent import die_with_parent
from .runs import sandbox
from .runs.sandbox import SandboxError

log = logging.getLogger("server")

# A worker that keeps dying right after its start means a setting or the
# database is wrong: give up instead of forking forever.
CRASH_WINDOW = 10.0
MAX_QUICK_CRASHES = 5
START_TIMEOUT = 120.0


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python -m server", description="PyClassroom server: a browser IDE for Python classes.",
        epilog=config.help_text(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--print-config", action="store_true",
                        help="print the effective settings (secrets masked) and exit")
    parser.add_argument("--settings-markdown", action="store_true",
                        help="print every setting as the Markdown table of docs/settings.md and exit")
    return parser.parse_args(argv)


SERVER_NICE = -15  # above any student program (they run at 10, their groups at 19)


def setup_logging(level):
    logging.basicConfig(level=level, stream=sys.stdout,
                        format="%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s")


def raise_priority():
    """As root, rank the server's CPU share above the sandboxes'. With
    autogroup scheduling each sandbox session is a group of its own; each
    lowers itself, but the kernel rate-limits that when many start at once,
    so root raises its own group instead (workers inherit it). A process in
    no group of its own (started by init without a session, as under some
    CI runners and containers) competes task by task: raise its nice."""
    if os.geteuid() != 0:
        return
    try:
        with open("/proc/self/autogroup") as f:
            in_group = bool(f.read().strip())  # empty: the default group, which has no weight
        if in_group:
            with open("/proc/self/autogroup", "w") as f:
                f.write(str(SERVER_NICE))
            return
    except OSError:
        pass  # no autogroup scheduling on this kernel
    os.setpriority(os.PRIO_PROCESS, 0, SERVER_NICE)


def serving_line(cfg, port, pids):
    host = cfg.HOST if ":" not in cfg.HOST else f"[{cfg.HOST}]"
    if len(pids) == 1 and cfg.process_count == 1:
        mode = f"1 process (pid {pids[0]})"
    else:
        mode = f"{len(pids)} worker processes (pids {', '.join(map(str, pids))})"
    return f"serving http://{host}:{port} with {mode}"


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.settings_markdown:
        print(config.markdown_table(), end="")
        return 0
    try:
        cfg = config.load()
    except config.ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.print_config:
        for name, value in cfg.masked():
            print(f"{name}={value}")
        return 0
    setup_logging(cfg.LOG_LEVEL)
    raise_priority()
    instance = Instance(cfg)
    instance.create()
    pg = None
    try:
        try:
            # Before any fork: every worker inherits the same, complete secret.
            instance.prepare_cookie_secret()
        except OSError as e:
            print(f"error: cannot keep the cookie secret under {cfg.DATA_DIR}/secrets: {e}", file=sys.stderr)
            return 1
        dsn = cfg.DATABASE_URL
        if not dsn:
            pg = EmbeddedPostgres(cfg.DATA_DIR)
            dsn = pg.start()
        os.makedirs(cfg.STORAGE_ROOT, exist_ok=True)
        cfg = cfg.but(SANDBOX=sandbox.resolve(cfg))  # once, before forking: every worker uses the same
        log.info("%s", sandbox.announce(cfg))
        try:
            sockets = bind_sockets(cfg.PORT, cfg.HOST, backlog=1024)
        except OSError as e:
            print(f"error: cannot listen on {cfg.HOST}:{cfg.PORT}: {e.strerror}", file=sys.stderr)
            return 1
        port = sockets[0].getsockname()[1]
        cfg = public_url.resolve(cfg, port)  # before forking: every worker prints the same on slips
        if cfg.process_count == 1:
            return serve_single(cfg, instance, sockets, dsn, port)
        return Supervisor(cfg, instance, sockets, dsn, port).run()
    except (EmbeddedPostgresError, SandboxError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        if pg:
            pg.stop()
        instance.remove()


def serve_single(cfg, instance, sockets, dsn, port):
    from . import worker  # imported after PROMETHEUS_MULTIPROC_DIR is set

    def ready():
        instance.write_workers([os.getpid()])
        print(serving_line(cfg, port, [os.getpid()]) + "\n" + public_url.announce(cfg), flush=True)

    try:
        worker.main(cfg, instance, sockets, dsn, 1, ready)
    except RuntimeError as e:  # the database could not be reached or prepared
        log.error("%s", e)
        return 1
    log.info("stopped")
    return 0


class Supervisor:
    """The parent of N workers: forks them, restarts the ones that die, and
    shuts them all down on SIGTERM/SIGINT."""

    def __init__(self, cfg, instance, sockets, dsn, port):
        self.cfg, self.instance, self.sockets, self.dsn, self.port = cfg, instance, sockets, dsn, port
        self.workers = {}  # pid -> (slot, start time)
        self.ready = set()
        self.quick_crashes = 0
        self.stopping = False

    def run(self):
        self.ready_r, self.ready_w = os.pipe()
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        os.set_blocking(self.wake_r, False)
        signal.set_wakeup_fd(wake_w)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_stop_signal)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake the loop
        for slot in range(self.cfg.process_count):
            self.spawn(slot)
        announced = False
        started = time.monotonic()
        while not self.stopping:
            select.select([self.ready_r, self.wake_r], [], [], 1.0)
            self._drain_pipe(self.wake_r)
            self._read_ready()
            if self._reap() is False:
                self.shutdown()
                return 1
            if not announced and len(self.ready) == self.cfg.process_count:
                announced = True
                print(serving_line(self.cfg, self.port, sorted(self.ready)) + "\n" + public_url.announce(self.cfg),
                      flush=True)
            elif not announced and time.monotonic() - started > START_TIMEOUT:
                log.error("workers did not become ready within %ds", START_TIMEOUT)
                self.shutdown()
                return 1
        self.shutdown()
        return 0

    def spawn(self, slot):
        pid = os.fork()
        if pid == 0:
            self._become_worker()
        self.workers[pid] = (slot, time.monotonic())
        return pid

    def _become_worker(self):
        code = 1
        try:
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
                signal.signal(sig, signal.SIG_DFL)
            os.close(self.ready_r)
            os.close(self.wake_r)
            die_with_parent(self.instance.pid)
            from . import worker
            ready_w = self.ready_w
            worker.main(self.cfg, self.instance, self.sockets, self.dsn, self.cfg.process_count,
                       lambda: os.write(ready_w, f"{os.getpid()}\n".encode()))
            code = 0
        except RuntimeError as e:
            log.error("%s", e)
        except BaseException:
            log.exception("worker %d failed", os.getpid())
        finally:
            os._exit(code)

    def _on_stop_signal(self, signum, frame):
        self.stopping = True

    def _read_ready(self):
        if select.select([self.ready_r], [], [], 0)[0]:
            for word in os.read(self.ready_r, 4096).split():
                self.ready.add(int(word))
            self.instance.write_workers(self.ready & set(self.workers))

    def _reap(self):
        """Collect dead workers and replace them; False when they crash-loop."""
        from . import metrics
        while self.workers:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return True
            slot, born = self.workers.pop(pid)
            self.ready.discard(pid)
            metrics.worker_exited(pid)
            if self.stopping:
                continue
            how = (f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
                   else f"exit code {os.WEXITSTATUS(status)}")
            self.quick_crashes = self.quick_crashes + 1 if time.monotonic() - born < CRASH_WINDOW else 0
            if self.quick_crashes >= MAX_QUICK_CRASHES:
                log.error("workers keep dying right after start (last: %s); giving up", how)
                return False
            new = self.spawn(slot)
            log.warning("worker %d (pid %d) died with %s; restarted as pid %d", slot, pid, how, new)
        return True

    def shutdown(self):
        """Close our copy of the listening socket (so nothing waits in a backlog
        no one serves), ask every worker to drain, then wait, bounded."""
        self.stopping = True
        for sock in self.sockets:
            sock.close()
        log.info("shutting down %d workers", len(self.workers))
        for pid in self.workers:
            _kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.cfg.SHUTDOWN_TIMEOUT + 5
        while self.workers and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.05)
        for pid in list(self.workers):
            log.warning("worker pid %d did not stop in time; killing it", pid)
            _kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            self.workers.pop(pid)
        log.info("stopped")

    @staticmethod
    def _drain_pipe(fd):
        try:
            while os.read(fd, 4096):
                pass
        except BlockingIOError:
            pass


def _kill(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


if __name__ == "__main__":
    sys.exit(main())
