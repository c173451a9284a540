"""The assist service: completions, signatures, descriptions and
diagnostics for the text a user is editing, computed by the pool of assist
processes (pool.py; each runs child/).

The text comes from the browser (it need not be saved); the modules it
imports come from the user's area, read by the files service
(`Files.python_modules`: the user's place in the file threads, no links
followed, nothing that blocks) and handed to the process, which never
opens the area itself.
A user has one request of each kind in line at a time: a newer one
replaces it (pool.py).
"""
import asyncio
import hashlib
import logging

from ..config import Config
from ..errors import Refused
from ..files import paths
from ..files.service import Files
from .jail import Jail, JailError
from .pool import Pool

log = logging.getLogger(__name__)

OPS = ("complete", "signatures", "describe", "check")
SOURCE_CHARS = 256 << 10
EDITED = "__main__.py"  # what the edited file is called in the process: it runs as __main__
EMPTY: dict[str, dict[str, object]] = {"complete": {"completions": [], "prefix": 0}, "signatures": {"signatures": []},
         "describe": {"name": "", "signature": "", "doc": ""}, "check": {"diagnostics": []}}


class Assist:
    def __init__(self, pool: Pool | None, files: Files, jail: Jail | None = None, off: str = ""):
        self.pool = pool
        self.files = files
        self.jail = jail  # the processes' walls; its folder is removed at close
        self.off = off  # why editing help is off, in words ("" when on or turned off)

    @classmethod
    async def start(cls, cfg: Config, files: Files) -> "Assist":
        """The service with its pool of ASSIST_PROCESSES processes started,
        each walled in (jail.py); none when 0, or when the walls cannot be
        built here (then editing help is off, and says why)."""
        if not cfg.ASSIST_PROCESSES:
            return cls(None, files)
        jail = Jail(cfg.SANDBOX_PYTHON, cfg.ASSIST_MEMORY_MB)
        try:
            await asyncio.to_thread(jail.prepare)
        except (JailError, OSError) as e:
            await asyncio.to_thread(jail.close)
            log.error("editing help is off: it cannot be walled in here (%s)", e)
            return cls(None, files, off=f"Editing help is off: it cannot be walled in on this server ({e}).")

        def command(n):
            return jail.worker(cfg.SANDBOX_PYTHON)

        pool = Pool(cfg.ASSIST_PROCESSES, cfg.ASSIST_QUEUE_MAX, cfg.ASSIST_TIMEOUT, command, {}, jail.uid, jail)
        pool.start()
        return cls(pool, files, jail)

    def describe(self) -> dict:
        """For /api/status: on or off (and why), and the processes' walls."""
        if self.pool is None:
            return {"on": False, "why": self.off or "Editing help is turned off (ASSIST_PROCESSES=0)."}
        walls = self.jail.describe() if self.jail else {}
        return {"on": True, "processes": self.pool.size, "ready": self.pool.ready, **walls}

    async def help(self, user: dict, op: str, area_spec: str, path: str, source: str,
                   line: int | None = None, column: int | None = None, name: str | None = None) -> dict:
        if self.pool is None:
            raise Refused(503, "assist_off", self.off or "Editing help is turned off on this server.")
        parts = paths.parse(path, allow_root=False)
        if not parts[-1].lower().endswith((".py", ".pyw")):
            raise Refused(400, "not_python", "Editing help is for Python files (.py).")
        area = await self.files.area(user, area_spec, write=False)
        source = source.replace("\r\n", "\n").replace("\r", "\n")
        request: dict[str, object] = {"op": op, "source": source}
        if op != "check":
            lines = source.split("\n")
            if line is None or column is None or not 1 <= line <= len(lines) \
                    or not 0 <= column <= len(lines[line - 1]):
                raise Refused(400, "bad_position", "The line and column are not a place in the text.")
            if op == "describe" and not (name and name.isidentifier()):
                raise Refused(400, "bad_name", "The name to describe must be a Python name.")
            folder = parts[:-1]
            files = await self.files.python_modules(user["username"], area, folder, parts[-1], source)
            project = hashlib.sha256(f"{area.key}\0{'/'.join(folder)}".encode("utf-8", "surrogatepass"))
            request.update(path=EDITED, project=project.hexdigest()[:32], files=files, line=line,
                           column=column, name=name)
        answer = await self.pool.ask((user["username"], op), request)
        return answer.get("result") or EMPTY[op]  # the process logged why it could not help

    async def close(self):
        if self.pool is not None:
            await self.pool.close()
        if self.jail is not None:
            await asyncio.to_thread(self.jail.close)
