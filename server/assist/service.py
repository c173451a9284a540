"""The assist service: completions, signatures, descriptions and
diagnostics for the text a user is editing, computed by the pool of assist
processes (pool.py, engine.py).

The text comes from the browser (it need not be saved); the modules it
imports come from the user's area, read here through the store (files
service: the user's place in the file threads, no links followed, nothing
that blocks) and handed to the process, which never opens the area itself.
A user has one request of each kind in line at a time: a newer one
replaces it (pool.py).
"""
import asyncio
import hashlib
import logging
import re

from ..config import Config
from ..errors import Refused
from ..files import paths
from ..files.service import Files
from ..files.store import as_text
from .jail import Jail, JailError
from .pool import Pool

log = logging.getLogger(__name__)

OPS = ("complete", "signatures", "describe", "check")
SOURCE_CHARS = 256 << 10
MODULE_BYTES = 128 << 10  # a larger module beside the file is left out
MODULES_READ = 16  # modules read per request, following imports
MODULES_LISTED = 200  # module names offered for `import` from the file's folder
MODULE_FILE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\.py")
IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+([A-Za-z_]\w*)|import[ \t]+([^#;\n]+))", re.M)
EDITED = "__main__.py"  # what the edited file is called in the process: it runs as __main__
EMPTY = {"complete": {"completions": [], "prefix": 0}, "signatures": {"signatures": []},
         "describe": {"name": "", "signature": "", "doc": ""}, "check": {"diagnostics": []}}


def imported(text):
    """The top-level module names `text` imports (absolute imports only)."""
    names = set()
    for m in IMPORT_LINE.finditer(text):
        if m.group(1):
            names.add(m.group(1))
            continue
        for part in m.group(2).split(","):
            word = part.strip().split(".")[0].split(" ")[0]
            if word.isidentifier():
                names.add(word)
    return names


def modules(store, area, folder, edited, source):
    """{file name: text} of the modules beside the edited file: the text of
    those it imports (and those import, up to MODULES_READ), empty for the
    others, so that `import he` completes their names. Blocking."""
    try:
        entries = store.list(area, folder)
    except Refused:
        return {}
    names = sorted(e["name"] for e in entries
                   if e["kind"] == "file" and MODULE_FILE.fullmatch(e["name"]) and e["name"] != edited)
    files = dict.fromkeys(names[:MODULES_LISTED], "")
    todo, seen = imported(source), set()
    while todo and len(seen) < MODULES_READ:
        name = todo.pop() + ".py"
        if name in seen or name not in files:
            continue
        seen.add(name)
        try:
            data, _, _ = store.read(area, folder + (name,), MODULE_BYTES)
        except Refused:  # a link, a FIFO, gone: not read
            continue
        text = as_text(data) if data is not None else None
        if text:
            files[name] = text
            todo |= imported(text) - {n[:-3] for n in seen}
    return files


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
        return {"on": True, "processes": self.pool.size, "ready": self.pool.ready, **self.jail.describe()}

    async def help(self, user: dict, op: str, area_spec: str, path: str, source: str,
                   line: int | None = None, column: int | None = None, name: str | None = None) -> dict:
        if self.pool is None:
            raise Refused(503, "assist_off", self.off or "Editing help is turned off on this server.")
        parts = paths.parse(path, allow_root=False)
        if not parts[-1].lower().endswith((".py", ".pyw")):
            raise Refused(400, "not_python", "Editing help is for Python files (.py).")
        area = await self.files.area(user, area_spec, write=False)
        source = source.replace("\r\n", "\n").replace("\r", "\n")
        request = {"op": op, "source": source}
        if op != "check":
            lines = source.split("\n")
            if line is None or column is None or not 1 <= line <= len(lines) \
                    or not 0 <= column <= len(lines[line - 1]):
                raise Refused(400, "bad_position", "The line and column are not a place in the text.")
            if op == "describe" and not (name and name.isidentifier()):
                raise Refused(400, "bad_name", "The name to describe must be a Python name.")
            folder = parts[:-1]
            files = await self.files.run(user["username"], "assist", modules, self.files.store, area, folder,
                                         parts[-1], source)
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
