"""What one run is, whoever asks for it: a `RunSpec`, made once from the
asker's message and handed whole to the job, the run and the launcher.

It says who runs (the user), what program (the file, a course folder's
copy or a snapshot's), with which `Limits`, input, arguments and
terminal, and in which `Mode`: a program run from the IDE, under the
debugger, serving the calls of an attempt's tests, or the checker's tests. It holds only
plain values, so it crosses to another host as JSON (`to_dict`,
`from_dict`); what only this worker may hold (the session, the run lock,
the sandbox it takes, the socket) travels beside it (job.RunRequest).
The launcher's `g` frame is built from it here, and nowhere else
(`to_frame`).
"""
from __future__ import annotations

import base64
import dataclasses
import enum
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

from .protocol import frame
from .sandbox.launch import TESTING_SOURCE, DEBUGGING_SOURCE, IMPORT_GUARD_SOURCE, ProgramLimits


class Settings(Protocol):
    """The worker's settings a run's limits are read from (config.Config,
    frozen: so each is a read-only property here)."""

    @property
    def RUN_WALL_SECONDS(self) -> int: ...

    @property
    def RUN_IDLE_SECONDS(self) -> int: ...

    @property
    def RUN_DEBUG_IDLE_SECONDS(self) -> int: ...

    @property
    def RUN_CPU_SECONDS(self) -> int: ...

    @property
    def RUN_MEMORY_MB(self) -> int: ...

    @property
    def RUN_OUTPUT_KB(self) -> int: ...

    @property
    def RUN_FILE_MB(self) -> int: ...

    @property
    def RUN_PROCESSES(self) -> int: ...

    @property
    def RUN_OPEN_FILES(self) -> int: ...

    @property
    def QUOTA_BYTES(self) -> int: ...


@dataclass(frozen=True)
class Limits:
    """Every limit a run has. The server enforces wall, idle, debug idle,
    CPU (the whole run's) and output itself (run.py) and file_mb as the
    write budget of a scratch home (job.py); memory, processes, open files
    and the per-process CPU and file size are the kernel's: the launcher
    sets them on the program at `go` (`program`), never above those its
    sandbox started with (whose cgroup was sized for them)."""
    wall_seconds: int
    idle_seconds: int
    debug_idle_seconds: int
    cpu_seconds: int
    memory_mb: int
    output_kb: int
    file_mb: int
    processes: int
    open_files: int
    quota_bytes: int  # what the user's home may hold: a run's writes count against it

    @classmethod
    def of(cls, cfg: Settings) -> Limits:
        """The worker's limits for a run (RUN_* settings)."""
        return cls(wall_seconds=cfg.RUN_WALL_SECONDS, idle_seconds=cfg.RUN_IDLE_SECONDS,
                   debug_idle_seconds=cfg.RUN_DEBUG_IDLE_SECONDS, cpu_seconds=cfg.RUN_CPU_SECONDS,
                   memory_mb=cfg.RUN_MEMORY_MB, output_kb=cfg.RUN_OUTPUT_KB, file_mb=cfg.RUN_FILE_MB,
                   processes=cfg.RUN_PROCESSES, open_files=cfg.RUN_OPEN_FILES, quota_bytes=cfg.QUOTA_BYTES)

    def program(self) -> ProgramLimits:
        """The kernel's limits of each of the program's processes."""
        return ProgramLimits(self.cpu_seconds, self.memory_mb << 20, self.processes, self.file_mb << 20,
                             self.open_files)

    def lasting(self, seconds: int) -> Limits:
        """These limits, with `seconds` of wall time and of idle time (an attempt's runs)."""
        return dataclasses.replace(self, wall_seconds=seconds, idle_seconds=seconds)


class Mode(enum.Enum):
    RUN = "run"  # the program, as the IDE's Run (or an attempt's output-check run) starts it
    DEBUG = "debug"  # the program under the debugger (debugging.py), which talks on the channel
    SERVE = "serve"  # the student's module serves the calls of an attempt's tests on the channel (child/testing.py)
    TEST = "test"  # an attempt's checks (the teacher's tests among them), in a checker sandbox (child/testing.py)


@dataclass(frozen=True)
class DebugOptions:
    """The debugger's breakpoints ({path: lines}, as pairs) and watches, as the IDE set them (validated)."""
    breakpoints: tuple[tuple[str, tuple[int, ...]], ...] = ()
    watches: tuple[str, ...] = ()

    @classmethod
    def of(cls, breakpoints: Mapping[str, list[int]], watches: list[str]) -> DebugOptions:
        return cls(tuple((path, tuple(lines)) for path, lines in breakpoints.items()), tuple(watches))

    def to_dict(self) -> dict[str, Any]:
        return {"breakpoints": {path: list(lines) for path, lines in self.breakpoints}, "watches": list(self.watches)}


