"""The asyncpg pool of one worker, and schema migrations.

Migrations are the numbered SQL files in `migrations/`, applied in order,
each in its own transaction, under a PostgreSQL advisory lock: however many
workers or containers start at once, one applies them and the others wait,
then see them recorded in `schema_migrations`. Migrations only ever move
forward and stay compatible with the previous release's code, so a rollback
of the application never needs a rollback of the schema.
"""
import asyncio
import logging
import os
import re
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Mapping, Sequence

import asyncpg

from . import timing
from .errors import Refused
from .fifo import FifoGate

log = logging.getLogger(__name__)

# A row as asyncpg gives it (an asyncpg.Record: read by column name).
Row = Mapping[str, Any]

MIGRATIONS_DIR = os.path.join(os.path.dirname(__file__), "migrations")
MIGRATION_LOCK = 7_326_001  # advisory lock key, any constant unique to this app


def migrations():
    """[(version, name, sql)] in order."""
    found = []
    for name in sorted(os.listdir(MIGRATIONS_DIR)):
        m = re.match(r"^(\d{3})_[a-z0-9_]+\.sql$", name)
        if m:
            with open(os.path.join(MIGRATIONS_DIR, name), encoding="utf-8") as f:
                found.append((int(m.group(1)), name, f.read()))
    versions = [v for v, _, _ in found]
    assert versions == list(range(1, len(found) + 1)), f"migrations must be numbered 1..n: {versions}"
    return found


LATEST = len(migrations())


class _Connection(asyncpg.Connection):
    """A pooled connection, given back without asyncpg's reset query (which
    unlistens, resets settings and unlocks advisory locks): nothing the
    server does on pooled connections leaves such state behind (migrations
    and LISTEN use connections of their own), and the query cost every
    release a round trip. An open transaction is still ended by asyncpg."""

    def get_reset_query(self):
        return ""


async def create_pool(dsn, max_size, acquire_timeout, query_timeout, connect_timeout=30.0):
    """Open the pool (a `Pool`), retrying while the database starts
    (containers start in any order)."""
    deadline = time.monotonic() + connect_timeout
    delay = 0.2
    while True:
        try:
            return Pool(await asyncpg.create_pool(dsn, min_size=min(2, max_size), max_size=max_size,
                                                  command_timeout=query_timeout,
                                                  max_inactive_connection_lifetime=300,
                                                  connection_class=_Connection),
                        acquire_timeout, max_size)
        except (OSError, asyncpg.PostgresError, asyncio.TimeoutError) as e:
            if time.monotonic() + delay > deadline:
                raise RuntimeError(f"cannot connect to the database: {e}") from e
            log.warning("database not reachable yet (%s); retrying", e)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)


# SQLSTATE classes that mean "not now" rather than "wrong": connection
# exceptions, insufficient resources, operator intervention (shutdown,
# starting up, a cancelled statement), system errors.
UNAVAILABLE_CLASSES = ("08", "53", "57", "58")


def unavailable(exc):
    """True when `exc` says the database cannot be reached or cannot answer
    now (down, restarting, frozen, out of connections), as opposed to a
    query that is wrong: the request may succeed if tried again later. An
    error raised while handling such a failure (a transaction that cannot
    roll back on a lost connection) counts as one too."""
    seen = 0
    while exc is not None and seen < 5:
        if _unavailable(exc):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _unavailable(exc):
    if isinstance(exc, (OSError, TimeoutError)):  # refused, reset, no socket, acquire or query timeout
        return True
    if isinstance(exc, asyncpg.PostgresError):
        return (exc.sqlstate or "")[:2] in UNAVAILABLE_CLASSES
    # asyncpg's own words when the server went away under a connection, or
    # the worker is shutting down; its other InterfaceErrors are our bugs.
    if type(exc) is asyncpg.InterfaceError and (
            "connection is closed" in str(exc) or str(exc) in ("pool is closing", "pool is closed")):
        return True
    # A connection whose earlier statement was cancelled while the server was
    # frozen still waits for that answer ("cannot switch to state ...;
    # another operation is in progress"): it is of no more use (the caller
    # closes it), and the database is not answering.
    return isinstance(exc, asyncpg.InternalClientError) and "another operation" in str(exc)


class DatabaseUnavailable(Refused):
    """The database cannot answer now; the request may be tried again."""

    RETRY_AFTER = 5

    def __init__(self):
        super().__init__(503, "database_unavailable",
                         "The database is not answering right now. Try again in a few seconds.",
                         retry_after=self.RETRY_AFTER)


