"""Debian's nginx running the repository's deploy/nginx.conf, moved to free
ports, in front of whatever instances a test starts."""
import contextlib
import os
import shutil
import socket
import subprocess
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NGINX_CONF = os.path.join(ROOT, "deploy", "nginx.conf")


def nginx_binary():
    path = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if path is None:
        pytest.fail("nginx is not installed: apt-get install nginx (scripts/install-system-deps)")
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def nginx_in_front(prefix, upstream_ports):
    """nginx with the repository's configuration, its documented defaults
    (listen 8080, instances 8881 and 8882) replaced by free ports; yields
    the port clients use."""
    assert len(upstream_ports) == 2
    port = free_port()
    with open(NGINX_CONF) as f:
        text = f.read()
    for default, actual in (("listen 8080;", f"listen 127.0.0.1:{port};"),
                            ("127.0.0.1:8881", f"127.0.0.1:{upstream_ports[0]}"),
                            ("127.0.0.1:8882", f"127.0.0.1:{upstream_ports[1]}")):
        assert text.count(default) == 1, default
        text = text.replace(default, actual)
    conf = os.path.join(prefix, "test-nginx.conf")
    with open(conf, "w") as f:
        f.write(text)
    nginx = subprocess.Popen([nginx_binary(), "-p", prefix + "/", "-c", conf, "-e", "stderr", "-g", "daemon off;"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if nginx.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("nginx did not start: " + nginx.stdout.read().decode(errors="replace"))
                time.sleep(0.05)
        yield port
    finally:
        nginx.terminate()
        try:
            nginx.wait(timeout=15)
        except subprocess.TimeoutExpired:
            nginx.kill()
            nginx.wait()