@dataclass(frozen=True)
class RunSpec:
    """One run, as plain values (see the module's docstring)."""
    user_id: int
    username: str
    parts: tuple[str, ...]  # the file, in the user's home, in `course`, or among `files`
    limits: Limits
    mode: Mode = Mode.RUN
    course: str | None = None  # the key of a course folder the user may read: its file runs as a read-only copy
    files: tuple[tuple[str, bytes], ...] | None = None  # (name, bytes), `parts[-1]` one: a fresh copy of these runs
    args: tuple[str, ...] = ()
    stdin: str | None = None  # typed in as the program starts, then the end of input
    cols: int = 80
    rows: int = 24
    etag: str | None = None  # the version the asker saw: nothing else may run
    echo: bool = True  # False: the terminal does not echo what is typed (an output check compares the output)
    nice: int = 0  # 0..10 more: an attempt's runs go below interactive ones
    forbid: tuple[str, ...] = ()  # modules the program may not import: importing one ends it (import_guard.py)
    debug: DebugOptions | None = None  # Mode.DEBUG's breakpoints and watches
    tests: Mapping[str, Any] | None = field(default=None, hash=False)  # Mode.TEST's options (JSON), for testing.py

    @property
    def path(self) -> str:
        """The program's path as the launcher takes it: in its copy, or in the home."""
        return self.parts[-1] if self.files is not None or self.course is not None else "/".join(self.parts)

    def files_dict(self) -> dict[str, bytes] | None:
        return dict(self.files) if self.files is not None else None

    # -- the launcher's frame ---------------------------------------------------------

    def to_frame(self, channel: bool, copy: Mapping[str, bytes] | None = None) -> bytes:
        """The `g` frame that starts this run in a ready launcher, and what is
        typed at once. `channel`: the run reads the program's channel (fd 3);
        `copy`: the files it runs a copy of (a course folder's, read on this
        side; else the spec's own `files`)."""
        copy = copy if copy is not None else self.files_dict()
        go: dict[str, Any]
        if self.mode in (Mode.SERVE, Mode.TEST):
            options = {"file": self.parts[-1]} if self.mode is Mode.SERVE else dict(self.tests or {})
            go = {"mode": self.mode.value, "code": TESTING_SOURCE, "options": options, "cols": self.cols,
                  "rows": self.rows}
            if copy is not None:
                go.update(copy=_encoded(copy), path=self.parts[-1], writable=True)
            typed = frame(b"e")  # nobody types in an attempt: input() ends
        else:
            go = {"path": self.path, "args": list(self.args), "cols": self.cols, "rows": self.rows}
            if self.mode is Mode.DEBUG:
                go["debug"] = {"code": DEBUGGING_SOURCE, **(self.debug or DebugOptions()).to_dict()}
            if copy is not None:
                go.update(copy=_encoded(copy), writable=self.files is not None)
            if self.etag:
                go["etag"] = self.etag
            typed = b"" if self.stdin is None else \
                frame(b"d", self.stdin.encode("utf-8", "replace")) + frame(b"e")
        go["limits"] = dataclasses.asdict(self.limits.program())
        if channel:
            go["channel"] = True
        if self.forbid:
            go["forbid"] = {"code": IMPORT_GUARD_SOURCE, "modules": list(self.forbid)}
        if not self.echo:
            go["echo"] = False
        if self.nice:
            go["nice"] = self.nice
        return frame(b"g", json.dumps(go).encode()) + typed

    # -- as JSON ------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (bytes as base64), for `from_dict` on another host."""
        return {"user_id": self.user_id, "username": self.username, "parts": list(self.parts),
                "limits": dataclasses.asdict(self.limits), "mode": self.mode.value, "course": self.course,
                "files": None if self.files is None else [[n, base64.b64encode(d).decode()] for n, d in self.files],
                "args": list(self.args), "stdin": self.stdin, "cols": self.cols, "rows": self.rows,
                "etag": self.etag, "echo": self.echo, "nice": self.nice, "forbid": list(self.forbid),
                "debug": None if self.debug is None else self.debug.to_dict(),
                "tests": None if self.tests is None else dict(self.tests)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunSpec:
        """The spec `to_dict` gave (KeyError, TypeError or ValueError if it is not one)."""
        files = d["files"]
        debug = d["debug"]
        return cls(user_id=int(d["user_id"]), username=str(d["username"]), parts=tuple(map(str, d["parts"])),
                   limits=Limits(**{f.name: int(d["limits"][f.name]) for f in dataclasses.fields(Limits)}),
                   mode=Mode(d["mode"]), course=d["course"],
                   files=None if files is None else tuple((str(n), base64.b64decode(b, validate=True))
                                                          for n, b in files),
                   args=tuple(map(str, d["args"])), stdin=d["stdin"], cols=int(d["cols"]), rows=int(d["rows"]),
                   etag=d["etag"], echo=bool(d["echo"]), nice=int(d["nice"]), forbid=tuple(map(str, d["forbid"])),
                   debug=None if debug is None else DebugOptions.of(debug["breakpoints"], debug["watches"]),
                   tests=d["tests"])


def _encoded(copy: Mapping[str, bytes]) -> dict[str, str]:
    """A copy's files as the go frame carries them."""
    return {name: base64.b64encode(data).decode() for name, data in copy.items()}