class Pool:
    """The asyncpg pool of one worker, as the request paths use it.

    Taking a connection waits at most `acquire_timeout` seconds and every
    statement at most the pool's `command_timeout`, so a database that hangs
    turns requests into quick 503s rather than a hung server. Every query's
    time counts as the request's `db` part (Server-Timing). An outage is
    logged once when this worker first meets it and once when the database
    answers again, not once per request; such failures are raised as
    `DatabaseUnavailable`, a refusal every handler answers with a 503.

    asyncpg's own pool does not serve its waiters in order (one woken for a
    freed connection may find it taken by a newcomer and wait again, at the
    back): under load some requests waited seconds while others were served
    at once. A FIFO line as wide as the pool stands in front of it, so at
    most `max_size` callers ever ask asyncpg, and each finds a connection."""

    def __init__(self, pool, acquire_timeout, size):
        self._pool = pool
        self._line = FifoGate("database connection", size)
        self.acquire_timeout = acquire_timeout
        self.down_since = None  # time.monotonic() of the first failure of the current outage
        self.failures = 0  # database calls that failed in the current outage
        self.back_at = 0.0  # time.monotonic() the last outage ended
        self.failed_at = 0.0  # time.monotonic() of the last failure

    def __getattr__(self, name):  # get_size, get_idle_size, close, terminate ...: as they are
        return getattr(self._pool, name)

    @asynccontextmanager
    async def acquire(self, timeout: float | None = None) -> AsyncIterator[Any]:
        """A connection (for a transaction or several statements). All of its
        time counts as `db`; `timeout` bounds the wait for it and its reset.
        Waiters get connections in the order they asked (`_line`)."""
        started, called = time.perf_counter(), time.monotonic()
        conn = None
        in_line = False
        try:
            async with asyncio.timeout(timeout or self.acquire_timeout):
                await self._line.acquire()
                in_line = True
                conn = await self._pool.acquire()
            yield conn
        except Exception as e:
            # A connection that died under the call makes any error of it
            # an outage (asyncpg's own can be odd, "cannot switch to state").
            if not (unavailable(e) or (conn is not None and _closed(conn))):
                raise
            if conn is not None:
                # Its reset would wait for a cancelled statement's answer,
                # which a frozen server never gives: close it instead.
                _terminate(conn)
            self._failed(e, called)
            raise DatabaseUnavailable() from e
        else:
            self._answered(called)
        finally:
            if conn is not None:
                await self._release(conn)
            if in_line:
                self._line.release()
            timing.add("db", time.perf_counter() - started)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Any]:
        """A connection in a transaction, committed if the block ends well.
        When the database fails under it, the connection is closed rather
        than rolled back (PostgreSQL rolls back a transaction whose
        connection is gone): asyncpg's ROLLBACK would first wait, without a
        timeout, for the answer to the statement that timed out."""
        async with self.acquire() as conn:
            tr = conn.transaction()
            await tr.start()
            try:
                yield conn
            except BaseException as e:
                if unavailable(e) or _closed(conn):
                    _terminate(conn)
                else:
                    await tr.rollback()
                raise
            await tr.commit()

    async def _release(self, conn):
        try:
            await self._pool.release(conn)
        except Exception as e:
            # The work is done (or failed on its own); asyncpg has closed the
            # connection it could not reset and opens a new one when needed.
            log.debug("a database connection could not be reset and was closed: %r", e)

    async def _query(self, method: str, query: str, args: Sequence[object], timeout: float | None) -> Any:
        async with self.acquire(timeout) as conn:
            return await getattr(conn, method)(query, *args, timeout=timeout)

    async def fetch(self, query: str, *args: object, timeout: float | None = None) -> list[Row]:
        rows: list[Row] = await self._query("fetch", query, args, timeout)
        return rows

    async def fetchrow(self, query: str, *args: object, timeout: float | None = None) -> Row | None:
        row: Row | None = await self._query("fetchrow", query, args, timeout)
        return row

    async def fetchval(self, query: str, *args: object, timeout: float | None = None) -> Any:
        return await self._query("fetchval", query, args, timeout)

    async def execute(self, query: str, *args: object, timeout: float | None = None) -> str:
        status: str = await self._query("execute", query, args, timeout)
        return status  # asyncpg's status line, e.g. "UPDATE 1"

    def _failed(self, exc, called):
        if self.down_since is None and called < self.back_at:
            return  # a call made during the last outage, failing late: not a new outage
        self.failures += 1
        self.failed_at = time.monotonic()
        if self.down_since is None:
            self.down_since = time.monotonic()
            detail = "no answer in time" if isinstance(exc, TimeoutError) else str(exc).strip()
            log.warning("database unavailable (%s: %s); answering 503 until it answers again",
                        type(exc).__name__, detail)

    def _answered(self, called):
        # Only a call made after the last failure proves the database is
        # back: one that was on its way before may just have been lucky.
        if self.down_since is not None and called > self.failed_at:
            log.warning("database answers again after %.1f s (%d database calls failed meanwhile)",
                        time.monotonic() - self.down_since, self.failures)
            self.down_since, self.failures, self.back_at = None, 0, time.monotonic()


def _closed(conn):
    try:
        return conn.is_closed()
    except asyncpg.InterfaceError:  # asyncpg already took back a connection that died
        return True


def _terminate(conn):
    try:
        conn.terminate()
    except asyncpg.InterfaceError:
        pass  # likewise


async def migrate(conn):
    """Apply pending migrations; return the names applied by this call.

    The caller holds MIGRATION_LOCK (see `locked`)."""
    await conn.execute("""CREATE TABLE IF NOT EXISTS schema_migrations (
        version integer PRIMARY KEY, name text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now())""")
    done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
    applied = []
    for version, name, sql in migrations():
        if version in done:
            continue
        async with conn.transaction():
            await conn.execute(sql)
            await conn.execute("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                               version, name)
        log.info("applied migration %s", name)
        applied.append(name)
    return applied


class locked:
    """`async with locked(conn):` holds the migration advisory lock."""

    def __init__(self, conn):
        self.conn = conn

    async def __aenter__(self):
        await self.conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK)
        return self.conn

    async def __aexit__(self, *exc):
        await self.conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK)


async def schema_version(pool, timeout=None):
    try:
        return await pool.fetchval("SELECT coalesce(max(version), 0) FROM schema_migrations",
                                   timeout=timeout)
    except asyncpg.UndefinedTableError:
        return 0
