"""Shared fixtures: one real PostgreSQL for the test run (embedded, or the
one DATABASE_URL names), the real server started as a subprocess, and
people to use it.

Most tests meet the server as a class does: `server` (one worker) and
`server2` (two workers) are started once for the whole run and shared; each
test makes people of its own with `people` (unique usernames), so tests
never see each other's users or files. A test that changes settings, or
stops or kills a server, starts its own with `start_server` (a fresh
database and DATA_DIR)."""
import contextlib
import json
import fcntl
import functools
import inspect
import os
import random
import re
import shutil
import subprocess
import tempfile
import types
import uuid
from urllib.parse import urlsplit, urlunsplit

import psycopg2
import pytest

from server.embedded_postgres import EmbeddedPostgres
from server.runs.sandbox.local import build_mpl_cache, mpl_cache
from loadtest.harness import ServerProcess

from tests.helpers import password_hash, sql, wait_for_editing_help
from tests.runs_support import LIMITS as RUN_LIMITS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytest_plugins = ["tests.browser", "tests.oidc_support"]  # fixtures: browser, new_page; oidc_provider
# Editing help's processes warm up for seconds of CPU at every server start:
# servers the tests start are without them unless a test asks (the shared
# `server`, as users meet it, the editor's browser tests and the fuzzing).
os.environ.setdefault("ASSIST_PROCESSES", "0")
# Students' programs at a low CPU weight, not idle (SANDBOX_CPU): the suite's
# browsers and servers keep both CPUs busy, and in the idle group a program
# got next to nothing (a traceback took over 30 s to print in CI). The tests
# of the idle group and of starts under starvation ask for it.
os.environ.setdefault("SANDBOX_CPU", "low")
# Editing help's answers are what its tests check, not how fast they come:
# on the suite's busy machine a completion of numpy waited past the
# 5 s default for a CPU (the pool's own timeout is tested in-process).
EDITING_HELP = {"ASSIST_PROCESSES": "2", "ASSIST_TIMEOUT": "30"}
# Each file process costs about 0.1 s of CPU to start, and the suite starts
# a server a hundred times: two per worker run calls side by side; the
# tests about concurrency ask for more.
os.environ.setdefault("FILE_PROCESSES", "2")
# The servers of this test process run students' programs as uids of their
# own: another test process on the machine (a parallel worker, another
# checkout's suite) has students with the same ids, and a test that looks
# for a student's processes by uid must never find the other's. One base
# for all its servers: servers sharing a DATA_DIR (restarts, two instances)
# must agree on who owns it. pytest-xdist's workers inherit the controller's
# environment, so each adds its own number to the base the controller drew
# (two workers sharing one base counted each other's launchers).
os.environ.setdefault("PYCLASSROOM_TEST_UID_DRAW", str(random.SystemRandom().randrange(2000)))
_worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw-1")[2:]) + 1  # the controller is 0
os.environ["SANDBOX_UID_BASE"] = str((int(os.environ["PYCLASSROOM_TEST_UID_DRAW"]) + _worker) % 2000 * 1_000_000
                                     + 1_000_000)


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


@pytest.fixture(scope="session")
def font_cache(tmp_path_factory):
    """matplotlib's font list for the sandboxes, built once per test process
    the way a server builds it at its first start (build_mpl_cache)."""
    cfg = types.SimpleNamespace(DATA_DIR=str(tmp_path_factory.mktemp("fonts")),
                                SANDBOX_PYTHON=os.environ.get("SANDBOX_PYTHON", "/usr/bin/python3"))
    build_mpl_cache(cfg)
    return mpl_cache(cfg)


@pytest.fixture
def start_server(fresh_db, data_dir, font_cache):
    """start_server(processes=1, **env) -> a running ServerProcess on the
    test's fresh database; every server started is stopped after the test.
    Its DATA_DIR starts with the font list a first start builds (a third of
    a second of CPU each time otherwise); the shared servers build theirs."""
    started = []
    fonts = mpl_cache(types.SimpleNamespace(DATA_DIR=data_dir))
    if os.listdir(font_cache) and not os.path.exists(fonts):
        shutil.copytree(font_cache, fonts)
        os.chmod(os.path.dirname(fonts), 0o755)

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


