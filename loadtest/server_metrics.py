"""What the server says about its sandboxes in /metrics (all workers
together): how many it has started and in how long, how many it made ready
again after a run; so a tool can wait for the warm sandboxes of the IDEs it
opened, and report the server's own start times."""
import asyncio
import re
import time

READY_WAIT = 30.0  # longest wait for the server to report the warm sandboxes
METRIC_RE = re.compile(r"^(pyclassroom_sandbox_start_seconds_(?:sum|count)|pyclassroom_sandbox_reused_total"
                       r"|pyclassroom_runner_files_sent_total)"
                       r"\s+(\S+)$", re.M)


async def server_metrics(http, base_url):
    """{name: value} of the server's /metrics; {} if it cannot say."""
    try:
        async with http.get(base_url.rstrip("/") + "/metrics") as resp:
            text = await resp.text()
        return {name: float(value) for name, value in METRIC_RE.findall(text)}
    except Exception:
        return {}


async def sandbox_starts(http, base_url):
    """(count, seconds) of sandboxes the server has made ready so far;
    (None, None) if it cannot say."""
    found = await server_metrics(http, base_url)
    try:
        return (int(found["pyclassroom_sandbox_start_seconds_count"]),
                found["pyclassroom_sandbox_start_seconds_sum"])
    except KeyError:
        return None, None


async def sandbox_reuses(http, base_url):
    """Sandboxes made ready again after a run so far (to serve the next);
    None if the server cannot say."""
    value = (await server_metrics(http, base_url)).get("pyclassroom_sandbox_reused_total")
    return None if value is None else int(value)


async def wait_for_sandboxes(http, base_url, count, timeout=READY_WAIT):
    """Wait until the server has made `count` sandboxes ready in all;
    returns whether it did within `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, _ = await sandbox_starts(http, base_url)
        if done is None:
            return False
        if done >= count:
            return True
        await asyncio.sleep(0.1)
    return False


def starts_between(before, after):
    """{count, mean_ms} of the sandboxes made ready between two readings."""
    (c0, s0), (c1, s1) = before, after
    if c0 is None or c1 is None:
        return {"count": None, "mean_ms": None}
    n = c1 - c0
    return {"count": n, "mean_ms": round((s1 - s0) / n * 1000, 1) if n else None}
