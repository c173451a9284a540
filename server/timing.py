"""Where a request's time went, for the `Server-Timing` header.

A request's handler sets `current` to a fresh dict when it starts; code it
calls adds seconds to named parts: `wait` (for its turn in the worker's
line of requests), `hash`/`hash_wait` and `fs`/`fs_wait`
(running in, and waiting for, an executor thread), `db` (PostgreSQL
queries, pool wait included). What is left of the total is `app`: the
handler's own work and the IOLoop's queue. Under load, the part whose time
grows is the bottleneck (`db.Pool` adds the `db` part). Context variables follow each request's task,
so concurrent requests never mix their figures.
"""
from contextvars import ContextVar

current: ContextVar[dict[str, float] | None] = ContextVar("timing", default=None)
PARTS = ("wait", "hash_wait", "hash", "fs_wait", "fs", "db")


def add(part: str, seconds: float) -> None:
    parts = current.get()
    if parts is not None:
        parts[part] = parts.get(part, 0.0) + seconds


def header(parts: dict[str, float], total: float) -> str:
    """`Server-Timing` value: each part and `app` (the rest) in milliseconds."""
    present = [name for name in PARTS if name in parts]
    fields = [f"{name};dur={parts[name] * 1000:.2f}" for name in present]
    accounted = sum(parts[name] for name in present)
    fields.append(f"app;dur={max(0.0, total - accounted) * 1000:.2f}")
    fields.append(f"total;dur={total * 1000:.2f}")
    return ", ".join(fields)