@pytest.fixture
def start_inprocess(fresh_db, data_dir):
    """start_inprocess(**settings) -> the application in this process over
    scripted sandboxes (tests/inprocess.py), on the test's fresh database."""
    from tests import inprocess  # the whole server: imported by the tests that use it
    with inprocess.started(fresh_db, data_dir) as start:
        yield start


@pytest.fixture
def inprocess_server(start_inprocess):
    """The application in this process with the default settings."""
    return start_inprocess()


@contextlib.contextmanager
def running_server(postgres_url, processes=1, **env):
    """A server of its own (a new database and DATA_DIR), stopped on leaving."""
    folder = tempfile.mkdtemp(prefix="pyclassroom-test-server-")
    os.chmod(folder, 0o755)
    try:
        with new_database(postgres_url) as dsn:
            server = ServerProcess(processes=processes, database_url=dsn, data_dir=folder, env=env)
            server.start()
            try:
                yield server
            finally:
                server.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def module_server(postgres_url):
    """A server of the test module's own, for tests that look at every
    account or the whole users table."""
    with running_server(postgres_url) as server:
        yield server


class SharedServers:
    """Servers started once for the test run, one per set of settings."""

    def __init__(self, postgres_url):
        self.postgres_url = postgres_url
        self.running = {}
        self.cleanups = contextlib.ExitStack()

    def get(self, processes=1, **env):
        key = (processes, tuple(sorted((k, str(v)) for k, v in env.items())))
        if key not in self.running:
            self.running[key] = self.cleanups.enter_context(running_server(self.postgres_url, processes, **env))
        return self.running[key]

    def close(self):
        self.cleanups.close()


@pytest.fixture(scope="session")
def shared_servers(postgres_url):
    servers = SharedServers(postgres_url)
    yield servers
    servers.close()


def _shared(servers, processes=1, **env):
    """A shared server, with what it logs during the test shown if it fails."""
    server = servers.get(processes, **env)
    start = len(server.lines)
    yield server
    print(f"--- server {server.url} ({server.processes} processes) output during the test ---\n"
          + "".join(server.lines[start:]))


@pytest.fixture
def server(shared_servers):
    """The real server (one worker), shared by the tests of the run."""
    yield from _shared(shared_servers, **EDITING_HELP)


@pytest.fixture
def warm_server(server):
    """`server`, once its editing help has warmed up (for the tests that use it)."""
    return wait_for_editing_help(server)


PUBLIC_URL = "http://pyclassroom.school.test:8888"


@pytest.fixture
def public_server(shared_servers):
    """A shared server whose PUBLIC_URL is set (the address password slips print)."""
    yield from _shared(shared_servers, PUBLIC_URL=PUBLIC_URL)


@pytest.fixture
def server2(shared_servers):
    """The real server with two workers, for stories about several workers."""
    yield from _shared(shared_servers, processes=2)


PASSWORD = "a-test-password"


class People:
    """Users of a server made for one test: unique usernames, so that tests
    sharing a server never meet (`people.student("ada").username` is e.g.
    "ada-3f2a9c"; random, since a test module that imports this file gets a
    copy of its own); each comes as a logged-in browser-like client."""

    def __init__(self, server):
        self.server = server

    def make(self, name, role="student", display_name=None, log_in=True, active=True):
        username = f"{name}-{uuid.uuid4().hex[:6]}"
        sql(self.server.env["DATABASE_URL"], "INSERT INTO users (username, display_name, role, password_hash, active) "
            "VALUES (%s, %s, %s, %s, %s)", username, display_name or name.title(), role, password_hash(PASSWORD), active)
        client = self.server.client()
        client.username = username
        if log_in:
            client.login_ok(username, PASSWORD)
        return client

    def student(self, name="student", **kw):
        return self.make(name, "student", **kw)

    def teacher(self, name="teacher", **kw):
        return self.make(name, "teacher", **kw)

    def admin(self, name="admin", **kw):
        return self.make(name, "admin", **kw)


