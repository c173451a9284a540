"""The runners that registered, in PostgreSQL: a heartbeat a second from
each (runner/__main__.py), kept by whichever web worker it reached, read by
every worker of every host.

A runner is alive while its latest heartbeat is younger than ALIVE_SECONDS:
one that dies or is cut off drops out of every worker's choice within
that, and its sandboxes are given up sooner still by their own sockets'
silence (sandbox/remote.py). Each worker reads the table at most every
READ_SECONDS (one indexed scan of a few rows), not at every sandbox start.
"""
import asyncio
import time
from dataclasses import dataclass

from ..db import Pool

ALIVE_SECONDS = 3.0
READ_SECONDS = 1.0


@dataclass(frozen=True)
class Registered:
    id: str
    address: str
    capacity: int
    busy: int  # as its latest heartbeat said


class Registry:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.known: list[Registered] = []
        self.read_at = 0.0
        self.reading: asyncio.Lock = asyncio.Lock()

    async def record(self, fields: dict[str, object]) -> bool:
        """Keep a checked heartbeat (tickets.read_heartbeat) unless the
        runner's latest is as recent: False for a replay or one overtaken."""
        done = await self.pool.execute(
            "INSERT INTO runners (id, address, capacity, busy, sent) VALUES ($1, $2, $3, $4, $5) "
            "ON CONFLICT (id) DO UPDATE SET address = $2, capacity = $3, busy = $4, sent = $5, seen = now() "
            "WHERE runners.sent < $5",
            fields["runner"], fields["address"], fields["capacity"], fields["busy"], fields["sent"])
        return done.endswith(" 1")

    async def enroll(self, fields: dict[str, object]) -> bool:
        """A fleet member's first heartbeat: False when its name is enrolled
        already (a member taking another's name), which nothing changes."""
        done = await self.pool.execute(
            "INSERT INTO runners (id, address, capacity, busy, sent) VALUES ($1, $2, $3, $4, $5) "
            "ON CONFLICT (id) DO NOTHING",
            fields["runner"], fields["address"], fields["capacity"], fields["busy"], fields["sent"])
        # Runners an autoscaler stopped long ago are forgotten (a fleet member's name is never reused).
        await self.pool.execute("DELETE FROM runners WHERE seen < now() - interval '1 day'")
        return done.endswith(" 1")

    async def alive(self) -> list[Registered]:
        """The runners heard from in the last ALIVE_SECONDS (as of at most
        READ_SECONDS ago)."""
        async with self.reading:
            if time.monotonic() - self.read_at >= READ_SECONDS:
                rows = await self.pool.fetch(
                    "SELECT id, address, capacity, busy FROM runners "
                    "WHERE seen > now() - make_interval(secs => $1) ORDER BY id", ALIVE_SECONDS)
                self.known = [Registered(r["id"], r["address"], r["capacity"], r["busy"]) for r in rows]
                self.read_at = time.monotonic()
        return self.known
