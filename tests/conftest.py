"""Shared fixtures: one real PostgreSQL for the test run (embedded, or the
one DATABASE_URL names), a fresh database per test that needs one, and the
real server started as a subprocess."""
import contextlib
import os
import shutil
import subprocess
import tempfile
import uuid
from urllib.parse import urlsplit, urlunsplit

import psycopg2
import pytest

from server.embedded_postgres import EmbeddedPostgres
from loadtest.harness import ServerProcess

from tests.runs_support import LIMITS as RUN_LIMITS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def with_database(dsn, name):
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + name))


@pytest.fixture(scope="session")
def postgres_url():
    """DSN of the PostgreSQL server the tests use."""
    if os.environ.get("DATABASE_URL"):
        yield os.environ["DATABASE_URL"]
        return
    base = tempfile.mkdtemp(prefix="pyclassroom-test-pg-")
    os.chmod(base, 0o755)  # PostgreSQL runs as 'postgres' when the tests run as root
    pg = EmbeddedPostgres(base)
    dsn = pg.start()
    yield dsn
    pg.stop()
    shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def new_database(postgres_url):
    """DSN of a new, empty database on the tests' PostgreSQL, dropped on leaving."""
    name = "t_" + uuid.uuid4().hex[:12]
    admin = psycopg2.connect(postgres_url)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(postgres_url, name)
    finally:
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture
def fresh_db(postgres_url):
    """DSN of a new, empty database, dropped after the test."""
    with new_database(postgres_url) as dsn:
        yield dsn


@pytest.fixture
def data_dir():
    """A DATA_DIR others may walk into, as the sandboxes' uids must
    (pytest's own tmp_path is closed to them)."""
    d = tempfile.mkdtemp(prefix="pyclassroom-test-data-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def start_server(fresh_db, data_dir):
    """start_server(processes=1, **env) -> a running ServerProcess on the
    test's fresh database; every server started is stopped after the test."""
    started = []

    def start(processes=1, database_url=fresh_db, data_dir=data_dir, **env):
        server = ServerProcess(processes=processes, database_url=database_url, data_dir=data_dir, env=env)
        started.append(server)
        server.start()
        return server

    yield start
    for server in started:
        server.stop()
        # pytest shows this only for a failing test: the server's side of the story.
        print(f"--- server {server.url} ({server.processes} processes) output ---\n{server.output()}")


@pytest.fixture(params=[1, 2], ids=["1proc", "2proc"])
def server(request, start_server):
    """The real server, once with TORNADO_PROCESSES=1 and once with 2."""
    return start_server(processes=request.param)


@pytest.fixture
def nginx_prefix():
    """A prefix folder for nginx's pid, logs and temporary files."""
    # Not under pytest's tmp_path: run as root, nginx's workers (nobody) must be
    # able to reach the prefix to write request bodies into client_body_temp.
    path = tempfile.mkdtemp(prefix="pyclassroom-nginx-")
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def docker_image():
    """A running Docker engine with the sandbox image (scripts/start-docker,
    scripts/build-sandbox-image: minutes the first time, then cached)."""
    if os.geteuid() != 0 or not shutil.which("dockerd"):
        pytest.skip("the docker sandbox needs root and docker.io (scripts/install-system-deps)")
    image = "pyclassroom-sandbox:latest"
    for script, timeout in (("start-docker", 120), ("build-sandbox-image", 1800)):
        subprocess.run([os.path.join(ROOT, "scripts", script), image], check=True, timeout=timeout)
    return image


# -- servers for the run tests, per sandbox kind ---------------------------------

def server_for(request, start_server, kind, **env):
    if kind == "docker":
        request.getfixturevalue("docker_image")
    return start_server(SANDBOX=kind, **dict(RUN_LIMITS, **env))


@pytest.fixture(params=["local", "docker", "process"])
def sandbox_server(request, start_server):
    return server_for(request, start_server, request.param)


@pytest.fixture(params=["local", "docker"])
def isolated_server(request, start_server):
    """A server whose sandbox promises isolation."""
    return server_for(request, start_server, request.param)


@pytest.fixture
def local_server(start_server):
    return start_server(SANDBOX="local", **RUN_LIMITS)
