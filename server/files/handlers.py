"""HTTP endpoints of files: parse, authorize and call the files service's
named methods (service.py), which place the store's blocking work and
announce the changes; answer. Areas in URLs: `home`, `course`, `class/<id>`, `checks/<id>`, `user/<username>`
(service.py).
"""
import logging
from urllib.parse import quote

from tornado import httputil, iostream
from tornado.http1connection import HTTP1Connection

from .. import seb
from ..web import ApiError, ApiHandler
from . import paths
from .area import Area
from .paths import Parts
from .service import Files
from .store import TEXT_LIMIT, Meta, as_text

log = logging.getLogger(__name__)

AREA = r"(home|course|class/[^/]+|checks/[^/]+|user/[^/]+|exam/[0-9]{1,18}|exams/[0-9]{1,18}/[^/]+)"


class FilesBase(ApiHandler):
    @property
    def files(self) -> Files:
        return self.ctx.files

    @property
    def username(self) -> str:
        name: str = self.current_user["username"]  # require_user (through area) made sure of it
        return name

    async def area(self, spec: str, write: bool) -> Area:
        """The Area `spec` names, if the current user may read (or write) it."""
        user = await self.require_user()
        await self.ctx.exams.require_seb_for(user, spec, seb.proof_of(self, self.ctx.cfg))  # (an exam that asks)
        return await self.files.area(user, spec, write)

    def answer_meta(self, meta: Meta) -> None:
        if "etag" in meta:
            self.set_header("ETag", f'"{meta["etag"]}"')
        self.finish_json(meta)

    async def stream_file(self, area: Area, parts: Parts) -> None:
        download = await self.files.download(self.username, area, parts)
        try:
            self.set_header("Content-Type", "application/octet-stream")
            self.set_header("Content-Disposition", _attachment(parts[-1]))
            while (block := await download.next()) is not None:
                self.write(block)
                await self.flush()  # waits for the client: memory stays at one block
        except iostream.StreamClosedError:
            return
        finally:
            await download.close()
        self.finish()


class FilesHandler(FilesBase):
    """GET a folder listing or a file, PUT to save, POST an action, DELETE."""

    @property
    def max_body(self) -> int | None:
        return self.ctx.cfg.MAX_FILE_BYTES if self.request.method == "PUT" else None

    async def get(self, spec: str, path: str | None) -> None:
        parts = paths.parse(path or "")  # before the area: a refused path makes nothing (not even the home)
        area = await self.area(spec, write=False)
        if self.get_argument("download", None):
            return await self.stream_file(area, parts)
        if not parts or await self.files.is_dir(self.username, area, parts):
            if self.get_argument("tree", None):
                entries, truncated = await self.files.tree(self.username, area, parts)
                return self.finish_json({"path": "/".join(parts), "kind": "folder", "entries": entries,
                                         "truncated": truncated})
            entries = await self.files.list(self.username, area, parts)
            return self.finish_json({"path": "/".join(parts), "kind": "folder", "entries": entries})
        data, etag, meta = await self.files.read(self.username, area, parts, TEXT_LIMIT)
        text = as_text(data) if data is not None else None
        meta.update({"etag": etag, "content": text,
                     "encoding": "utf-8" if text is not None else None})
        if etag:
            self.set_header("ETag", f'"{etag}"')
        self.finish_json(meta)

    async def put(self, spec: str, path: str | None) -> None:
        parts = paths.parse(path or "", allow_root=False)
        area = await self.area(spec, write=True)
        if_match = self.request.headers.get("If-Match")
        if if_match is not None:
            if_match = if_match.strip().removeprefix("W/").strip('"')
        meta = await self.files.save(self.username, area, parts, bytes(self._body), if_match)
        self.answer_meta(meta)

    async def post(self, spec: str, path: str | None) -> None:
        parts = paths.parse(path or "", allow_root=False)
        area = await self.area(spec, write=True)
        body = self.json_body()
        action = self.field(body, "action", str, max_len=20)
        if action == "mkdir":
            await self.files.mkdir(self.username, area, parts)
            return self.finish_json({"path": "/".join(parts), "kind": "folder"}, 201)
        if action == "move":
            dest = paths.parse(self.field(body, "to", str, max_len=paths.MAX_PATH_BYTES), allow_root=False)
            await self.files.move(self.username, area, parts, dest)
            return self.finish_json({"path": "/".join(dest)})
        if action == "restore":
            version = self.field(body, "version", str, max_len=100)
            meta = await self.files.restore(self.username, area, parts, version)
            return self.answer_meta(meta)
        raise ApiError(400, "unknown_action", "The action must be mkdir, move or restore.")

    async def delete(self, spec: str, path: str | None) -> None:
        parts = paths.parse(path or "", allow_root=False)
        area = await self.area(spec, write=True)
        done = await self.files.delete(self.username, area, parts)
        self.finish_json(done)


