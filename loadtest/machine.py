"""This machine, as the tools report it: what it is (CPUs, memory, model),
what its processes used while a figure was measured (the server's CPU, the
Docker daemon's, all CPUs'), how fast it starts a bare interpreter, and
the open-files limit a crowd of connections needs. Standard library only.
"""
import os
import platform
import re
import resource
import statistics
import subprocess
import time

from .cli import Aborted


def machine():
    info = {"cpus": os.cpu_count(), "usable_cpus": len(os.sched_getaffinity(0)),
            "python": platform.python_version(), "platform": platform.platform()}
    with open("/proc/meminfo") as f:
        kib = int(re.search(r"MemTotal:\s+(\d+) kB", f.read()).group(1))
    info["memory_gib"] = round(kib / 1024 ** 2, 1)
    with open("/proc/cpuinfo") as f:
        model = re.search(r"model name\s*:\s*(.+)", f.read())
    info["cpu_model"] = model.group(1).strip() if model else "unknown"
    return info


def describe(info):
    """The machine line of every report."""
    return (f"machine: {info['cpus']} CPUs ({info['usable_cpus']} usable, {info['cpu_model']}), "
            f"{info['memory_gib']} GiB memory, Python {info['python']}, {info['platform']}")


def raise_file_limit():
    """Each simulated student holds a connection, on our side and on the
    server's (which inherits this limit): allow as many open files as we may."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


# -- CPU used meanwhile --------------------------------------------------------------

def process_cpu(pids):
    """CPU seconds (user + system) used so far by the processes `pids`
    themselves (not their children: the sandboxes are not counted)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return total


def file_processes(worker_pids):
    """Pids of the file processes (server/files/child/) of the workers
    `worker_pids`: the server's own work, like the workers'."""
    import psutil
    found = []
    for pid in worker_pids:
        try:
            children = psutil.Process(pid).children()
        except psutil.Error:
            continue
        for child in children:
            try:
                if "server.files.child" in child.cmdline():
                    found.append(child.pid)
            except psutil.Error:
                pass
    return found


def tree_cpu(pids):
    """CPU seconds (user + system) of `pids` and every process below them
    (a server's workers and their editing-help processes), as far as they
    still exist."""
    import psutil
    total = 0.0
    for pid in pids:
        try:
            root = psutil.Process(pid)
            family = [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
        for proc in family:
            try:
                times = proc.cpu_times()
                total += times.user + times.system
            except psutil.Error:
                pass  # gone meanwhile
    return total


def machine_busy():
    """(busy, total) CPU ticks of the whole machine so far, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_share(before, after):
    """Share of all the machine's CPUs that was busy between two readings."""
    busy, total = after[0] - before[0], after[1] - before[1]
    return round(busy / total, 3) if total else None


def daemon_pids():
    """Pids of the Docker daemon's long-lived processes (dockerd, containerd)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as f:
                    if f.read().strip() in ("dockerd", "containerd"):
                        pids.append(int(entry))
            except OSError:
                pass
    return pids


class CpuWatch:
    """CPU used over a stretch by the server (its workers and their file
    processes), the Docker daemon and the whole machine (shares: of one
    core, of one core, of all cores)."""

    def __init__(self, server_pids):
        self.server_pids = list(server_pids) + file_processes(server_pids)
        self.daemon_pids = daemon_pids()

    def start(self):
        self.wall = time.perf_counter()
        self.server = process_cpu(self.server_pids)
        self.daemon = process_cpu(self.daemon_pids)
        self.machine = machine_busy()
        return self

    def stop(self):
        wall = time.perf_counter() - self.wall
        return {"server_cpu": round((process_cpu(self.server_pids) - self.server) / wall, 3)
                if self.server_pids else None,
                "docker_daemon_cpu": round((process_cpu(self.daemon_pids) - self.daemon) / wall, 3)
                if self.daemon_pids else None,
                "machine_busy": busy_share(self.machine, machine_busy())}


# -- the bare interpreter ------------------------------------------------------------

BARE_SAMPLES = 30


def bare_interpreter(python, samples=BARE_SAMPLES, timeout=30):
    """Milliseconds from starting `python -c "print(1)"` to its first byte
    on stdout, `samples` times: {p50_ms, p95_ms, samples}."""
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        proc = subprocess.Popen([python, "-c", "print(1)"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL)
        try:
            first = os.read(proc.stdout.fileno(), 1)
            elapsed = time.perf_counter() - started
            proc.stdout.close()
            proc.wait(timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if first != b"1":
            raise Aborted(f"{python} -c 'print(1)' did not print 1")
        times.append(elapsed * 1000)
    times.sort()
    return {"samples": samples, "p50_ms": round(statistics.median(times), 2),
            "p95_ms": round(times[min(len(times) - 1, int(round(0.95 * len(times))) - 1)], 2)}
