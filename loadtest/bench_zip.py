"""Zip memory benchmark: what a folder's zip costs the worker that streams it.

    python -m loadtest.bench_zip [--megabytes 12,48] [--json OUT]

A student's home holds a folder of incompressible 1 MiB files; the zip of
it is downloaded the way a slow browser reads it (small chunks, short
pauses) while the worker's resident memory is sampled every 5 ms. The zip
is made as it is read, so its growth should stay at a few chunks whatever
the folder's size. A first, small zip warms up what does not depend on the
size (file threads and their malloc arenas, zlib state): that is the
baseline. Every zip is checked to be complete and valid.
"""
import argparse
import io
import os
import sys
import threading
import time
import zipfile

from .cli import Aborted, bounds, clean_up_on_sigterm, int_list, say, write_json


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise Aborted(f"no VmRSS for pid {pid}")


class RssSampler(threading.Thread):
    """The highest RSS of a process, sampled every few milliseconds."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self._done = pid, rss_bytes(pid), threading.Event()

    def run(self):
        while not self._done.wait(0.005):
            self.peak = max(self.peak, rss_bytes(self.pid))

    def stop(self):
        self._done.set()
        self.join()


def download_slowly(client, path, timeout, chunk=16 << 10, pause=0.002):
    """The bytes of a streamed zip, read as a slow browser would."""
    out = io.BytesIO()
    with client.get(path, stream=True, timeout=timeout) as r:
        if r.status_code != 200 or r.headers.get("Content-Type") != "application/zip":
            raise Aborted(f"GET {path}: {r.status_code} {r.text[:200]}")
        for block in r.iter_content(chunk):
            out.write(block)
            time.sleep(pause)
    return out.getvalue()


def fill(home, folder, megabytes):
    """`megabytes` incompressible files of 1 MiB in home/folder: {name: bytes}."""
    files = {}
    os.makedirs(os.path.join(home, folder), exist_ok=True)
    for i in range(megabytes):
        files[f"part{i}.bin"] = os.urandom(1 << 20)
        with open(os.path.join(home, folder, f"part{i}.bin"), "wb") as f:
            f.write(files[f"part{i}.bin"])
    return files


def measure(server, username, password, sizes, timeout):
    from .client import Client
    client = Client(server.url)
    client.login_ok(username, password)
    home = os.path.join(server.env["DATA_DIR"], "storage", "home", username)
    (worker,) = server.pids
    fill(home, "warm", 2)
    download_slowly(client, "/api/zip/home/warm", timeout)
    rows = []
    for megabytes in sizes:
        files = fill(home, f"big{megabytes}", megabytes)
        baseline = rss_bytes(worker)
        sampler = RssSampler(worker)
        sampler.start()
        try:
            data = download_slowly(client, f"/api/zip/home/big{megabytes}", timeout)
        finally:
            sampler.stop()
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            if zf.testzip() is not None or {n: zf.read(n) for n in zf.namelist()} != files:
                raise Aborted(f"the zip of {megabytes} MiB is not the folder")
        rows.append({"folder_mib": megabytes, "zip_mib": round(len(data) / 2 ** 20, 1),
                     "baseline_mib": round(baseline / 2 ** 20, 1), "peak_mib": round(sampler.peak / 2 ** 20, 1),
                     "growth_mib": round((sampler.peak - baseline) / 2 ** 20, 1)})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_zip", description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int_list, default=[12, 48],
                        help="folder sizes to zip, in MiB (default 12,48)")
    bounds(parser, 300, "download")
    args = parser.parse_args(argv)
    clean_up_on_sigterm()
    from .harness import fresh_server, make_credentials, scratch
    try:
        with scratch("pyclassroom-bench-zip-") as (base, pg):
            say("starting PostgreSQL and the server ...")
            admin_dsn = pg.start()
            with fresh_server(admin_dsn, base, 1, make_credentials(1, "zip"), "zip") as (server, users):
                rows = measure(server, *users[0], args.megabytes, args.timeout)
    except Aborted as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print("zip of a folder of incompressible files, read slowly; the worker's RSS sampled every 5 ms")
    print(f"{'folder MiB':>10} {'zip MiB':>8} {'RSS before':>11} {'peak':>8} {'growth MiB':>11} {'growth/folder':>14}")
    for r in rows:
        print(f"{r['folder_mib']:>10} {r['zip_mib']:>8} {r['baseline_mib']:>11} {r['peak_mib']:>8} "
              f"{r['growth_mib']:>11} {r['growth_mib'] / r['folder_mib']:>14.2f}")
    if args.json:
        write_json(args.json, {"zips": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
