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

import asyncpg

log = logging.getLogger(__name__)

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


async def create_pool(dsn, max_size, connect_timeout=30.0):
    """Open the pool, retrying while the database starts (containers start in
    any order)."""
    deadline = time.monotonic() + connect_timeout
    delay = 0.2
    while True:
        try:
            return await asyncpg.create_pool(dsn, min_size=min(2, max_size), max_size=max_size,
                                             command_timeout=30, max_inactive_connection_lifetime=300)
        except (OSError, asyncpg.PostgresError, asyncio.TimeoutError) as e:
            if time.monotonic() + delay > deadline:
                raise RuntimeError(f"cannot connect to the database: {e}") from e
            log.warning("database not reachable yet (%s); retrying", e)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)


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


async def schema_version(pool):
    try:
        return await pool.fetchval("SELECT coalesce(max(version), 0) FROM schema_migrations")
    except asyncpg.UndefinedTableError:
        return 0
