"""What students feel on a mounted file system (AWS EFS / NFS in production).

    python -m loadtest.efs_bench --dir /mnt/efs/bench-scratch [--writers 1,8,32]
        [--file-size 2K-4K] [--duration 10 | --count N] [--list-files 50]
        [--big-size 64M] [--parallel 1,4] [--inject-delay-ms N] [--json OUT]
    python -m loadtest.efs_bench --compare before.json after.json

Run it on the host that serves the class, against a folder on the same
mount as STORAGE_ROOT (never STORAGE_ROOT itself: it refuses a non-empty
folder unless --allow-nonempty). It works in a fresh subfolder it creates
and removes it at the end, also on Ctrl-C or SIGTERM. It needs a checkout
of this repository (it measures through the server's own `Store`) and
`hdrhistogram` (loadtest/requirements.txt), not the HTTP client libraries.

What is measured, and how to read it:

- Small files: N writer threads (--writers), each with its own user home,
  loop "save my file, then load it back" through the server's own
  `Store.save` (lock, temp file, fsync, history hard link, rename, fsync of
  the folder) and `Store.read`. These are exactly the calls behind a
  student's Ctrl-S and file open. p50 is a typical save; p99 is the slow
  one in a hundred that students notice. saves/s with N writers is what one
  server process can sustain: if it stops growing with N, the file system
  (or the lock, or our CPU) is the limit. On EFS expect milliseconds per
  save (several round trips each); on local disk, fractions of one.
- Metadata: `Store.list` of a home with --list-files files (the file tree
  a student opens) and `os.stat` of single files. On NFS these may be
  served from the client's attribute cache (see actimeo/acregmin in the
  mount options in the JSON), so they can look local-fast.
- Sequential: --parallel threads each write one --big-size file (fsync at
  its end) and read it back, in MiB/s of all threads together: uploads,
  zips and big data sets. EFS throughput depends on its throughput mode
  and burst credits, so repeat at different times of day before concluding.
  Reads come after `drop_caches` when root; otherwise after
  posix_fadvise(DONTNEED), which may leave part of a file cached.

Latencies are HDR histograms at microsecond precision (3 significant
digits); only successful operations add a latency, failures are counted by
kind, and any error makes the exit status 1. `bench cpu` is this process's
CPU as a share of one core: above ~0.7 the benchmark's own CPU (and Python's
GIL) may be what limits, not the file system, as in a server worker.

--inject-delay-ms is a rehearsal and test aid: every Store.save and
Store.read first waits that long (Limits.delay_ms, FS_DELAY_MS in the
server), so one sees what a slower file system would do to the figures.
--compare prints every figure of two runs side by side with after/before.
"""
import argparse
import datetime
import errno
import json
import os
import platform
import random
import re
import shutil
import socket
import string
import sys
import tempfile
import threading
import time
from collections import Counter

from server import config
from server.errors import Refused
from server.files.store import Area, Limits, Store

from .cli import clean_up_on_sigterm, int_list, say, uninterrupted, write_json
from .machine import machine
from .recording import CPU_WARNING, Recorder, cpu_seconds, fmt

FORMAT = 1  # bump when the JSON layout changes incompatibly
CHUNK = 1 << 20  # sequential I/O block
MiB = 1 << 20
STOP = threading.Event()  # set on Ctrl-C / SIGTERM: every loop ends after its current operation


# -- recording --------------------------------------------------------------

def error_kind(exc):
    if isinstance(exc, Refused):
        return exc.code  # e.g. conflict, quota_exceeded
    if isinstance(exc, OSError) and exc.errno:
        return errno.errorcode.get(exc.errno, str(exc.errno))  # e.g. ENOSPC, EIO, ESTALE
    return type(exc).__name__


def timed(samples, operation):
    started = time.perf_counter()
    try:
        result = operation()
    except Exception as e:  # a failure is counted, never a latency, never a crash
        samples.error(error_kind(e))
        return None
    samples.success(time.perf_counter() - started)
    return result


