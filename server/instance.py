"""Files of one running server instance under DATA_DIR.

Each instance (one `python -m server`, with all its workers) gets
DATA_DIR/run/<pid of the instance's first process>/ for the Prometheus
multiprocess files and the list of live worker pids. Folders of instances
that are no longer running are removed at start-up. The cookie secret,
when not given, is generated once into DATA_DIR/secrets/ and kept.
"""
import json
import os
import secrets
import shutil
import time


class Instance:
    def __init__(self, cfg):
        self.cfg = cfg
        self.pid = os.getpid()
        self.started_at = time.time()
        self.run_dir = os.path.join(cfg.DATA_DIR, "run", str(self.pid))
        self.metrics_dir = os.path.join(self.run_dir, "metrics")
        self.workers_file = os.path.join(self.run_dir, "workers.json")

    def create(self):
        os.makedirs(self.cfg.DATA_DIR, exist_ok=True)
        remove_stale_runs(os.path.dirname(self.run_dir))
        os.makedirs(self.metrics_dir, exist_ok=True)
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = self.metrics_dir

    def remove(self):
        shutil.rmtree(self.run_dir, ignore_errors=True)

    def write_workers(self, pids):
        tmp = self.workers_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(sorted(pids), f)
        os.replace(tmp, self.workers_file)

    def read_workers(self):
        try:
            with open(self.workers_file) as f:
                return json.load(f)
        except (OSError, ValueError):
            return [os.getpid()]

    def cookie_secret(self):
        if self.cfg.COOKIE_SECRET:
            return self.cfg.COOKIE_SECRET
        path = os.path.join(self.cfg.DATA_DIR, "secrets", "cookie_secret")
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            with open(path) as f:
                return f.read().strip()
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(48))
            f.flush()
            os.fsync(f.fileno())
        with open(path) as f:
            return f.read().strip()


def remove_stale_runs(parent):
    if not os.path.isdir(parent):
        return
    for name in os.listdir(parent):
        if name.isdigit() and not _alive(int(name)):
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
