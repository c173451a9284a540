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

import psycopg2

from .traverse import blocked_parent

log = logging.getLogger(__name__)

DB_NAME = "pyclassroom"
DB_USER = "pyclassroom"
SOCKET_NAME = ".s.PGSQL.5432"
UNIX_PATH_MAX = 107


class EmbeddedPostgresError(RuntimeError):
    pass


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
        if self._run("pg_ctl", "status", "-D", self.pgdata, check=False).returncode != 0:
            log.info("starting embedded PostgreSQL in %s", self.pgdata)
            options = (f"-c listen_addresses='' -c unix_socket_directories='{self.socket_dir}' "
                       "-c max_connections=300 -c shared_buffers=64MB")
            self._run("pg_ctl", "start", "-w", "-t", "60", "-s", "-D", self.pgdata,
                      "-l", self.logfile, "-o", options)
        else:
            log.info("adopting embedded PostgreSQL already running in %s", self.pgdata)
        self._create_database()
        return self.dsn

    def stop(self):
        """Stop the cluster unless another process still uses it."""
        if self._lock_fd is None:
            return
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("embedded PostgreSQL left running: another process still uses it")
        else:
            self._run("pg_ctl", "stop", "-w", "-t", "60", "-s", "-m", "fast", "-D", self.pgdata,
                      check=False)
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
