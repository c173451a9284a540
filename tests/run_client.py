"""A WebSocket client for /ws/run that speaks the protocol the way the
browser does, for tests and benchmarks."""
import asyncio
import json

import aiohttp


class RunClient:
    def __init__(self, url, cookies):
        self.url = url.replace("http://", "ws://") + "/ws/run"
        self.cookies = cookies
        self.messages = []

    async def __aenter__(self):
        self.http = aiohttp.ClientSession()
        # The cookies exactly as the server set them (aiohttp would re-quote them).
        cookie = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        origin = self.url.replace("ws://", "http://").rsplit("/ws/", 1)[0]
        self.ws = await self.http.ws_connect(self.url, origin=origin, headers={"Cookie": cookie},
                                             max_msg_size=0)
        return self

    async def __aexit__(self, *exc):
        await self.ws.close()
        await self.http.close()

    async def send(self, **message):
        await self.ws.send_str(json.dumps(message))

    async def receive(self, timeout=30):
        msg = await self.ws.receive(timeout=timeout)
        if msg.type != aiohttp.WSMsgType.TEXT:
            raise ConnectionError(f"socket {msg.type.name}: {msg.data!r} {msg.extra!r}")
        message = json.loads(msg.data)
        self.messages.append(message)
        return message

    async def until(self, kind, timeout=30, on=None):
        """Receive until a message of type `kind`; `on(message)` sees each one."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            message = await self.receive(max(0.1, deadline - loop.time()))
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