def run_together(n, prepare, work):
    """Run `prepare(i)` (untimed set-up) then `work(i, state)` in n threads,
    all `work`s released at the same instant. Returns (wall seconds from the
    release to the last thread's end, our CPU share of one core, set-up
    failures)."""
    barrier, failures = threading.Barrier(n + 1), Counter()

    def thread(i):
        try:
            state = prepare(i)
        except Exception as e:
            failures["setup_" + error_kind(e)] += 1
            state = None
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            return
        if state is not None:
            try:
                work(i, state)
            except Exception as e:  # work records its own; this is a bug, still counted
                failures["unexpected_" + error_kind(e)] += 1

    threads = [threading.Thread(target=thread, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    try:
        barrier.wait()
        cpu, started = cpu_seconds(), time.perf_counter()
        for t in threads:
            while t.is_alive():
                t.join(0.2)  # short joins: Ctrl-C gets through at once
        wall = time.perf_counter() - started
        return wall, round((cpu_seconds() - cpu) / wall, 3) if wall else 0.0, failures
    except BaseException:
        STOP.set()
        barrier.abort()
        for t in threads:
            t.join()
        raise


def keep_going(deadline, done, count):
    return not STOP.is_set() and (done < count if count else time.monotonic() < deadline)


# -- small files --------------------------------------------------------------

class Payloads:
    """2-4 KiB of code-like text per save, unique each time (so each save is
    a real change with a new etag), cut from a pool made once: generating
    random text per save would cost more CPU than a local save does."""

    def __init__(self, low, high):
        self.low, self.high = low, high
        self.pool = "".join(random.choices(string.ascii_letters + string.digits + " \n", k=max(1 << 16, 2 * high)))
        self.pool = self.pool.encode()

    def make(self, rng, n):
        size = rng.randint(self.low, self.high)
        head = f"# save {n}\n".encode()[:size]
        start = rng.randrange(len(self.pool) - size)
        return head + self.pool[start:start + size - len(head)]


def small_files(store, writers, args, payloads):
    saves, loads = [Recorder() for _ in range(writers)], [Recorder() for _ in range(writers)]
    parts = ("main.py",)

    def prepare(i):
        area = Area.home(f"bench-w{i:03d}")
        store.ensure_home(f"bench-w{i:03d}", welcome=False)  # as at a student's first login
        data = payloads.make(random.Random(i), 0)
        meta = store.save(area, parts, data, if_match="*")  # creates or replaces: also warms up the home
        return {"area": area, "etag": meta["etag"], "data": data, "rng": random.Random(i)}

    def work(i, s):
        deadline, done = time.monotonic() + args.duration, 0
        while keep_going(deadline, done, args.count):
            done += 1
            data = payloads.make(s["rng"], done)
            meta = timed(saves[i], lambda: store.save(s["area"], parts, data, s["etag"]))
            if meta:
                s["etag"], s["data"] = meta["etag"], data
            else:
                s["etag"] = "*"  # do not let one failure turn every later save into a conflict
            got = timed(loads[i], lambda: store.read(s["area"], parts))
            if got is not None and got[0] != s["data"]:
                loads[i].errors["content_mismatch"] += 1

    wall, cpu, failures = run_together(writers, prepare, work)
    save, load = Recorder(), Recorder()
    for a, b in zip(saves, loads):
        save.merge(a)
        load.merge(b)
    save.errors.update(failures)
    return {"writers": writers, "wall_s": round(wall, 3), "bench_cpu": cpu,
            "save": save.summary(wall), "load": load.summary(wall)}


# -- metadata ------------------------------------------------------------------

def metadata(store, args, payloads):
    area = Area.home("bench-meta")
    store.ensure_home("bench-meta", welcome=False)
    rng = random.Random(1)
    for n in range(args.list_files):  # untimed set-up: a home as a student's looks
        store.save(area, (f"exercise_{n:02d}.py",), payloads.make(rng, n), if_match="*")
    home = store.home_path("bench-meta")
    files = [os.path.join(home, f"exercise_{n:02d}.py") for n in range(args.list_files)]
    operations = {"list": lambda k: store.list(area, ()),
                  "stat": lambda k: os.stat(files[k % len(files)], follow_symlinks=False)}
    out = {}
    for name, op in operations.items():
        samples = [Recorder() for _ in range(args.meta_threads)]

        def work(i, _):
            deadline, done = time.monotonic() + args.duration, 0
            while keep_going(deadline, done, args.count):
                timed(samples[i], lambda: op(done + i * 7))
                done += 1

        wall, cpu, failures = run_together(args.meta_threads, lambda i: True, work)
        total = Recorder()
        for s in samples:
            total.merge(s)
        total.errors.update(failures)
        out[name] = {**total.summary(wall), "threads": args.meta_threads, "files": args.list_files,
                     "wall_s": round(wall, 3), "bench_cpu": cpu}
    return out


# -- sequential ----------------------------------------------------------------

def drop_cache(paths, allow_drop_caches):
    """Make the read-back come from the file system, not this host's memory."""
    if allow_drop_caches and os.geteuid() == 0:
        try:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            return "drop_caches"
        except OSError:
            pass  # a container's /proc/sys is often read-only
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # pages are clean after fsync: they go
        finally:
            os.close(fd)
    return "fadvise"


def sequential(workdir, parallel, args):
    block = os.urandom(CHUNK)  # incompressible, written again and again
    paths = [os.path.join(workdir, f"big-{i}.bin") for i in range(parallel)]
    errors, moved = Counter(), [0] * parallel

    def write(i, _):
        try:
            fd = os.open(paths[i], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                left = args.big_size
                while left and not STOP.is_set():
                    left -= os.write(fd, block[:min(left, CHUNK)])
                os.fsync(fd)  # as a save does: the data is on the server before we call it written
            finally:
                os.close(fd)
            moved[i] = args.big_size - left
        except OSError as e:
            errors["write_" + error_kind(e)] += 1

    def read(i, _):
        try:
            with open(paths[i], "rb", buffering=0) as f:
                moved[i] = sum(iter(lambda: len(f.read(CHUNK)), 0))
        except OSError as e:
            errors["read_" + error_kind(e)] += 1
        if moved[i] != args.big_size:
            errors["read_short"] += 1

    try:
        write_s, write_cpu, failures = run_together(parallel, lambda i: True, write)
        errors.update(failures)
        written = sum(moved)
        cache = drop_cache([p for p in paths if os.path.exists(p)], not args.no_drop_caches)
        moved[:] = [0] * parallel
        read_s, read_cpu, failures = run_together(parallel, lambda i: True, read)
        errors.update(failures)
        read_bytes = sum(moved)
    finally:
        for p in paths:  # free the space before the next level
            if os.path.exists(p):
                os.unlink(p)
    return {"parallel": parallel, "file_mib": round(args.big_size / MiB, 3), "cache_drop": cache,
            "write_mib_s": round(written / MiB / write_s, 2), "write_s": round(write_s, 3),
            "read_mib_s": round(read_bytes / MiB / read_s, 2), "read_s": round(read_s, 3),
            "bench_cpu": max(write_cpu, read_cpu), "errors": sum(errors.values()),
            "errors_by_kind": dict(sorted(errors.items()))}


# -- host and mount ---------------------------------------------------------------

def mount_of(path):
    """The /proc/self/mountinfo entry PATH lives on: for EFS, fstype nfs4 and
    the options (vers, rsize, wsize, hard, timeo, actimeo...) that decide
    much of its speed."""
    real, best = os.path.realpath(path), None
    unescape = lambda s: re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)  # noqa: E731
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.rstrip("\n").partition(" - ")
            a, b = left.split(" "), right.split(" ")
            point = unescape(a[4])
            if (real == point or real.startswith(point.rstrip("/") + "/")) and \
                    (best is None or len(point) >= len(best["mount_point"])):  # the innermost, the last stacked
                best = {"mount_point": point, "fstype": b[0], "source": unescape(b[1]),
                        "mount_options": a[5], "super_options": b[2] if len(b) > 2 else ""}
    return best


def host_info(path):
    info = machine()
    return {"hostname": socket.gethostname(), "cpus": info["cpus"], "usable_cpus": info["usable_cpus"],
            "memory_gib": info["memory_gib"], "kernel": platform.release(), "python": info["python"],
            "root": os.geteuid() == 0, "mount": mount_of(path)}


# -- the run -------------------------------------------------------------------

def benchmark(args):
    """Every measurement, in a fresh subfolder of args.dir, removed afterwards."""
    workdir = tempfile.mkdtemp(prefix="efs-bench-", dir=args.dir)
    store = None
    try:
        store = Store(os.path.join(workdir, "storage"), Limits(
            quota_bytes=1 << 40, quota_files=10 ** 7, max_file_bytes=args.file_size[1],
            history_versions=args.history_versions, delay_ms=args.inject_delay_ms))
        payloads = Payloads(*args.file_size)
        result = {"small_files": [], "metadata": None, "sequential": []}
        for n in args.writers:
            say(f"small files: {n} writer(s)...")
            result["small_files"].append(small_files(store, n, args, payloads))
        say("metadata: list and stat...")
        result["metadata"] = metadata(store, args, payloads)
        for p in args.parallel:
            say(f"sequential: {p} x {fmt_size(args.big_size)}...")
            result["sequential"].append(sequential(workdir, p, args))
        return result
    finally:
        with uninterrupted():  # a second Ctrl-C must not stop the clean-up
            say("cleaning up...")
            if store is not None:
                store.close()  # an open folder would linger on NFS
            shutil.rmtree(workdir, ignore_errors=True)
            if os.path.exists(workdir):
                print(f"WARNING: could not remove all of {workdir}", file=sys.stderr)


def total_errors(result):
    parts = [lvl[op]["errors"] for lvl in result["small_files"] for op in ("save", "load")]
    parts += [m["errors"] for m in result["metadata"].values()] + [s["errors"] for s in result["sequential"]]
    return sum(parts)


# -- output --------------------------------------------------------------------

def figures(result):
    """[(name, value, 'lower' or 'higher' is better)] of every figure of a run."""
    out = []
    for lvl in result["small_files"]:
        w = lvl["writers"]
        for op, rate in (("save", "saves/s"), ("load", "loads/s")):
            out += [(f"{op} {p} ms @ {w} writer{'s' * (w > 1)}", lvl[op][f"{p}_ms"], "lower") for p in ("p50", "p95", "p99")]
            out.append((f"{rate} @ {w} writer{'s' * (w > 1)}", lvl[op]["ops_per_s"], "higher"))
    for op, m in result["metadata"].items():
        out += [(f"{op} {p} ms", m[f"{p}_ms"], "lower") for p in ("p50", "p95", "p99")]
        out.append((f"{op}s/s", m["ops_per_s"], "higher"))
    for s in result["sequential"]:
        out += [(f"{d} MiB/s @ {s['parallel']} parallel", s[f"{d}_mib_s"], "higher") for d in ("write", "read")]
    return out


def fmt_size(n):
    return f"{n / MiB:g} MiB" if n >= MiB else f"{n / 1024:g} KiB" if n >= 1024 else f"{n} B"


def report(run):
    s, h, r = run["settings"], run["host"], run["results"]
    m = h["mount"] or {}
    lo, hi = s["file_size"]
    length = f"{s['count']} per thread" if s["count"] else f"{s['duration']:g} s"
    lines = [f"efs_bench {run['time']}  {h['hostname']}: {h['cpus']} CPUs, {h['memory_gib']} GiB, "
             f"kernel {h['kernel']}",
             f"dir {s['dir']} on {m.get('mount_point')}: {m.get('fstype')} {m.get('source')}",
             f"  options {m.get('mount_options')} {m.get('super_options')}",
             f"files {fmt_size(lo)}-{fmt_size(hi)}, {length} per level, history {s['history_versions']}"
             + (f", INJECTED DELAY {s['inject_delay_ms']} ms per save/read" if s["inject_delay_ms"] else ""),
             "", "Small files: Store.save (lock, temp, fsync, history, rename, fsync dir) then Store.read, ms",
             f"{'writers':>7} {'save p50':>9} {'p95':>8} {'p99':>8} {'saves/s':>9}  "
             f"{'load p50':>9} {'p95':>8} {'p99':>8} {'loads/s':>9} {'errors':>6} {'cpu':>5}"]
    for lvl in r["small_files"]:
        sv, ld = lvl["save"], lvl["load"]
        lines.append(f"{lvl['writers']:>7} {fmt(sv['p50_ms'], '.3f'):>9} {fmt(sv['p95_ms'], '.3f'):>8} "
                     f"{fmt(sv['p99_ms'], '.3f'):>8} "
                     f"{sv['ops_per_s']:>9.1f}  {fmt(ld['p50_ms'], '.3f'):>9} {fmt(ld['p95_ms'], '.3f'):>8} "
                     f"{fmt(ld['p99_ms'], '.3f'):>8} {ld['ops_per_s']:>9.1f} {sv['errors'] + ld['errors']:>6} "
                     f"{lvl['bench_cpu']:>5.2f}")
    meta = r["metadata"]
    lines += ["", f"Metadata: Store.list of a home of {s['list_files']} files, os.stat of one file, "
              f"{s['meta_threads']} thread(s), ms",
              f"{'op':>7} {'p50':>9} {'p95':>8} {'p99':>8} {'ops/s':>9} {'errors':>6} {'cpu':>5}"]
    for op, v in meta.items():
        lines.append(f"{op:>7} {fmt(v['p50_ms'], '.3f'):>9} {fmt(v['p95_ms'], '.3f'):>8} "
                     f"{fmt(v['p99_ms'], '.3f'):>8} "
                     f"{v['ops_per_s']:>9.1f} {v['errors']:>6} {v['bench_cpu']:>5.2f}")
    lines += ["", f"Sequential: {fmt_size(s['big_size'])} per thread, fsync at the end of each file, "
              "MiB/s of all threads",
              f"{'threads':>7} {'write':>9} {'read':>9} {'errors':>6}  cache before reads"]
    for q in r["sequential"]:
        note = "dropped (drop_caches)" if q["cache_drop"] == "drop_caches" else \
            "fadvise only (not root): reads may be partly cached"
        lines.append(f"{q['parallel']:>7} {q['write_mib_s']:>9.1f} {q['read_mib_s']:>9.1f} {q['errors']:>6}  {note}")
    busy = [lvl["writers"] for lvl in r["small_files"] if lvl["bench_cpu"] > CPU_WARNING]
    if busy:
        lines.append(f"\nnote: the benchmark used > {CPU_WARNING:.0%} of a core at {busy} writers: "
                     "its own CPU (the GIL) may be part of those latencies")
    lines.append(f"\nerrors: {run['errors']}" + (" (see errors_by_kind in the JSON)" if run["errors"] else ""))
    return "\n".join(lines)


def load_run(path):
    try:
        with open(path) as f:
            run = json.load(f)
    except (OSError, ValueError) as e:
        refuse(f"cannot read {path}: {e}")
    if not isinstance(run, dict) or run.get("tool") != "efs_bench" or "results" not in run:
        refuse(f"{path} is not an efs_bench output (no \"tool\": \"efs_bench\")")
    if run.get("format") != FORMAT:
        refuse(f"{path} has format {run.get('format')}, this version reads {FORMAT}")
    return run


def compare(before_path, after_path):
    before, after = load_run(before_path), load_run(after_path)
    a, b = {n: (v, d) for n, v, d in figures(before["results"])}, {n: (v, d) for n, v, d in figures(after["results"])}
    names = list(a) + [n for n in b if n not in a]
    lines = [f"before: {before_path}  {before['time']}  {before['host']['hostname']}  "
             f"{(before['host']['mount'] or {}).get('fstype')}",
             f"after:  {after_path}  {after['time']}  {after['host']['hostname']}  "
             f"{(after['host']['mount'] or {}).get('fstype')}"]
    differ = [k for k in before["settings"] if k not in ("dir", "json") and
              before["settings"].get(k) != after["settings"].get(k)]
    if differ:
        lines.append("note: settings differ: " + ", ".join(
            f"{k} {before['settings'][k]} -> {after['settings'].get(k)}" for k in differ))
    lines += ["", f"{'figure':<30} {'before':>11} {'after':>11} {'after/before':>12}  {'better is':<9} verdict"]
    for name in names:
        old, new = a.get(name, (None, None))[0], b.get(name, (None, None))[0]
        direction = (a.get(name) or b.get(name))[1]
        if old and new is not None:
            ratio = new / old
            good = ratio < 1 if direction == "lower" else ratio > 1
            verdict = "same" if 0.95 <= ratio <= 1.05 else "better" if good else "WORSE"
            shown = f"{ratio:.2f}x"
        else:
            shown, verdict = "n/a", "only in one run" if old is None or new is None else "n/a"
        lines.append(f"{name:<30} {fmt(old, '.3f'):>11} {fmt(new, '.3f'):>11} {shown:>12}  {direction:<9} {verdict}")
    lines.append(f"\nerrors: before {before['errors']}, after {after['errors']}")
    return "\n".join(lines)


# -- command line ------------------------------------------------------------------

def parse_size(text):
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmg]?)i?b?\s*", text.lower())
    if not m:
        raise argparse.ArgumentTypeError(f"expected a size such as 4096, 4K or 64M, not {text!r}")
    return int(float(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2)])


