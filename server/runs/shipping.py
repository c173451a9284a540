"""A runner's copy of a student's home, kept in step with the home: for a
sandbox whose `copy` is not None (a runner's: sandbox/remote.py; the
runner's side: runner/homes.py). A runner never reaches the storage.

Before a run, `send` puts into the copy each file of the home that changed
since the copy was given it (by size and time, as the home's tree lists
them), read through the files service a piece at a time, and deletes from
it what the home no longer holds; the program then runs on the copy.
After the run, `take_back` saves into the home what the run wrote, as any
save is saved (the quota, the names, a version of what it replaced), and
deletes what it deleted (into the trash). The home wins: a file saved in
the home while the program ran keeps that version, and the student is
told. Whatever is not taken back is sent again before the next run, so the
copy never drifts from the home for long.
"""
import base64
import binascii
import logging
from typing import TYPE_CHECKING, Any

from ..errors import Refused
from ..files import paths
from ..files.area import Area
from .sandbox import HomeCopy, SandboxError

if TYPE_CHECKING:  # the files service is the worker's; only its type is needed here
    from ..files.service import Files
    from ..files.store import Meta

log = logging.getLogger(__name__)

PIECE = 1 << 20  # bytes of a file per piece (base64 makes 1.4 MiB of a runner's 4 MiB message)
BATCH = (4 << 20) // 3  # bytes of pieces (in base64) per put: with one piece past it, within a runner's 4 MiB
TOLD = 4  # sentences about files not taken back, at most, per run


async def send(files: "Files", username: str, copy: HomeCopy, max_file: int,
               tree: "tuple[list[Meta], bool] | None" = None) -> None:
    """Bring the copy in step with the home (`tree`: its tree as Files.tree
    lists it since the run lock was taken, or None to list it here):
    Refused when the storage fails, SandboxError when the runner does. A
    tree cut short (too many entries) deletes nothing from the copy: what
    it left out may still be in the home."""
    home = Area.home(username)
    await copy.adopt()
    entries, truncated = tree if tree is not None else await files.tree(username, home, ())
    present = _files(entries)
    deleted = [] if truncated else [path for path in copy.held if path not in present]
    for path in deleted:
        del copy.held[path]
    pieces: list[dict[str, Any]] = []
    size = 0
    for path, listed in present.items():
        held = copy.held.get(path)
        if held is not None and held[:2] == listed:
            continue
        try:
            data, etag, meta = await files.read(username, home, paths.parse(path), limit=max_file)
        except Refused as e:
            if e.status == 503:  # the storage, not this file
                raise
            data, etag, meta = None, None, {}
        if data is None or etag is None:  # gone meanwhile, larger than a file may be, not a file
            if path in copy.held:
                deleted.append(path)
                del copy.held[path]
            continue
        for piece in as_pieces(path, data, etag):
            pieces.append(piece)
            size += len(piece["data"])
            if size >= BATCH:
                await copy.put(pieces, deleted)
                pieces, deleted, size = [], [], 0
        copy.held[path] = (meta["size"], meta["modified"], etag)
    if pieces or deleted:
        await copy.put(pieces, deleted)


def as_pieces(path: str, data: bytes, etag: str) -> list[dict[str, Any]]:
    """The file `path` as a put sends it: a piece at a time, the last with its etag."""
    return [{"path": path, "data": base64.b64encode(data[at:at + PIECE]).decode(), "at": at,
             **({"etag": etag} if at + PIECE >= len(data) else {})} for at in range(0, max(len(data), 1), PIECE)]


