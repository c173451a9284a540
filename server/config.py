"""Every setting of the server: its environment variable, type, default,
allowed values and a one-line help.

This is the only module that reads the environment for settings. A bad value
stops start-up with one line naming the variable, the value and what is
allowed (`ConfigError`), so that an operator never runs a half-configured
server.
"""
import dataclasses
import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Generic, Mapping, TypeVar
from urllib.parse import urlsplit

from . import public_url
from .signin import issuers

T = TypeVar("T")


class ConfigError(ValueError):
    """A setting has a value the server cannot use."""


@dataclass(frozen=True)
class Parser(Generic[T]):
    """Text of the environment to a setting's value; ValueError says what is allowed."""
    convert: Callable[[str], T]
    allowed: str  # for --help and docs/settings.md

    def __call__(self, text: str) -> T:
        return self.convert(text)


def _allowing(allowed: str) -> Callable[[Callable[[str], T]], Parser[T]]:
    def wrap(convert: Callable[[str], T]) -> Parser[T]:
        return Parser(convert, allowed)
    return wrap


@dataclass(frozen=True)
class Setting:
    name: str
    parse: Parser[Any]
    default: str  # as it would be written in the environment
    help: str
    secret: bool = False

    def shown(self, value: Any) -> Any:
        """`value` as it may be printed: secrets masked (a URL keeps all but its password)."""
        if not self.secret or not value:
            return value
        if self.name == "DATABASE_URL":
            return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1********@", value)
        return "********"


def _int(lo: int, hi: int, note: str = "") -> Parser[int]:
    @_allowing(f"{lo}..{hi}{note}")
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            value = None
        if value is None or not lo <= value <= hi:
            raise ValueError(f"expected a whole number from {lo} to {hi}{note}")
        return value
    return parse


def _choice(*options: str) -> Parser[str]:
    """One of `options`, in any letter case, returned as written there."""
    @_allowing("|".join(options))
    def parse(text: str) -> str:
        by_key = {o.lower(): o for o in options}
        value = by_key.get(text.strip().lower())
        if value is None:
            raise ValueError("expected one of " + ", ".join(options))
        return value
    return parse


@_allowing("0|1")
def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("expected 1/0, true/false, yes/no or on/off")



@_allowing("text")
def _text(text: str) -> str:
    return text



@_allowing("path")
def _path(text: str) -> str:
    if not text.strip():
        raise ValueError("expected a folder path")
    return os.path.abspath(os.path.expanduser(text.strip()))



@_allowing("path or empty")
def _optional_path(text: str) -> str:
    return _path(text) if text.strip() else ""



@_allowing("host")
def _host(text: str) -> str:
    value = text.strip()
    if not re.fullmatch(r"[A-Za-z0-9.:\-\[\]]+", value):
        raise ValueError("expected a host name or IP address such as 0.0.0.0 or 127.0.0.1")
    return value



@_allowing("postgresql://…")
def _database_url(text: str) -> str:
    value = text.strip()
    if value and not re.match(r"^postgres(ql)?://", value):
        raise ValueError("expected empty (embedded PostgreSQL) or postgresql://user:password@host:port/dbname")
    return value



@_allowing("32+ characters")
def _secret(text: str) -> str:
    if text and len(text) < 32:
        raise ValueError("expected at least 32 characters (or unset to generate one)")
    return text


@_allowing("32+ characters, or empty")
def _key(text: str) -> str:
    if text and len(text) < 32:
        raise ValueError("expected at least 32 characters")
    return text


RUNNER_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")  # a runner's name: in logs, tickets, its key


@_allowing("a-z, 0-9 and -, up to 29 characters, or empty")
def _fleet(text: str) -> str:
    if text and (not RUNNER_ID.fullmatch(text) or len(text) > 29):
        raise ValueError("expected a-z, 0-9 and -, up to 29 characters")
    return text


@_allowing("letters, digits and . - _ / # : (not AWS/...), or empty")
def _namespace(text: str) -> str:
    if text and (not re.fullmatch(r"[A-Za-z0-9.\-_/#:]{1,255}", text) or text.startswith("AWS/")):
        raise ValueError("expected letters, digits and . - _ / # : up to 255, not starting with AWS/")
    return text


@_allowing("64 hex digits, or empty")
def _hex_key(text: str) -> str:
    if text and not re.fullmatch(r"[0-9a-f]{64}", text):
        raise ValueError("expected 64 hex digits (openssl rand -hex 32)")
    return text


