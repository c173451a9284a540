"""Jupyter Server as the peer the benchmarks compare PyClassroom with: the
same client library (aiohttp) and the same recorder, its own API.

- `install`: Jupyter Server and ipykernel, pinned, in a scratch virtualenv
  made on demand and cached (~/.cache/pyclassroom-peer/<versions>): never
  a dependency of the project.
- `JupyterServer`: `python -m jupyter_server` on 127.0.0.1, a free port, a
  random token and a scratch root folder, as a subprocess.
- `ContentsStudent`: a student editing one file through the contents API,
  as `client.Student` does through ours: PUT the new text, GET it back,
  and only the very text saved counts as a success.
- `KernelStudent`: a student with a kernel of their own running a program
  over the channels WebSocket, as `run_client.RunClient.checked_run` does
  through /ws/run: from execute_request to the first `stream` message.
"""
import asyncio
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import time
import uuid

import aiohttp
import psutil
import requests

from . import peer_venv
from .cli import Aborted, uninterrupted
from .client import CheckFailed, check_status, file_text, json_object

JUPYTER_SERVER = "2.21.1"
IPYKERNEL = "7.4.0"
START_TIMEOUT = 60.0


def venv_python(folder):
    return os.path.join(folder, "bin", "python")


def cached(cache=None):
    """(the peer's Python, whether it is installed) in `cache` (default peer_venv.CACHE)."""
    folder = os.path.join(cache or peer_venv.CACHE, f"jupyter_server-{JUPYTER_SERVER}-ipykernel-{IPYKERNEL}")
    return venv_python(folder), peer_venv.installed(folder)


def install(cache=None):
    """The Python of a virtualenv holding the pinned Jupyter Server and
    ipykernel, made the first time (a few minutes) and reused after, in
    `cache` (default peer_venv.CACHE)."""
    python, _ = cached(cache)
    peer_venv.make(os.path.dirname(os.path.dirname(python)),
                   [f"jupyter_server=={JUPYTER_SERVER}", f"ipykernel=={IPYKERNEL}"], "Jupyter Server")
    return python


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterServer:
    """Jupyter Server on loopback with a token, serving `root` (a scratch
    folder, like PyClassroom's STORAGE_ROOT); `stop` ends it."""

    def __init__(self, python, root):
        self.python, self.root = python, root
        self.token = secrets.token_hex(24)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None
        self.log = os.path.join(root, "..", f"jupyter-{self.port}.log")

    def start(self):
        """Start it and wait until it answers; whatever goes wrong on the
        way (a Ctrl-C too), it is stopped again."""
        # Its configuration, runtime and data folders beside the root, not in ~/.jupyter.
        env = {**os.environ, **{f"JUPYTER_{what.upper()}_DIR": os.path.join(self.root, "..", f"jupyter-{what}")
                                for what in ("config", "runtime", "data")}}
        try:
            with open(self.log, "w") as log:
                self.proc = subprocess.Popen(
                    [self.python, "-m", "jupyter_server", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
                     f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
                     f"--ServerApp.root_dir={self.root}", f"--IdentityProvider.token={self.token}",
                     "--ServerApp.log_level=WARN"],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=env)
            deadline = time.monotonic() + START_TIMEOUT
            while time.monotonic() < deadline and self.proc.poll() is None:
                with contextlib.suppress(requests.RequestException):
                    if requests.get(self.url + "/api/status", headers=self.headers(), timeout=2).status_code == 200:
                        return self
                time.sleep(0.2)
            with open(self.log) as f:
                raise Aborted("Jupyter Server did not start:\n" + f.read()[-3000:])
        except BaseException:
            self.stop()
            raise

    def headers(self):
        return {"Authorization": f"token {self.token}"}

    def stop(self):
        """SIGTERM (it shuts its kernels down), then SIGKILL after 15 s; any
        kernel still alive after that (each has a session of its own) is
        killed too. Uninterrupted, like the harness's cleanup."""
        if self.proc is None:
            return
        with uninterrupted():
            kernels = []
            with contextlib.suppress(psutil.Error):
                kernels = psutil.Process(self.proc.pid).children(recursive=True)
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait()
            _, alive = psutil.wait_procs(kernels, timeout=5)
            for kernel in alive:
                with contextlib.suppress(psutil.Error):
                    kernel.kill()
            psutil.wait_procs(alive, timeout=5)


# -- files: the contents API -----------------------------------------------------------

