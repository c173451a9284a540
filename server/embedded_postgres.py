"""A private PostgreSQL server under DATA_DIR, for when DATABASE_URL is unset.

It listens only on a Unix socket in a folder that only its owner can enter,
so nothing but this server (and `manage`) can reach it. Every user of the
cluster (the server's parent process, a `manage` command) holds a shared
`flock` on DATA_DIR/postgres/lock; whoever leaves last stops PostgreSQL, so
a `manage` command never stops the database under a running server, and a
server started after a crash adopts the cluster that is still running.

PostgreSQL refuses to run as root; when we are root it runs as the
`postgres` system user that Debian's package creates.
"""
import fcntl
import glob
import hashlib
import logging
import os
import pwd
import shutil
import subprocess

import psutil
import psycopg2

from .traverse import blocked_parent

log = logging.getLogger(__name__)

DB_NAME = "pyclassroom"
DB_USER = "pyclassroom"
SOCKET_NAME = ".s.PGSQL.5432"
UNIX_PATH_MAX = 107


class EmbeddedPostgresError(RuntimeError):
    pass


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _lockfile_pid(path):
    """The pid on the first line of a PostgreSQL lock file, or None."""
    try:
        with open(path) as f:
            return int(f.readline())
    except (FileNotFoundError, ValueError):
        return None


def find_bindir():
    found = shutil.which("pg_ctl")
    if found:
        return os.path.dirname(os.path.realpath(found))
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if candidates:
        return os.path.dirname(candidates[-1])
    raise EmbeddedPostgresError(
        "PostgreSQL is not installed (no pg_ctl found): install it (Debian: apt-get install "
        "postgresql) or set DATABASE_URL to an existing server")