@_allowing("id=ws://host:port ..., or empty")
def _runners(text: str) -> tuple[tuple[str, str], ...]:
    runners: list[tuple[str, str]] = []
    for item in text.split():
        runner, _, url = item.partition("=")
        parts = urlsplit(url)
        if not RUNNER_ID.fullmatch(runner) or parts.scheme not in ("ws", "wss") \
                or not parts.hostname or parts.path not in ("", "/"):
            raise ValueError("expected id=ws://host:port for each runner (id: a-z, 0-9 and -), "
                             "separated by spaces")
        if any(runner == seen for seen, _ in runners):
            raise ValueError(f"expected each runner named once ({runner} is named twice)")
        runners.append((runner, f"{parts.scheme}://{parts.netloc}"))
    return tuple(runners)


HOUR = 3600
SETTINGS = [
    Setting("HOST", _host, "0.0.0.0", "address to listen on"),
    Setting("PORT", _int(0, 65535, ", 0 = any free port"), "8888", "TCP port to listen on"),
    Setting("PUBLIC_URL", Parser(public_url.parse, "http(s)://host[:port][/path] or empty"), "",
            "the address students type to reach the server, printed on password slips (e.g. "
            "http://10.0.0.5:8888 or https://py.school.org); empty guesses this computer's network address "
            "and PORT, and says so at start-up"),
    Setting("TORNADO_PROCESSES", _int(0, 256, ", 0 = one per CPU"), "1",
            "worker processes sharing the listening socket"),
    Setting("DATABASE_URL", _database_url, "",
            "PostgreSQL to use; empty starts a private one under DATA_DIR", secret=True),
    Setting("DATA_DIR", _path, "data", "folder for the embedded database, secrets and run-time files"),
    Setting("STORAGE_ROOT", _optional_path, "", "folder holding users' files (an EFS mount in production); "
            "empty means DATA_DIR/storage"),
    Setting("COOKIE_SECRET", _secret, "", "key that signs cookies; empty generates one in DATA_DIR "
            "(set it when several instances serve one class)", secret=True),
    Setting("DB_POOL_MAX", _int(1, 1000), "20", "database connections of all workers together"),
    Setting("DB_ACQUIRE_TIMEOUT", _int(1, 120), "3",
            "seconds a request waits for a free database connection before it gets 503"),
    Setting("DB_QUERY_TIMEOUT", _int(1, 600), "5",
            "seconds a request's database statement may take before it gets 503 (a hung database)"),
    Setting("LOG_LEVEL", _choice("DEBUG", "INFO", "WARNING", "ERROR"), "INFO", "logging threshold"),
    Setting("ADMIN_PASSWORD", _text, "", "password of the first admin account; empty prints a random one",
            secret=True),
    Setting("DEMO", _bool, "0", "also create a demo teacher and students on an empty database"),
    Setting("SESSION_TTL", _int(5, 30 * 24 * HOUR), str(8 * HOUR),
            "seconds a session lives without being used (renewed while in use)"),
    Setting("SESSION_CACHE_SECONDS", _int(0, 60, ", 0 = ask the database every time"), "5",
            "seconds a worker answers a session from memory before asking the database again (a "
            "logout, deactivation or password reset still ends it everywhere at once)"),
    Setting("REQUESTS_AT_ONCE", _int(1, 10000), "64",
            "requests one worker works on at once; more wait their turn in arrival order"),
    Setting("REQUEST_QUEUE", _int(0, 100000), "2000",
            "requests that may wait for their turn per worker; beyond, 503 with Retry-After"),
    Setting("TRUST_PROXY", _bool, "0", "behind a load balancer or nginx: take the client's address and "
            "scheme from the last X-Forwarded-For/-Proto entry"),
    Setting("MAX_BODY_BYTES", _int(1024, 64 << 20), str(1 << 20), "largest JSON request body accepted"),
    Setting("PASSWORD_SIGN_IN", _bool, "1",
            "the sign-in page's username and password form (0: only the school accounts of OIDC_ISSUERS; "
            "`python -m server.manage` still works)"),
    Setting("OIDC_ISSUERS", Parser(issuers.parse, "JSON list, or empty"), "",
            "school accounts to sign in with (OpenID Connect: Google, Microsoft, Keycloak ...), each with its "
            "name, issuer address, client id and secret, policy and allowed domains (docs/operators.md)",
            secret=True),
    Setting("OIDC_TIMEOUT", _int(1, 60), "5",
            "seconds a school account's provider may take to answer before the person is told it is not "
            "answering (the password form still works)"),
    Setting("LOGIN_FAILURES_PER_USER", _int(1, 1000), "5",
            "failed logins in a row one username gets before each further attempt waits twice as long "
            "as the last (2, 4, 8 ... s, at most LOGIN_THROTTLE_WINDOW)"),
    Setting("LOGIN_FAILURES_PER_ADDRESS", _int(1, 100000), "200",
            "distinct real accounts one client address may fail to log in to within the window before "
            "it may try no new names without a device cookie (a class of 60 behind one school address, "
            "typos and all, stays far below; made-up names never count)"),
    Setting("LOGIN_THROTTLE_WINDOW", _int(1, 24 * HOUR), "300",
            "seconds after which failed logins are forgotten; also the longest back-off"),
    Setting("HASH_THREADS", _int(0, 64, ", 0 = one per CPU"), "0",
            "password-hashing threads per worker (each hash uses 19 MiB)"),
    Setting("FILE_PROCESSES", _int(1, 128), "8",
            "file processes per worker, each making one file call at a time (on EFS each call waits "
            "milliseconds: raise it so that more run at once)"),
    Setting("FILE_DEADLINE", _int(1, 120), "5",
            "seconds a file call may take before the student is told the file server is not answering "
            "(503; a hung file process is replaced)"),
    Setting("FILE_THREADS", _int(1, 256), "8",
            "file threads per worker, for downloads, zips and pushes (a file read on in blocks)"),
    Setting("MAX_FILE_BYTES", _int(1024, 1 << 30), str(10 << 20), "largest file a user may save or upload"),
    Setting("QUOTA_BYTES", _int(1024, 1 << 40), str(200 << 20), "bytes of files one user's home may hold"),
    Setting("QUOTA_FILES", _int(1, 10 ** 7), "5000", "files and folders one user's home may hold"),
    Setting("REPLAY_KEEP_BYTES", _int(0, 1 << 40), str(20 << 20),
            "bytes of edits kept per student for replay, outside exams (compressed; an hour of typing takes "
            "tens of kilobytes); the oldest go first, and an exam's are kept with the exam"),
    Setting("HISTORY_VERSIONS", _int(1, 1000), "100",
            "earlier versions kept per file at most (thinned as they age: README, History)"),
    Setting("PERF_CHECK", _bool, "0",
            "serve /sys_perf_check?ms=N, a fixed amount of CPU work, to measure the process model"),
    Setting("FS_DELAY_MS", _int(0, 10000), "0",
            "for rehearsals and tests only: extra milliseconds each file save and read waits, "
            "as on a slow network file system"),
    Setting("SANDBOX", _choice("auto", "local", "docker", "process", "remote"), "auto",
            "where student code runs: local (bubblewrap), docker, process (no isolation: development "
            "only), remote (on the runners of RUNNERS); auto picks the best that works here"),
    Setting("RUNNER_SANDBOX", _choice("auto", "local", "docker"), "auto",
            "with SANDBOX=remote and no RUNNERS, the sandbox each worker's child runner starts programs in; "
            "auto picks the best that works here"),
    Setting("RUNNERS", _runners, "",
            "with SANDBOX=remote, runners (`python -m server.runner`) always asked for sandboxes: "
            "id=ws://host:port, separated by spaces; others may register with a heartbeat (RUNNER_SECRET set); "
            "with neither, each worker starts one as its child"),
    Setting("RUNNER_SECRET", _key, "", "with SANDBOX=remote, the key each runner's own is made from "
            "(`python -m server.runner --key ID`), which also lets runners register; the runners never hold it",
            secret=True),
    Setting("CLOUDWATCH_NAMESPACE", _namespace, "", "with SANDBOX=remote, the CloudWatch namespace each worker puts "
            "RunnerDemandPercent into every minute, for the runners' autoscaling (boto3, the task's role); "
            "empty: none"),
    Setting("RUNNER_FLEET", _fleet, "", "with SANDBOX=remote, the fleet whose runners may enroll (runners an "
            "autoscaler starts alike, with the same RUNNER_FLEET and RUNNER_FLEET_KEY): each is given a key of "
            "its own as it enrolls"),
    Setting("RUNNER_FLEET_KEY", _hex_key, "", "the key RUNNER_FLEET's runners enroll with (openssl rand -hex 32); "
            "it only enrolls", secret=True),
    Setting("SANDBOX_PYTHON", _text, "/usr/bin/python3",
            "interpreter for local and process sandboxes (needs numpy and matplotlib for plots)"),
    Setting("SANDBOX_IMAGE", _text, "pyclassroom-sandbox:latest", "Docker image of the docker sandbox"),
    Setting("SANDBOX_UID_BASE", _int(1000, 2 ** 31 - 2 ** 24), "200000",
            "as root, each student's code runs as this uid plus the student's id"),
    Setting("RUN_MAX_CONCURRENT", _int(1, 10000), "16", "programs running at once on this host"),
    Setting("RUN_SANDBOX_RUNS", _int(1, 1000), "100",
            "runs one sandbox serves before a fresh one replaces it, less up to a fifth at random (local "
            "and docker; each run is a fresh fork and nothing of the last run is left in it; 1: a new "
            "sandbox for every run)"),
    Setting("RUN_QUEUE_MAX", _int(0, 100000), "200", "runs that may wait for a free place on this host"),
    Setting("SANDBOX_CPU", _choice("idle", "low"), "idle",
            "students' programs' CPU priority, where cgroups rank them: idle (they get the CPU only when "
            "nothing else on the host wants it: the server stays quick under a class's busy loops) or low "
            "(one ordinary program's share in all, for a host shared with other work, such as the test "
            "suite's browsers, where idle would starve them)"),
    Setting("SANDBOX_STARTS_AT_ONCE", _int(0, 1000, ", 0 = one per CPU"), "0",
            "sandboxes starting at once on this host; the others wait in line, their students told their "
            "place (a start keeps about one CPU busy for a moment)"),
    Setting("RUN_SOCKETS_PER_USER", _int(1, 1000), "8",
            "IDE tabs one student may have connected to one worker; a new one closes their oldest idle one"),
    Setting("RUN_WALL_SECONDS", _int(1, 24 * HOUR), "900", "longest a run may last"),
    Setting("RUN_IDLE_SECONDS", _int(1, 24 * HOUR), "300",
            "a run with no output and no input for this long is ended"),
    Setting("RUN_DEBUG_IDLE_SECONDS", _int(1, 24 * HOUR), "600",
            "a program paused in the debugger with no step from the student for this long is ended (the "
            "wall-clock limit does not count paused time)"),
    Setting("RUN_CPU_SECONDS", _int(1, 3600), "10", "CPU time a run may use (waiting for input is free)"),
    Setting("RUN_MEMORY_MB", _int(16, 64 * 1024), "512",
            "memory a run may use: each process, and all of them together with its /tmp and /dev/shm "
            "(plus 96 MB for the launcher, where cgroups hold the run)"),
    Setting("RUN_PROCESSES", _int(1, 10000), "64", "processes a run may have at once"),
    Setting("RUN_FILE_MB", _int(1, 64 * 1024), "20", "largest file a run may write"),
    Setting("RUN_OPEN_FILES", _int(16, 65536), "128", "files a run's process may have open"),
    Setting("RUN_OUTPUT_KB", _int(1, 1 << 20), "2048", "output (text and images) a run may print"),
    Setting("CHECKS_AT_ONCE", _int(1, 1000), "4",
            "exercise checks running at once on this host (each runs the student's program several times); "
            "the others wait in line, told their place"),
    Setting("CHECK_QUEUE_MAX", _int(0, 100000), "200", "checks that may wait in line on this host"),
    Setting("CHECK_SECONDS", _int(1, 3600), "10",
            "longest one program of a check may run (an output check, or a function called by a test), "
            "and how long a check's tests may take in all, times 3"),
    Setting("ASSIST_PROCESSES", _int(0, 64, ", 0 = no editing help"), "2",
            "processes per worker that complete code and check it while students type (jedi, pyflakes)"),
    Setting("ASSIST_QUEUE_MAX", _int(1, 100000), "240",
            "editing-help requests that may wait for a process, per worker (one per student and kind)"),
    Setting("ASSIST_TIMEOUT", _int(1, 120), "5",
            "seconds an editing-help request may wait and then compute; a process still computing is replaced"),
    Setting("ASSIST_MEMORY_MB", _int(128, 64 * 1024), "512",
            "memory one editing-help process (with jedi's subprocess) may hold; the kernel enforces it as root"),
    Setting("SHUTDOWN_TIMEOUT", _int(1, 300), "10",
            "seconds a worker may spend finishing requests after SIGTERM"),
]
BY_NAME = {s.name: s for s in SETTINGS}


