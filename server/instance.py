"""Files of one running server instance under DATA_DIR.

Each instance (one `python -m server`, with all its workers) gets
DATA_DIR/run/<pid of the instance's first process>/ for the Prometheus
multiprocess files and the list of live worker pids. Folders of instances
that are no longer running are removed at start-up. The cookie secret,
when not given, is generated once into DATA_DIR/secrets/ and kept: by the
first process, before any worker is forked, so every worker inherits the
same one and none ever reads a file another is still writing.
"""
import contextlib
import json
import logging
import os
import secrets
import shutil
import tempfile
import time

log = logging.getLogger(__name__)

MIN_SECRET = 32  # characters, as config.COOKIE_SECRET requires


class Instance:
    def __init__(self, cfg):
        self.cfg = cfg
        self.pid = os.getpid()
        self.started_at = time.time()
        self.run_dir = os.path.join(cfg.DATA_DIR, "run", str(self.pid))
        self.metrics_dir = os.path.join(self.run_dir, "metrics")
        self.workers_file = os.path.join(self.run_dir, "workers.json")
        self._cookie_secret = None  # prepare_cookie_secret, in the first process

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

    def prepare_cookie_secret(self):
        """COOKIE_SECRET, or the one kept in DATA_DIR/secrets/ (made now if
        there is none). Called once, before the fork: workers inherit it."""
        secret = self.cfg.COOKIE_SECRET or _kept_secret(os.path.join(self.cfg.DATA_DIR, "secrets"))
        self._cookie_secret = secret
        return secret

    def cookie_secret(self):
        """The secret prepared before the fork. A worker must not sign
        cookies with an empty or short one (every login would be a 500):
        it refuses to start instead."""
        secret = self._cookie_secret
        if not secret or len(secret) < MIN_SECRET:
            raise RuntimeError(f"worker {os.getpid()}: the cookie secret is missing or shorter than "
                               f"{MIN_SECRET} characters; it must be prepared before the workers start")
        return secret


def _kept_secret(folder):
    """The secret in `folder`/cookie_secret; a new one when there is none.
    A file too short to be a secret (left by an older release stopped while
    writing it: nothing could be signed with it) is replaced."""
    path = os.path.join(folder, "cookie_secret")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    try:
        with open(path) as f:
            kept = f.read().strip()
    except FileNotFoundError:
        return _publish(path, secrets.token_urlsafe(48), replace=False)
    if len(kept) >= MIN_SECRET:
        return kept
    log.warning("%s holds no usable secret (%d characters); writing a new one", path, len(kept))
    return _publish(path, secrets.token_urlsafe(48), replace=True)


def _publish(path, secret, replace):
    """Write `secret` to a temp file (0600) in the same folder, fsync it,
    then move it into place and fsync the folder: a reader finds no file or
    the whole secret, even after a crash. Unless `replace`, a secret that
    another instance published first wins (a hard link never overwrites),
    and that one is returned."""
    folder = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".cookie_secret-", dir=folder)  # mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secret + "\n")
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                with open(path) as f:
                    secret = f.read().strip()
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return secret


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
