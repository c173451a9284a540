"""A runner as it runs on a host of its own, and what a program that
escaped its sandbox there would find, looked for with a shell in the
runner's namespaces (nsenter): no secret in its environment, its files or
its process table; no PostgreSQL, no storage, no metadata endpoint; the
web tier alone answers.

The host is made here: a network namespace joined to this one by a veth
pair (the runner's only way out), a mount namespace where the server's
DATA_DIR (database, secrets, storage) is an empty tmpfs, and a process
namespace of its own. Needs root and iproute2.
"""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from urllib.parse import urlsplit

import pytest

from loadtest.harness import RunnerProcess
from tests.runs_support import LIMITS, run, save, student

SECRET = "a-runner-secret-for-the-host-test-" + "z" * 12
TIMEOUT = 60

if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nsenter"):
    pytest.skip("a runner's host of its own needs root, iproute2 and util-linux", allow_module_level=True)


def sh(*argv):
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=TIMEOUT, check=True).stdout


@pytest.fixture
def host():
    """(namespace, the web tier's address there, the runner's)."""
    n = (os.getpid() * 7 + int(time.monotonic() * 1000)) % 250 + 1
    name, outer, inner = f"pyc-runner-{n}", f"pycvh{n}", f"pycvr{n}"
    sh("ip", "netns", "add", name)
    try:
        sh("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
        sh("ip", "link", "set", inner, "netns", name)
        sh("ip", "addr", "add", f"10.213.{n}.1/30", "dev", outer)
        sh("ip", "link", "set", outer, "up")
        for command in (["ip", "addr", "add", f"10.213.{n}.2/30", "dev", inner], ["ip", "link", "set", inner, "up"],
                        ["ip", "link", "set", "lo", "up"]):
            sh("ip", "netns", "exec", name, *command)
        yield name, f"10.213.{n}.1", f"10.213.{n}.2"
    finally:
        subprocess.run(["ip", "link", "del", outer], capture_output=True, timeout=TIMEOUT)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=TIMEOUT)


def test_a_program_escaped_on_a_runner_host_finds_no_secret_database_storage_or_metadata(start_server, host):
    namespace, web_address, runner_address = host
    server = start_server(HOST="0.0.0.0", SANDBOX="remote", RUNNER_SECRET=SECRET, **LIMITS)
    port = urlsplit(server.url).port
    folder = tempfile.mkdtemp(prefix="pyclassroom-runner-host-")  # students' uids walk into it (not tmp_path)
    os.chmod(folder, 0o755)
    data_dir = server.env["DATA_DIR"]
    wrap = ["ip", "netns", "exec", namespace, "unshare", "--mount", "--pid", "--fork", "--mount-proc",
            "--propagation", "private", "--kill-child=SIGTERM", "sh", "-c",
            f"mount -t tmpfs -o size=1m,mode=0700 none {data_dir} && exec \"$0\" \"$@\""]
    runner = RunnerProcess("r1", SECRET, folder, {**LIMITS, "RUNNER_HOST": "0.0.0.0", "RUNNER_PORT": "8790",
                                                       "RUNNER_SERVER": f"http://{web_address}:{port}"}, wrap=wrap)
    runner.start()
    try:
        client = student(server, "ada")
        save(client, "data.txt", "ada's data")
        exit_, rc = run(server, client, "print(open('data.txt').read(), 'on the runner host')\n")
        assert exit_["reason"] == "ok" and "ada's data on the runner host" in rc.output(), (exit_, rc.messages)
        from tests.helpers import sql
        # It registered the address it is reached at (its own side of the pair).
        assert sql(server.env["DATABASE_URL"], "SELECT address FROM runners") == [(f"ws://{runner_address}:8790",)]

        # A shell where the runner is: its network, its files, its processes.
        [pid] = sh("pgrep", "-P", str(runner.proc.pid)).split()  # the runner, under unshare
        inside = ["nsenter", "-t", pid, "-n", "-m", "-p", "--"]
        secrets = [server.env["COOKIE_SECRET"], SECRET, urlsplit(server.env["DATABASE_URL"]).password or "",
                   server.env["DATABASE_URL"]]
        found = sh(*inside, "sh", "-c", f"ls -A {data_dir}; echo ---; cat /proc/[0-9]*/environ 2>/dev/null "
                                        "| tr '\\0' '\\n'; echo ---; ps -eo args")
        listing, environ, processes = found.split("---\n")
        assert listing.strip() == "", listing  # the server's data, database, secrets and storage: not there
        for secret in filter(None, secrets):
            assert secret not in environ and secret not in processes
        assert "postgres" not in processes and "server.runner" in processes
        assert not re.search(r"python3? -m server\b(?!\.runner)", processes), processes

        database = urlsplit(server.env["DATABASE_URL"])
        probe = ("import socket, sys\n"
                 "args = sys.argv[1:]\n"
                 "for host, port in zip(args[::2], args[1::2]):\n"
                 "    try:\n"
                 "        socket.create_connection((host, int(port)), timeout=2).close(); print(host, port, 'open')\n"
                 "    except OSError as e:\n"
                 "        print(host, port, 'closed', type(e).__name__)\n")
        reached = sh(*inside, "/usr/bin/python3", "-c", probe, database.hostname or "127.0.0.1",
                     str(database.port or 5432), web_address, str(database.port or 5432), "169.254.169.254", "80",
                     web_address, str(port))
        lines = dict((" ".join(line.split()[:2]), line.split()[2]) for line in reached.splitlines())
        assert lines == {f"{database.hostname or '127.0.0.1'} {database.port or 5432}": "closed",
                         f"{web_address} {database.port or 5432}": "closed",
                         "169.254.169.254 80": "closed", f"{web_address} {port}": "open"}, reached
    finally:
        # unshare ignores SIGTERM while it waits: the runner (its namespace's first process) is told.
        for pid in subprocess.run(["pgrep", "-P", str(runner.proc.pid)], capture_output=True, text=True).stdout.split():
            os.kill(int(pid), signal.SIGTERM)
        runner.stop()
        shutil.rmtree(folder, ignore_errors=True)