@pytest.fixture
def people(server):
    """People on `server` (People(other_server) for another one)."""
    return People(server)


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
    # One test process at a time (pytest-xdist's workers, or two test runs):
    # two start-docker at once would start two daemons, and the second fails.
    with open(os.path.join(tempfile.gettempdir(), "pyclassroom-test-docker.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for script, timeout in (("start-docker", 120), ("build-sandbox-image", 1800)):
            subprocess.run([os.path.join(ROOT, "scripts", script), image], check=True, timeout=timeout)
    return image


# -- servers for the run tests, per sandbox kind ---------------------------------

def _sandbox_server(request, servers, kind):
    if kind.endswith("docker"):
        request.getfixturevalue("docker_image")
    if kind.startswith("remote"):  # on the worker's child runner, in its local or docker sandbox
        yield from _shared(servers, SANDBOX="remote", RUNNER_SANDBOX=kind.partition("-")[2] or "local",
                           **RUN_LIMITS)
        return
    yield from _shared(servers, SANDBOX=kind, **RUN_LIMITS)


@pytest.fixture(params=["local", "docker", "process"])
def sandbox_server(request, shared_servers):
    """A shared server per sandbox kind, with the run tests' limits."""
    yield from _sandbox_server(request, shared_servers, request.param)


@pytest.fixture(params=["local", "docker", "remote", "remote-docker"])
def isolated_server(request, shared_servers):
    """A shared server whose sandbox promises isolation (remote: on the
    worker's child runner, in the local sandbox there; remote-docker: in
    the docker sandbox there)."""
    yield from _sandbox_server(request, shared_servers, request.param)


@pytest.fixture
def local_server(request, shared_servers):
    yield from _sandbox_server(request, shared_servers, "local")


@pytest.fixture
def two_workers_server(shared_servers):
    """A shared server with two workers and local sandboxes: a student's tabs land on both."""
    yield from _shared(shared_servers, processes=2, SANDBOX="local")


# -- markers, to run a part: `pytest -m "not browser and not docker"` ------------------

KIND_OF_MODULE = {"test_loadtest": "tools", "test_benchmarks": "tools", "test_bench_runs": "tools",
                  "test_loadgen": "tools", "test_efs_bench": "tools",
                  "test_tiers": "tools",
                  "test_deploy_aws": "deploy", "test_deploy_templates": "deploy", "test_rollback_procedure": "deploy"}

# What a test needs, from the fixtures it uses (`item.fixturenames` is the
# whole closure, so a fixture built on `server` counts as `server`) and from
# what its own code or its fixtures' code start. A test that needs none of
# NOT_FAST is marked `fast`: `make test-fast` runs those, and
# tests/test_tiers.py checks the selection from pytest's own report.
SERVER_FIXTURES = {"shared_servers", "start_server", "module_server"}
# Mounting file systems, making cgroups, running programs as students' uids
# (the local sandbox kind: bubblewrap, chown), a process as another user.
ROOT_FIXTURES = {"sandbox", "cgroup2", "small_disk", "small_tmpfs", "own_cpu_group", "bystander"}
FUSE_FIXTURES = {"faultfs"}
# By hand, or through the load test's scripts (simple_load_test.sh, the
# benchmarks of loadtest/, each starting servers of its own).
STARTS_SERVER = re.compile(r"\bServerProcess\(|\brunning_server\(|loadtest\.bench_|[\"']bench_\w+[\"']|\brun_script\(")
STARTS_POSTGRES = re.compile(r"\bEmbeddedPostgres\(")
RUNS_NPM = re.compile(r"\bwhich\(\"npm\"\)")  # npm ci: the network, unless its cache has every package
# A module that skips itself unless it runs as root.
ROOT_MODULE = re.compile(r"^if os\.geteuid\(\) != 0:\n\s+pytest\.skip\(", re.M)
NOT_FAST = ("postgres", "server", "browser", "docker", "fuse", "root", "npm", "tools", "deploy")


@functools.lru_cache(maxsize=None)
def _source(obj):
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return ""


TESTS = os.path.join(ROOT, "tests") + os.sep


def _own_code(item):
    """The source of the test, of the helpers of its module it calls, and of
    the tests folder's fixtures it uses."""
    helpers = [getattr(item.module, name, None) for name in item.function.__code__.co_names]
    funcs = [item.function] + [f for f in helpers if inspect.isfunction(f) and f.__module__ == item.module.__name__]
    funcs += [d.func for defs in item._fixtureinfo.name2fixturedefs.values() for d in defs
              if getattr(d.func, "__code__", None) and d.func.__code__.co_filename.startswith(TESTS)]
    return "\n".join(map(_source, funcs))


def needs(item):
    """The markers of what `item` needs (a set of NOT_FAST's names)."""
    found = set()
    kind = KIND_OF_MODULE.get(item.module.__name__.rsplit(".", 1)[-1])
    if kind:
        found.add(kind)
    fixtures = set(getattr(item, "fixturenames", ()))
    code = _own_code(item)
    if "postgres_url" in fixtures or STARTS_POSTGRES.search(code):
        found.add("postgres")
    if fixtures & SERVER_FIXTURES or STARTS_SERVER.search(code):
        found |= {"server", "postgres"}  # a server keeps everything in PostgreSQL (its own, if no URL)
    if "browser" in fixtures:
        found.add("browser")
    if "docker" in item.nodeid or "docker_image" in fixtures:
        found.add("docker")
    if fixtures & FUSE_FIXTURES:
        found.add("fuse")
    if RUNS_NPM.search(code):
        found.add("npm")
    if (fixtures & ROOT_FIXTURES or ROOT_MODULE.search(_source(item.module))
            or any("root" in m.kwargs.get("reason", "") for m in item.iter_markers("skipif"))):
        found.add("root")
    return found


def pytest_addoption(parser):
    parser.addoption("--tier-report", metavar="PATH",
                     help="write each collected test's tier and the fixtures pytest resolved for it (JSON; test_tiers.py)")


def pytest_collection_modifyitems(config, items):
    """Markers from what a test uses, so that `-m "not browser"` is true:
    Chromium (the `browser` fixture, and `new_page` over it), Docker,
    PostgreSQL, a server process, root, the storage-fault FUSE file system."""
    for item in items:
        found = needs(item)
        for name in sorted(found):
            item.add_marker(name)
        if not found:
            item.add_marker("fast")
    if path := config.getoption("tier_report"):
        with open(path, "w") as f:
            json.dump([{"test": item.nodeid, "fast": item.get_closest_marker("fast") is not None,
                        "fixtures": sorted(getattr(item, "fixturenames", ()))} for item in items], f)


def pytest_configure(config):
    """Under `make test-fast` (FAST_TIER=1) a fixture or a server a fast test
    was not marked for fails the test, naming what it reached for, rather
    than quietly making the fast tier slow."""
    if os.environ.get("FAST_TIER") != "1":
        return
    if config.option.markexpr != "fast":
        raise pytest.UsageError("FAST_TIER=1 is for `-m fast` (make test-fast)")

    def refuse(what):
        def refused(*args, **kwargs):
            pytest.fail(f"a fast-tier test reached for {what}: mark it in tests/conftest.py needs()")
        return refused
    ServerProcess.start = refuse("a server process")
    EmbeddedPostgres.start = refuse("PostgreSQL")


OUT_OF_FAST_TIER = {"postgres_url", "browser", "docker_image"} | SERVER_FIXTURES | ROOT_FIXTURES | FUSE_FIXTURES


def pytest_fixture_setup(fixturedef, request):
    if os.environ.get("FAST_TIER") == "1" and fixturedef.argname in OUT_OF_FAST_TIER:
        pytest.fail(f"a fast-tier test reached for the fixture {fixturedef.argname}: mark it in tests/conftest.py needs()")