def size_range(text):
    low, _, high = text.partition("-")
    low, high = parse_size(low), parse_size(high or low)
    if not 32 <= low <= high:
        raise argparse.ArgumentTypeError(f"expected MIN-MAX with 32 <= MIN <= MAX, not {text!r}")
    return low, high



def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m loadtest.efs_bench", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", help="an empty folder on the file system to measure (e.g. on the EFS mount)")
    p.add_argument("--allow-nonempty", action="store_true", help="run in a non-empty --dir anyway")
    p.add_argument("--writers", type=int_list, default=[1, 8, 32], help="parallel writers per level (1,8,32)")
    p.add_argument("--file-size", type=size_range, default=(2048, 4096), help="small file size MIN-MAX (2K-4K)")
    p.add_argument("--duration", type=float, default=10.0, help="seconds per level and metadata operation (10)")
    p.add_argument("--count", type=int, default=0, help="operations per thread instead of --duration")
    p.add_argument("--list-files", type=int, default=50, help="files in the listed home (50)")
    p.add_argument("--meta-threads", type=int, default=1, help="threads doing list / stat (1)")
    p.add_argument("--history-versions", type=int, default=int(config.BY_NAME["HISTORY_VERSIONS"].default),
                   help="versions kept per file, as HISTORY_VERSIONS (server default)")
    p.add_argument("--big-size", type=parse_size, default=64 * MiB, help="sequential file size per thread (64M)")
    p.add_argument("--parallel", type=int_list, default=[1, 4], help="sequential threads per level (1,4)")
    p.add_argument("--no-drop-caches", action="store_true",
                   help="never drop this host's whole page cache, even as root (fadvise only)")
    p.add_argument("--inject-delay-ms", type=int, default=0,
                   help="rehearsal/test aid: each save and read waits N ms more (Limits.delay_ms)")
    p.add_argument("--json", help="output file (efs-bench-<host>-<timestamp>.json here)")
    p.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two outputs, run nothing")
    args = p.parse_args(argv)
    if not args.compare and not args.dir:
        p.error("--dir is required (or --compare BEFORE AFTER)")
    if args.count < 0 or args.duration <= 0 or args.list_files < 1 or args.meta_threads < 1 \
            or args.big_size < 1 or args.inject_delay_ms < 0 or args.history_versions < 1:
        p.error("counts, sizes and durations must be positive")
    return args