async def take_back(files: "Files", username: str, copy: HomeCopy, max_file: int, room: int | None = None) -> list[str]:
    """Keep in the home what the last run changed in the copy: sentences
    for the student about what could not be kept. SandboxError when the
    runner is lost or says what makes no sense. `room`: what the home's
    quota left as the run started (nothing of the run is in the home
    yet), or None to measure it; either way each file is saved as any
    save is, within the quota."""
    home = Area.home(username)
    if room is None:
        room = await files.room_left(username, home) or 0
    told: list[str] = []
    data, path = bytearray(), ""
    async for said in copy.collect(room, max_file):
        if said["type"] == "file":
            try:
                piece = base64.b64decode(said["data"], validate=True)
                if said["at"] == 0:
                    data, path = bytearray(), paths.shown(said["path"])
                if said["at"] != len(data) or said["path"] != path or len(data) + len(piece) > max_file:
                    raise ValueError("a piece that does not follow the one before")
            except (KeyError, TypeError, ValueError, binascii.Error) as e:
                raise SandboxError(f"the runner sent a file that makes no sense ({e})") from None
            data += piece
            if "etag" in said:
                told += await _keep(files, username, copy, path, bytes(data))
                data = bytearray()
        else:
            told += await _deleted(files, username, copy, said.get("deleted") or [])
            for path, why in said.get("skipped") or []:
                if not isinstance(path, str):
                    raise SandboxError("the runner sent a skipped file that makes no sense")
                copy.held[path] = None  # the home's version goes back at the next run
                told.append(SKIPPED.get(why, SKIPPED["changed"]).format(path=paths.shown(path),
                                                                       mb=max_file >> 20))
    if len(told) > TOLD:
        told = told[:TOLD] + [f"And {len(told) - TOLD} more of your program's files were not kept."]
    return told


SKIPPED = {
    "too_big": "Your program wrote '{path}', which is larger than a file may be ({mb} MB): it was not kept.",
    "no_room": "Your program wrote '{path}', but your files have no room left for it, so it was not kept. "
               "Delete files you do not need, then run it again.",
    "changed": "Your program wrote '{path}', but it could not be read back, so it was not kept. Run it again.",
}


async def _keep(files: "Files", username: str, copy: HomeCopy, path: str, data: bytes) -> list[str]:
    """Save a file the run wrote, unless the home's changed meanwhile."""
    held = copy.held.get(path)
    try:
        meta = await files.save(username, Area.home(username), paths.parse(path, allow_root=False), data,
                                held[2] if held else None)
    except Refused as e:
        copy.held[path] = None
        if e.code == "conflict":
            return [f"Your program changed '{path}', but it was also saved while the program ran: "
                    "the saved version is kept."]
        return [f"Your program wrote '{path}', but it could not be kept: {e.message}"]
    copy.held[path] = (meta["size"], meta["modified"], meta["etag"])
    return []


async def _deleted(files: "Files", username: str, copy: HomeCopy, deleted: list[Any]) -> list[str]:
    """Delete (into the trash) the files the run deleted, unless changed meanwhile."""
    home, told = Area.home(username), []
    held = {path: copy.held.pop(path, None) for path in deleted if isinstance(path, str)}
    if not any(held.values()):
        return []
    now = await _files_in(files, username)
    for path, was in held.items():
        if was is None or path not in now:
            continue
        if now[path] != was[:2]:
            copy.held[path] = None
            told.append(f"Your program deleted '{path}', but it was saved while the program ran: "
                        "the saved version is kept.")
            continue
        try:
            await files.delete(username, home, paths.parse(path, allow_root=False))
        except Refused as e:
            copy.held[path] = None
            told.append(f"Your program deleted '{path}', but it could not be deleted here: {e.message}")
    return told


async def _files_in(files: "Files", username: str) -> dict[str, tuple[int, float]]:
    """path -> (size, modified) of each file of the home, as its tree lists them."""
    entries, _ = await files.tree(username, Area.home(username), ())
    return _files(entries)


def _files(entries: "list[Meta]") -> dict[str, tuple[int, float]]:
    """path -> (size, modified) of each file among a tree's entries."""
    return {entry["path"]: (entry["size"], entry["modified"]) for entry in entries if entry["kind"] == "file"}