@dataclass(frozen=True, kw_only=True)
class Config:
    """The effective settings: one field per row of SETTINGS, named after its
    variable and typed as its parser returns (tests/test_config.py holds the
    two together). Frozen: a changed setting is a new Config (`but`)."""
    HOST: str
    PORT: int
    PUBLIC_URL: str
    TORNADO_PROCESSES: int
    DATABASE_URL: str
    DATA_DIR: str
    STORAGE_ROOT: str
    COOKIE_SECRET: str
    DB_POOL_MAX: int
    DB_ACQUIRE_TIMEOUT: int
    DB_QUERY_TIMEOUT: int
    LOG_LEVEL: str
    ADMIN_PASSWORD: str
    DEMO: bool
    SESSION_TTL: int
    SESSION_CACHE_SECONDS: int
    REQUESTS_AT_ONCE: int
    REQUEST_QUEUE: int
    TRUST_PROXY: bool
    MAX_BODY_BYTES: int
    PASSWORD_SIGN_IN: bool
    OIDC_ISSUERS: tuple[issuers.Issuer, ...]
    OIDC_TIMEOUT: int
    LOGIN_FAILURES_PER_USER: int
    LOGIN_FAILURES_PER_ADDRESS: int
    LOGIN_THROTTLE_WINDOW: int
    HASH_THREADS: int
    FILE_PROCESSES: int
    FILE_DEADLINE: int
    FILE_THREADS: int
    MAX_FILE_BYTES: int
    REPLAY_KEEP_BYTES: int
    QUOTA_BYTES: int
    QUOTA_FILES: int
    HISTORY_VERSIONS: int
    PERF_CHECK: bool
    FS_DELAY_MS: int
    SANDBOX: str
    RUNNERS: tuple[tuple[str, str], ...]
    RUNNER_SANDBOX: str
    RUNNER_SECRET: str
    CLOUDWATCH_NAMESPACE: str
    RUNNER_FLEET: str
    RUNNER_FLEET_KEY: str
    SANDBOX_PYTHON: str
    SANDBOX_IMAGE: str
    SANDBOX_UID_BASE: int
    RUN_MAX_CONCURRENT: int
    RUN_SANDBOX_RUNS: int
    RUN_QUEUE_MAX: int
    SANDBOX_CPU: str
    SANDBOX_STARTS_AT_ONCE: int
    RUN_SOCKETS_PER_USER: int
    RUN_WALL_SECONDS: int
    RUN_IDLE_SECONDS: int
    RUN_DEBUG_IDLE_SECONDS: int
    RUN_CPU_SECONDS: int
    RUN_MEMORY_MB: int
    RUN_PROCESSES: int
    RUN_FILE_MB: int
    RUN_OPEN_FILES: int
    RUN_OUTPUT_KB: int
    CHECKS_AT_ONCE: int
    CHECK_QUEUE_MAX: int
    CHECK_SECONDS: int
    ASSIST_PROCESSES: int
    ASSIST_QUEUE_MAX: int
    ASSIST_TIMEOUT: int
    ASSIST_MEMORY_MB: int
    SHUTDOWN_TIMEOUT: int
    # Derived, not read from the environment: whether PUBLIC_URL is
    # public_url.guess()'s (it was left empty).
    PUBLIC_URL_GUESSED: bool = dataclasses.field(default=False, metadata={"derived": True})

    def but(self, **values: Any) -> "Config":
        """These settings with `values` in place of some (an attempt's runs' shorter limits)."""
        return dataclasses.replace(self, **values)

    def masked(self) -> list[tuple[str, Any]]:
        """(name, value) pairs for display, with secrets hidden."""
        return [(s.name, s.shown(getattr(self, s.name))) for s in SETTINGS]

    @property
    def process_count(self) -> int:
        return self.TORNADO_PROCESSES or os.cpu_count() or 1


