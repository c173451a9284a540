"""The real server as a subprocess, and a client that speaks to it the way
the browser does (session cookie plus XSRF header)."""
import os
import re
import signal
import subprocess
import sys
import threading
import time

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ADMIN_PASSWORD = "admin-test-password"
COOKIE_SECRET = "test-cookie-secret-" + "x" * 32
SERVING_RE = re.compile(r"serving (http://\S+) with (\d+) (?:worker )?process(?:es)? \(pids? ([\d, ]+)\)")


class ServerProcess:
    def __init__(self, processes=1, database_url="", data_dir=None, env=None):
        self.processes = processes
        self.env = dict(os.environ)
        self.env.update({
            "TORNADO_PROCESSES": str(processes), "PORT": "0", "HOST": "127.0.0.1",
            "DATABASE_URL": database_url, "DATA_DIR": data_dir, "ADMIN_PASSWORD": ADMIN_PASSWORD,
            "COOKIE_SECRET": COOKIE_SECRET, "LOG_LEVEL": "INFO", "PYTHONUNBUFFERED": "1",
        })
        self.env.update({k: str(v) for k, v in (env or {}).items()})
        self.proc = None
        self.url = None
        self.pids = []
        self.lines = []
        self._serving = threading.Event()

    def start(self, timeout=60):
        self.proc = subprocess.Popen([sys.executable, "-m", "server"], cwd=ROOT, env=self.env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._read, daemon=True).start()
        if not self._serving.wait(timeout) or self.proc.poll() is not None:
            self.proc.kill()
            raise RuntimeError("server did not start:\n" + self.output())
        return self

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)
            m = SERVING_RE.search(line)
            if m and not self._serving.is_set():
                self.url = m.group(1)
                self.pids = [int(p) for p in m.group(3).split(",")]
                self._serving.set()

    def output(self):
        return "".join(self.lines)

    def wait_for_line(self, pattern, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines:
                if re.search(pattern, line):
                    return line
            time.sleep(0.05)
        raise AssertionError(f"no line matching {pattern!r} in:\n{self.output()}")

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, timeout=30):
        """SIGTERM and wait; returns the exit code."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else None

    def client(self):
        return Client(self.url)


class Client:
    """A browser-like API client: keeps cookies, echoes the XSRF cookie."""

    def __init__(self, url):
        self.url = url
        self.http = requests.Session()

    def xsrf(self):
        if "_xsrf" not in self.http.cookies:
            self.http.get(self.url + "/api/me", timeout=10)
        return self.http.cookies.get("_xsrf")

    def request(self, method, path, xsrf=True, **kwargs):
        headers = kwargs.pop("headers", {})
        if xsrf and method not in ("GET", "HEAD"):
            headers.setdefault("X-XSRFToken", self.xsrf())
        kwargs.setdefault("timeout", 30)
        return self.http.request(method, self.url + path, headers=headers, **kwargs)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)

    def login(self, username, password):
        return self.post("/api/login", json={"username": username, "password": password})

    def login_ok(self, username, password):
        r = self.login(username, password)
        assert r.status_code == 200, r.text
        return r.json()
