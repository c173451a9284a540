"""A WebSocket client for /ws/run that speaks the protocol the way the
browser does (docs/run-protocol.md), for the tests, the benchmarks and
the load test; and the checked runs the tools time with it.

    async with RunClient(url, cookies) as rc:         # one IDE tab
        exit_message = await rc.run("hello.py", inputs=["Ada"])

`cookies` are the session's cookies exactly as the server set them
(`requests`' `cookies.get_dict()`, or `VirtualUser.cookies()`). Many
sockets may share one aiohttp session (`http=`, e.g. `ws_session()`).
"""
import asyncio
import contextlib
import json
import secrets
import time
from collections import Counter

import aiohttp

from .client import REQUEST_TIMEOUT, CheckFailed, error_kind

ECHO_PROGRAM = 'print("ready")\nx = input()\nprint("got", x)\n'
HOG_PROGRAM = "while True:\n    pass\n"


def ws_session(timeout=REQUEST_TIMEOUT):
    """One cookie-less session for many IDE sockets (each sends its own cookies)."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar(), connector=aiohttp.TCPConnector(limit=0),
                                 timeout=aiohttp.ClientTimeout(total=None, connect=timeout))


async def open_ides(url, users, stack, timeout=REQUEST_TIMEOUT):
    """One IDE socket per VirtualUser, all opened at once as a class opening
    the IDE does, on one shared session; they close together on `stack`'s
    exit, which kills their sandboxes. Returns (the sockets that opened, in
    order; Counter of the failures' kinds)."""
    http = await stack.enter_async_context(ws_session(timeout))
    sockets = [RunClient(url, user.cookies(), http, timeout, index=i, keep=False) for i, user in enumerate(users)]
    opened, failed = [], Counter()
    for sock, outcome in zip(sockets, await asyncio.gather(*(s.open() for s in sockets), return_exceptions=True)):
        if isinstance(outcome, Exception):
            failed[error_kind(outcome)] += 1
        else:
            opened.append(sock)

    async def close_all():
        await asyncio.gather(*(s.close() for s in opened), return_exceptions=True)

    stack.push_async_callback(close_all)
    return opened, failed


class RunClient:
    """One open IDE: a WebSocket on /ws/run with a student's session.
    `keep=True` keeps every message (`messages`, `output()`), as the tests
    read them; the tools, which run for long, keep none."""

    def __init__(self, url, cookies, http=None, timeout=REQUEST_TIMEOUT, index=0, keep=True):
        self.base_url = url.rstrip("/")
        self.url = self.base_url.replace("http://", "ws://", 1) + "/ws/run"
        self.cookies = cookies
        self.http = http  # shared; None: one of our own, closed with the socket
        self._own_http = None
        self.timeout = timeout
        self.index = index  # which student, in the tokens of checked runs
        self.messages = [] if keep else None
        self.ws = None
        self.runs = 0
        self.sent = 0  # messages sent: the next one's id (each message has one, unique on its socket)
        self.queued = 0  # `queued` messages seen (the server's line of runs was full)
        self.stale = 0   # late `not_running` answers to input sent as a program ended, ignored

    async def __aenter__(self):
        return await self.open()

    async def __aexit__(self, *exc):
        await self.close()

    async def open(self):
        if self.http is None:
            self.http = self._own_http = ws_session(self.timeout)
        # The cookies exactly as the server set them (aiohttp would re-quote them).
        cookie = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        self.ws = await asyncio.wait_for(self.http.ws_connect(
            self.url, origin=self.base_url, headers={"Cookie": cookie}, max_msg_size=0, autoping=True,
            timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=5.0)), self.timeout)
        return self

    async def close(self):
        """Close the socket (kept, for its close_code) and our own session, if any."""
        if self.ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.ws.close(), 10)
        if self._own_http is not None:
            await self._own_http.close()
            self.http = self._own_http = None

    async def reopen(self):
        """A fresh IDE after a broken socket or a run that never ended."""
        await self.close()
        await self.open()

    async def send(self, **message):
        """Send a message, with an id of its own as the browser's have
        (answers name it as `re`); returns the id."""
        self.sent += 1
        message.setdefault("id", str(self.sent))
        await asyncio.wait_for(self.ws.send_str(json.dumps(message)), self.timeout)
        return message["id"]

    async def receive(self, timeout=None):
        """The next message (a dict); CheckFailed when the socket closes or
        sends what is not a JSON object, asyncio.TimeoutError after `timeout` s."""
        timeout = self.timeout if timeout is None else timeout
        if timeout <= 0:
            raise asyncio.TimeoutError()
        msg = await self.ws.receive(timeout=timeout)
        if msg.type != aiohttp.WSMsgType.TEXT:
            raise CheckFailed("socket_" + msg.type.name.lower(), f"{msg.data!r} {msg.extra!r}")
        try:
            message = json.loads(msg.data)
        except ValueError:
            raise CheckFailed("bad_message", repr(msg.data[:200])) from None
        if not isinstance(message, dict):
            raise CheckFailed("bad_message", repr(msg.data[:200]))
        if self.messages is not None:
            self.messages.append(message)
        return message

    async def until(self, kind, timeout=30, on=None):
        """Receive until a message of type `kind`; `on(message)` sees each one."""
        deadline = time.monotonic() + timeout
        while True:
            message = await self.receive(max(0.1, deadline - time.monotonic()))
            if on:
                await on(message)
            if message["type"] == kind:
                return message

    def output(self, stream=None):
        return "".join(m["data"] for m in self.messages
                       if m["type"] == "output" and (stream is None or m["stream"] == stream))

    async def run(self, path, inputs=(), timeout=30, **extra):
        """Run `path`, answer each prompt with the next of `inputs`; return the exit message."""
        await self.send(type="run", path=path, **extra)
        pending = list(inputs)

        async def answer(message):
            if message["type"] == "output" and pending and not message["data"].endswith("\n"):
                await self.send(type="stdin", data=pending.pop(0) + "\r")

        return await self.until("exit", timeout, on=answer)

    # -- the tools' checked runs -------------------------------------------------------

    async def echo_run(self, path):
        """Run ECHO_PROGRAM (saved as `path`) once and check it: it prints
        "ready", gets a token unique to this run as its input and must print
        it back (see checked_run)."""
        self.runs += 1
        token = f"s{self.index}r{self.runs}x{secrets.token_hex(3)}"
        return await self.checked_run(path, f"got {token}", reply=token)

    async def checked_run(self, path, expect, reply=None):
        """Run `path` (saved) once; with `reply`, type it as a line once the
        program printed "ready". The run must print `expect` on stdout,
        nothing on stderr, and end with reason "ok". Returns seconds from
        sending `run` to: {"started", "first" (output frame), "exit"}, and
        "tail": from the last output frame to `exit`. Raises
        CheckFailed(kind) for anything but the expected run."""
        started = time.perf_counter()
        deadline = time.monotonic() + self.timeout
        await self.send(type="run", path=path, cols=80, rows=24)
        first = begun = last = None
        answered = reply is None
        out, err = [], []
        while True:
            message = await self.receive(deadline - time.monotonic())
            kind = message.get("type")
            if kind == "output":
                last = time.perf_counter() - started
                if first is None:
                    first = last
                (out if message.get("stream") == "stdout" else err).append(message.get("data", ""))
                if not answered and "ready" in "".join(out):
                    answered = True
                    await self.send(type="stdin", data=reply + "\r")
            elif kind == "exit":
                total = time.perf_counter() - started
                break
            elif kind == "error":
                if message.get("error") == "not_running":
                    self.stale += 1
                    continue
                raise CheckFailed("refused_" + str(message.get("error")), message.get("message", ""))
            elif kind == "queued":
                self.queued += 1
            elif kind == "started":
                begun = time.perf_counter() - started
            elif kind not in ("image", "input"):
                raise CheckFailed("unexpected_" + str(kind))
        reason = message.get("reason")
        if reason != "ok":
            raise CheckFailed(f"exit_{reason}", message.get("message", ""))
        if first is None:
            raise CheckFailed("no_output")
        if begun is None or begun > first:
            raise CheckFailed("output_before_started")
        if "".join(err):
            raise CheckFailed("stderr_output", "".join(err)[:200])
        if expect not in "".join(out):
            raise CheckFailed("wrong_output", repr("".join(out)[-200:]))
        return {"started": begun, "first": first, "exit": total, "tail": total - last}

    async def recover(self, error):
        """After a failed checked run: a timeout or a broken socket leaves
        the IDE unusable, so kill what may run and start a fresh one."""
        if not isinstance(error, CheckFailed) or error.kind.startswith(("socket_", "bad_")):
            with contextlib.suppress(Exception):
                await self.send(type="kill")
            with contextlib.suppress(Exception):
                await self.reopen()

    async def start_hog(self, path):
        """Run HOG_PROGRAM (saved as `path`); returns once the server says `started`."""
        deadline = time.monotonic() + self.timeout
        await self.send(type="run", path=path)
        while True:
            message = await self.receive(deadline - time.monotonic())
            kind = message.get("type")
            if kind == "started":
                return
            if kind == "error":
                raise CheckFailed("refused_" + str(message.get("error")), message.get("message", ""))
            if kind == "exit":
                raise CheckFailed("exit_" + str(message.get("reason")), message.get("message", ""))
            if kind == "queued":
                self.queued += 1

    async def stop_hog(self):
        """Kill the running loop; returns the reason it ended with (None if
        its exit never came)."""
        with contextlib.suppress(Exception):
            await self.send(type="kill")
        deadline = time.monotonic() + self.timeout
        with contextlib.suppress(Exception):
            while True:
                message = await self.receive(deadline - time.monotonic())
                if message.get("type") == "exit":
                    return message.get("reason")
        return None