class EmbeddedPostgres:
    def __init__(self, data_dir):
        self.root = os.path.join(os.path.abspath(data_dir), "postgres")
        self.pgdata = os.path.join(self.root, "cluster")
        self.logfile = os.path.join(self.root, "postgres.log")
        self.socket_dir = os.path.join(self.root, "run")
        if len(self.socket_dir) + 1 + len(SOCKET_NAME) > UNIX_PATH_MAX:
            # Unix socket paths are short; fall back to a fixed name per cluster.
            digest = hashlib.sha1(self.root.encode()).hexdigest()[:16]
            self.socket_dir = f"/tmp/pyclassroom-pg-{digest}"
        self.pidfile = os.path.join(self.pgdata, "postmaster.pid")
        self._lock_fd = None
        self._bindir = None
        self._owner = None  # pwd entry PostgreSQL runs as, when we are root

    @property
    def dsn(self):
        return f"postgresql://{DB_USER}@/{DB_NAME}?host={self.socket_dir}"

    def start(self):
        """Start (or adopt) the cluster and return its DSN."""
        os.makedirs(self.root, exist_ok=True)
        self._lock_fd = os.open(os.path.join(self.root, "lock"), os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_SH)
        self._bindir = find_bindir()
        if os.geteuid() == 0:
            self._prepare_for_root()
        os.makedirs(self.socket_dir, mode=0o700, exist_ok=True)
        self._chown(self.socket_dir)
        os.chmod(self.socket_dir, 0o700)
        if not os.path.exists(os.path.join(self.pgdata, "PG_VERSION")):
            self._initdb()
        # One process at a time decides whether to adopt or start, so none
        # removes a pid file another has just written.
        with open(os.path.join(self.root, "start.lock"), "w") as starting:
            fcntl.flock(starting, fcntl.LOCK_EX)
            pid = self.postmaster()
            if pid:
                log.info("adopting embedded PostgreSQL already running in %s (pid %d)", self.pgdata, pid)
            else:
                self._start()
        try:
            self._create_database()
        except psycopg2.Error as e:
            raise EmbeddedPostgresError(f"the embedded PostgreSQL does not answer: {str(e).strip()} "
                                        f"(log: {self.logfile})") from None
        return self.dsn

    def _start(self):
        self._remove_stale_lockfiles()
        log.info("starting embedded PostgreSQL in %s", self.pgdata)
        options = (f"-c listen_addresses='' -c unix_socket_directories='{self.socket_dir}' "
                   "-c max_connections=300 -c shared_buffers=64MB")
        self._run("pg_ctl", "start", "-w", "-t", "60", "-s", "-D", self.pgdata,
                  "-l", self.logfile, "-o", options)

    def restart(self):
        """Restart the running cluster (`pg_ctl restart -m fast`): sessions
        end, the socket goes away for a moment (operators, fault tests)."""
        if not self.postmaster():
            raise EmbeddedPostgresError(f"no embedded PostgreSQL of ours runs in {self.pgdata}")
        self._run("pg_ctl", "restart", "-w", "-t", "60", "-s", "-m", "fast", "-D", self.pgdata,
                  "-l", self.logfile)

    def postmaster(self):
        """The pid of the PostgreSQL serving our data directory, or None
        (once `start` has run: it knows whose the cluster is)."""
        pid = _lockfile_pid(self.pidfile)
        return pid if pid is not None and self._ours(pid) else None

    def _ours(self, pid):
        """Whether `pid` is alive (not a zombie), runs as the cluster's owner,
        runs a `postgres` binary and works in our data directory."""
        owner_uid = self._owner.pw_uid if self._owner else os.geteuid()
        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE or proc.uids().effective != owner_uid:
                return False
            exe, cwd = proc.exe(), proc.cwd()
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            return False
        except psutil.AccessDenied:
            raise EmbeddedPostgresError(
                f"process {pid}, named by a lock file in {self.root}, may not be inspected: stop it, or "
                "remove the lock file if it is not this server's PostgreSQL") from None
        return os.path.basename(exe) in ("postgres", "postmaster") and _same_file(cwd, self.pgdata)

    def _remove_stale_lockfiles(self):
        """PostgreSQL refuses to start while postmaster.pid or its socket's
        lock file names a live process (a zombie included). Called only
        when no PostgreSQL of ours runs: a pid there is a crash's leftover."""
        for path in (self.pidfile, os.path.join(self.socket_dir, SOCKET_NAME + ".lock")):
            pid = _lockfile_pid(path)
            if pid is not None and psutil.pid_exists(pid) and not self._ours(pid):
                log.warning("removing stale %s: its pid %d is not this cluster's PostgreSQL", path, pid)
                os.unlink(path)

    def stop(self):
        """Stop the cluster unless another process still uses it."""
        if self._lock_fd is None:
            return
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("embedded PostgreSQL left running: another process still uses it")
        else:
            # pg_ctl stop signals whatever pid the file names: only ours.
            if self.postmaster():
                self._run("pg_ctl", "stop", "-w", "-t", "60", "-s", "-m", "fast", "-D", self.pgdata,
                          check=False)
            else:
                log.warning("embedded PostgreSQL in %s is not running; nothing to stop", self.pgdata)
        finally:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _prepare_for_root(self):
        try:
            self._owner = pwd.getpwnam("postgres")
        except KeyError:
            raise EmbeddedPostgresError(
                "PostgreSQL refuses to run as root and there is no 'postgres' user: create one, "
                "run the server as another user, or set DATABASE_URL") from None
        blocked = blocked_parent(os.path.dirname(self.root), self._owner.pw_uid)
        if blocked:
            raise EmbeddedPostgresError(
                f"the 'postgres' user cannot enter {blocked}; choose a DATA_DIR outside it "
                f"or make it traversable (chmod o+x {blocked})")
        self._chown(self.root)
        os.chmod(self.root, 0o700)

    def _chown(self, path):
        if self._owner:
            os.chown(path, self._owner.pw_uid, self._owner.pw_gid)

    def _initdb(self):
        log.info("creating embedded PostgreSQL cluster in %s", self.pgdata)
        if os.path.exists(self.pgdata):  # a half-made cluster from an interrupted initdb
            shutil.rmtree(self.pgdata)
        self._run("initdb", "-D", self.pgdata, "-U", DB_USER, "--auth=trust", "-E", "UTF8",
                  "--locale=C", "-N")
        self._run("sync")

    def _create_database(self):
        conn = psycopg2.connect(dbname="postgres", user=DB_USER, host=self.socket_dir)
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB_NAME,))
                if cur.fetchone() is None:
                    cur.execute(f'CREATE DATABASE "{DB_NAME}"')
        finally:
            conn.close()

    def _run(self, program, *args, check=True):
        exe = program if program == "sync" else os.path.join(self._bindir, program)
        kwargs = {}
        if self._owner:
            kwargs = dict(user=self._owner.pw_uid, group=self._owner.pw_gid, extra_groups=[])
        proc = subprocess.run([exe, *args], capture_output=True, text=True, cwd=self.root,
                              start_new_session=True, **kwargs)
        if check and proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise EmbeddedPostgresError(f"{program} failed: {' '.join(tail)} (log: {self.logfile})")
        return proc