def refuse(text):
    """Stop with exit status 2: the command was not run as asked."""
    print("efs_bench: " + text, file=sys.stderr)
    sys.exit(2)


def main(argv=None):
    args = parse_args(argv)
    if args.compare:
        print(compare(*args.compare))
        return 0
    args.dir = os.path.abspath(args.dir)
    if not os.path.isdir(args.dir):
        refuse(f"{args.dir} is not a folder (mount the file system and make one)")
    present = os.listdir(args.dir)
    if present and not args.allow_nonempty:
        refuse(f"refusing to run in {args.dir}: it is not empty ({len(present)} entries). "
                         "Use an empty folder, or --allow-nonempty to work in a fresh subfolder of it.")
    st = os.statvfs(args.dir)
    need = max(args.parallel) * args.big_size + (max(args.writers) * (args.history_versions + 2)
                                                  + args.list_files) * args.file_size[1]
    if st.f_bavail * st.f_frsize < need * 1.2:
        refuse(f"{args.dir} has {fmt_size(st.f_bavail * st.f_frsize)} free, "
                         f"needs about {fmt_size(need)}")
    started = datetime.datetime.now().astimezone()
    host = host_info(args.dir)
    clean_up_on_sigterm()
    try:
        results = benchmark(args)
    except KeyboardInterrupt:
        say("interrupted; everything created was removed")
        return 130
    settings = {k: v for k, v in vars(args).items() if k not in ("compare", "json")}
    run = {"tool": "efs_bench", "format": FORMAT, "time": started.isoformat(timespec="seconds"),
           "finished": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "settings": settings, "host": host, "results": results, "errors": total_errors(results)}
    out = args.json or f"efs-bench-{host['hostname']}-{started.strftime('%Y%m%d-%H%M%S')}.json"
    write_json(out, run)
    print(report(run))
    print(f"\nwritten to {out}")
    return 1 if run["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
