"""Changes to files, told to every open IDE that shows them: a save from
another tab or computer, a teacher's push, a program's run, a delete or a
move reach the student's other tabs on every worker and instance within
a moment, without any page polling a file.

The worker that made a change announces it on the PostgreSQL channel
'file_changes' (notify.py): the area's key and, per path, what happened,
the new version and who did it ("you", "teacher", "program"). It gathers
its changes over GATHER_SECONDS (20 ms) first, one per path (the newest), so a
student saving as fast as they can costs at most one notification per
area in each gathering; more than PER_NOTIFICATION paths become one
"reload" of the area.

Every worker listens and queues what it hears on the IDE sockets of its
own that watch the area (a student's home, their class's course folder),
again one change per path, at most PENDING_MAX per socket before they
collapse into a "reload": a slow browser costs a bounded queue. When
notifications may have been missed (the listener's gap), every socket is
told to reload what it shows.
"""
import asyncio
import json
import logging
from collections import defaultdict
from typing import Any, Awaitable, Callable

from .. import notify
from ..db import Pool

# A change as the IDEs are told of it: {"kind", "path", "by", ["etag", "to", "kept"]}.
Change = dict[str, str]
Send = Callable[[dict[str, Any]], Awaitable[None]]

log = logging.getLogger(__name__)

CHANNEL = "file_changes"
GATHER_SECONDS = 0.02
PER_NOTIFICATION = 40
PENDING_MAX = 64
KINDS = ("save", "delete", "move", "mkdir", "program")


class Watch:
    """One IDE socket: the areas it shows ({area key: the page's name for
    it}) and `send(message)`, awaitable."""

    def __init__(self, names: dict[str, str], send: Send) -> None:
        self.names = names
        self.send = send
        self.pending: dict[tuple[str, str], Change] = {}  # (area name, path) -> change
        self.reload: set[str] = set()  # area names to reload whole
        self.task: asyncio.Task[None] | None = None

    def queue(self, name: str, changes: list[Change]) -> None:
        if name in self.reload:
            return
        for change in changes:
            self.pending[(name, change["path"])] = change
        if len(self.pending) > PENDING_MAX:
            self.reload_all(name)

    def reload_all(self, name: str) -> None:
        self.reload.add(name)
        self.pending = {k: v for k, v in self.pending.items() if k[0] != name}

    def messages(self) -> list[dict[str, Any]]:
        """What to send now; the queue is empty after."""
        out: list[dict[str, Any]] = [{"type": "files", "area": name, "reload": True} for name in sorted(self.reload)]
        by_area: defaultdict[str, list[Change]] = defaultdict(list)
        for (name, _), change in self.pending.items():
            by_area[name].append(change)
        out += [{"type": "files", "area": name, "changes": changes} for name, changes in by_area.items()]
        self.pending, self.reload = {}, set()
        return out


class FileChanges:
    def __init__(self, pool: Pool, listener: notify.Listener) -> None:
        self.pool = pool
        self.outgoing: dict[str, dict[str, Change] | None] = {}  # area key -> {path: change}, or None: reload it
        self.sending: asyncio.Task[None] | None = None
        self.watches: defaultdict[str, set[Watch]] = defaultdict(set)  # area key -> {Watch}
        listener.listen(CHANNEL, self._heard)
        listener.on_gap(self._gap)

    # -- announcing -------------------------------------------------------------

    def announce(self, area_key: str, kind: str, path: str = "", *, etag: str | None = None,
                 to: str | None = None, by: str = "you", kept: str | None = None) -> None:
        """`kind` happened to `path` in the area: told to every IDE that shows
        it; `kept`: a push replaced the owner's own text, now this version in
        the file's history."""
        change = {"kind": kind, "path": path, "by": by}
        if kept is not None:
            change["kept"] = kept
        if etag:
            change["etag"] = etag
        if to is not None:
            change["to"] = to
        changes = self.outgoing.setdefault(area_key, {})
        if changes is not None:
            changes[path] = change
            if len(changes) > PER_NOTIFICATION:
                self.outgoing[area_key] = None
        if self.sending is None:
            self.sending = asyncio.ensure_future(self._send_soon())

    async def _send_soon(self) -> None:
        await asyncio.sleep(GATHER_SECONDS)
        outgoing, self.outgoing, self.sending = self.outgoing, {}, None
        for key, changes in outgoing.items():
            payload = {"a": key, "reload": True} if changes is None else {"a": key, "c": list(changes.values())}
            text = json.dumps(payload)
            if len(text.encode()) > notify.MAX_PAYLOAD:
                text = json.dumps({"a": key, "reload": True})
            try:
                await notify.send(self.pool, CHANNEL, text)
            except Exception as e:  # the open pages catch up when they get the focus back
                log.warning("a file change could not be announced (%r)", e)

    # -- hearing ----------------------------------------------------------------

    def watch(self, names: dict[str, str], send: Send) -> Watch:
        """Tell `send` of the changes to the areas in `names` from now on."""
        watch = Watch(dict(names), send)
        for key in names:
            self.watches[key].add(watch)
        return watch

    def also(self, watch: Watch, key: str, name: str) -> None:
        """`watch` shows one more area."""
        watch.names[key] = name
        self.watches[key].add(watch)

    def unwatch(self, watch: Watch) -> None:
        for key in watch.names:
            self.watches[key].discard(watch)
            if not self.watches[key]:
                del self.watches[key]
        if watch.task:
            watch.task.cancel()

    def _heard(self, payload: str) -> None:
        try:
            message = json.loads(payload)
            key = message["a"]
            changes = None if message.get("reload") else [c for c in message["c"] if c.get("kind") in KINDS]
        except (ValueError, KeyError, TypeError):
            log.warning("a malformed file change was ignored")
            return
        for watch in self.watches.get(key, ()):
            name = watch.names[key]
            if changes is None:
                watch.reload_all(name)
            else:
                watch.queue(name, changes)
            self._deliver(watch)

    def _gap(self) -> None:
        for watches in self.watches.values():
            for watch in watches:
                for name in watch.names.values():
                    watch.reload_all(name)
                self._deliver(watch)

    def _deliver(self, watch: Watch) -> None:
        if watch.task is None or watch.task.done():
            watch.task = asyncio.ensure_future(self._flush(watch))

    @staticmethod
    async def _flush(watch: Watch) -> None:
        await asyncio.sleep(0)  # what the same notification brings for it goes along
        while watch.pending or watch.reload:
            for message in watch.messages():
                await watch.send(message)  # waits for a slow browser; its queue stays bounded meanwhile