def browser(server, timeout):
    """One student's browser: one keep-alive connection (as VirtualUser)."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1), headers=server.headers(),
                                 timeout=aiohttp.ClientTimeout(total=timeout))


class ContentsStudent:
    """One student editing one file (`path` in the root) with the contents
    API; save/load/resync as `client.Student`'s."""

    def __init__(self, http, server, path, name):
        self.http, self.username = http, name
        self.url = f"{server.url}/api/contents/{path}"
        self.saved = None
        self.count = 0

    async def save(self):
        """PUT new text (the same texts and sizes as client.Student's)."""
        self.count += 1
        text = file_text(self.username, self.count)
        async with self.http.put(self.url, json={"type": "file", "format": "text", "content": text}) as resp:
            body = await resp.read()
        if resp.status not in (200, 201):  # 201: created
            raise CheckFailed(f"http_{resp.status}")
        if json_object(body).get("type") != "file":
            raise CheckFailed("bad_body", repr(body[:200]))
        self.saved = text

    async def load(self):
        """GET it back; a success is exactly what we saved last."""
        async with self.http.get(self.url, params={"type": "file", "format": "text", "content": "1"}) as resp:
            body = await resp.read()
        check_status(resp.status, 200)
        if json_object(body).get("content") != self.saved:
            raise CheckFailed("content_mismatch")

    async def resync(self):
        pass  # every save replaces the file whatever it held: nothing to catch up on


# -- runs: a kernel per student ------------------------------------------------------------

def kernels_session(server, timeout):
    """One session for many kernels' sockets (as run_client.ws_session)."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), headers=server.headers(),
                                 timeout=aiohttp.ClientTimeout(total=None, connect=timeout))


class KernelStudent:
    """A student with a kernel of their own and its channels WebSocket."""

    def __init__(self, http, server, timeout):
        self.http, self.server, self.timeout = http, server, timeout
        self.kernel = None
        self.ws = None
        self.session = uuid.uuid4().hex

    async def open(self):
        async with self.http.post(self.server.url + "/api/kernels", json={"name": "python3"}) as resp:
            check_status(resp.status, 201)
            self.kernel = (await resp.json())["id"]
        self.ws = await self._connect()
        # The kernel is ready once it answers: what the first run would wait for otherwise.
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            msg_id = await self._send("kernel_info_request", {})
            try:
                await self._until(msg_id, "kernel_info_reply", min(2.0, deadline - time.monotonic()))
                return self
            except asyncio.TimeoutError:
                if time.monotonic() > deadline:
                    raise

    def _connect(self):
        url = self.server.url.replace("http://", "ws://") + f"/api/kernels/{self.kernel}/channels"
        return asyncio.wait_for(self.http.ws_connect(url, params={"session_id": self.session}, max_msg_size=0),
                                self.timeout)

    async def close(self):
        with contextlib.suppress(Exception):
            if self.ws is not None:
                await self.ws.close()
        with contextlib.suppress(Exception):
            if self.kernel:
                async with self.http.delete(f"{self.server.url}/api/kernels/{self.kernel}"):
                    pass

    async def _send(self, msg_type, content, channel="shell"):
        msg_id = uuid.uuid4().hex
        await self.ws.send_str(json.dumps({
            "header": {"msg_id": msg_id, "msg_type": msg_type, "session": self.session, "username": "bench",
                       "version": "5.3", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
            "parent_header": {}, "metadata": {}, "content": content, "channel": channel, "buffers": []}))
        return msg_id

    async def _receive(self, timeout):
        msg = await self.ws.receive(timeout=max(0.01, timeout))
        if msg.type != aiohttp.WSMsgType.TEXT:
            raise CheckFailed("socket_" + msg.type.name.lower())
        return json.loads(msg.data)

    async def _until(self, msg_id, msg_type, timeout):
        deadline = time.monotonic() + timeout
        while True:
            message = await self._receive(deadline - time.monotonic())
            if message.get("parent_header", {}).get("msg_id") == msg_id and message["msg_type"] == msg_type:
                return message

    async def first_output(self, code, expect):
        """Execute `code`; seconds from the request to the first `stream`
        message, once the kernel says it went well and the output was
        `expect` (CheckFailed otherwise)."""
        started = time.perf_counter()
        deadline = time.monotonic() + self.timeout
        msg_id = await self._send("execute_request", {"code": code, "silent": False, "store_history": False,
                                                      "user_expressions": {}, "allow_stdin": False,
                                                      "stop_on_error": True})
        first, out, reply, idle = None, [], None, False
        while reply is None or not idle:
            message = await self._receive(deadline - time.monotonic())
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = message["msg_type"]
            if kind == "stream":
                if first is None:
                    first = time.perf_counter() - started
                if message["content"].get("name") != "stdout":
                    raise CheckFailed("stderr_output", message["content"].get("text", "")[:200])
                out.append(message["content"].get("text", ""))
            elif kind == "execute_reply":
                reply = message["content"]
            elif kind == "status" and message["content"].get("execution_state") == "idle":
                idle = True
            elif kind == "error":
                raise CheckFailed("exit_error", message["content"].get("evalue", ""))
        if reply.get("status") != "ok":
            raise CheckFailed(f"exit_{reply.get('status')}")
        if first is None:
            raise CheckFailed("no_output")
        if expect not in "".join(out):
            raise CheckFailed("wrong_output", repr("".join(out)[-200:]))
        return first

    async def recover(self, error):
        """After a failed run the socket may be unusable: open a new one."""
        with contextlib.suppress(Exception):
            await self.ws.close()
        with contextlib.suppress(Exception):
            self.ws = await self._connect()