def load(environ: Mapping[str, str] | None = None) -> Config:
    """Read every setting from `environ` (default: os.environ)."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for s in SETTINGS:
        raw = environ.get(s.name, s.default)
        try:
            values[s.name] = s.parse(raw)
        except ValueError as e:
            raise ConfigError(f"{s.name}={s.shown(raw)!r} is not valid: {e}") from None
    values["PUBLIC_URL_GUESSED"] = not values["PUBLIC_URL"]  # public_url.resolve fills in the guess
    if not values["STORAGE_ROOT"]:
        values["STORAGE_ROOT"] = os.path.join(values["DATA_DIR"], "storage")
    return Config(**values)


def markdown_table() -> str:
    """Every setting as a Markdown table, for docs/settings.md (written by
    `python -m server --settings-markdown`; a test fails when they differ)."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")
    rows = ["| setting | default | allowed | what it does |", "|---|---|---|---|"]
    for s in SETTINGS:
        default = f"`{s.default}`" if s.default else "empty"
        rows.append(f"| `{s.name}` | {cell(default)} | `{cell(s.parse.allowed)}` | {cell(s.help)} |")
    return "\n".join(rows) + "\n"


def help_text() -> str:
    lines = ["Settings (environment variables):", ""]
    for s in SETTINGS:
        default = s.default if s.default else "(empty)"
        lines.append(f"  {s.name:<27} {s.help}")
        lines.append(f"  {'':<27} default {default}; allowed {s.parse.allowed}")
    return "\n".join(lines)