class HistoryHandler(FilesBase):
    """GET the earlier versions of a file, or one of them with ?version=."""

    async def get(self, spec: str, path: str | None) -> None:
        area = await self.area(spec, write=False)
        parts = paths.parse(path or "", allow_root=False)
        version = self.get_argument("version", None)
        if version is None:
            versions = await self.files.history(self.username, area, parts)
            return self.finish_json({"path": "/".join(parts), "versions": versions})
        data = await self.files.read_version(self.username, area, parts, version)
        text = as_text(data)
        self.finish_json({"path": "/".join(parts), "version": version, "size": len(data),
                          "content": text, "encoding": "utf-8" if text is not None else None})


class UploadHandler(FilesBase):
    """POST multipart/form-data files into a folder; ?overwrite=1 replaces."""

    @property
    def max_body(self) -> int | None:
        return self.ctx.cfg.MAX_FILE_BYTES + (64 << 10)

    async def post(self, spec: str, path: str | None) -> None:
        area = await self.area(spec, write=True)
        folder = paths.parse(path or "")
        ctype = self.request.headers.get("Content-Type", "")
        if not ctype.startswith("multipart/form-data"):
            raise ApiError(415, "unsupported_media_type", "Upload files as multipart/form-data.")
        args: dict[str, list[bytes]] = {}
        files: dict[str, list[httputil.HTTPFile]] = {}
        try:
            httputil.parse_body_arguments(ctype, bytes(self._body), args, files)
        except httputil.HTTPInputError:
            raise ApiError(400, "bad_multipart", "The upload is not a valid multipart/form-data body.") \
                from None
        uploads = [(f.filename, f.body) for group in files.values() for f in group]
        report = await self.files.upload(self.username, area, folder, uploads,
                                         overwrite=bool(self.get_argument("overwrite", None)))
        self.finish_json(report, 200 if report["saved"] else 409)


class ZipHandler(FilesBase):
    """GET a folder as a zip, streamed as it is made."""

    async def get(self, spec: str, path: str | None) -> None:
        area = await self.area(spec, write=False)
        parts = paths.parse(path or "")
        name = (parts[-1] if parts else area.key.split("/")[-1]) + ".zip"
        zipped = await self.files.zip(self.username, area, parts)
        first = await zipped.next()  # vets the folder: errors before headers
        self.set_header("Content-Type", "application/zip")
        self.set_header("Content-Disposition", _attachment(name))
        try:
            while first is not None:
                self.write(first)
                await self.flush()
                first = await zipped.next()
        except iostream.StreamClosedError:
            return
        except Exception as e:
            # Headers are sent: the only honest answer left is a broken one.
            # Closing without the last chunk makes the browser report a
            # failed download instead of saving a corrupt zip.
            log.warning("zip of %s/%s broken off: %r", area.key, "/".join(parts), e)
            if isinstance(self.request.connection, HTTP1Connection):  # what tornado's HTTPServer gives
                self.request.connection.close()
            return
        finally:
            await zipped.close()
        self.finish()


class TrashHandler(FilesBase):
    """GET what was deleted from an area; POST {"id", "path"?} restores one
    delete (or the file `path` of it)."""

    async def get(self, spec: str) -> None:
        area = await self.area(spec, write=False)
        self.finish_json({"entries": await self.files.trash_list(self.username, area)})

    async def post(self, spec: str) -> None:
        area = await self.area(spec, write=True)
        body = self.json_body()
        record = self.field(body, "id", str, max_len=100)
        path = self.field(body, "path", str, max_len=paths.MAX_PATH_BYTES, required=False)
        report = await self.files.trash_restore(self.username, area, record, path)
        self.finish_json(report, 200 if report["restored"] or not report["skipped"] else 409)


def _attachment(name: str) -> str:
    return f"attachment; filename*=UTF-8''{quote(name)}"
