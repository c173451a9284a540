"""The browser pages and their bundle (static/dist/, built by
`npm run build` from static/src/; see static/build.mjs).

Everything is read once, when the module is imported at start-up, so no
request ever waits on the disk:

- `/static/dist/<name>`: the content-hashed bundle files, from memory, with
  `Cache-Control: public, max-age=31536000, immutable` (a new build has new
  names). Text files are gzipped once here; clients that accept gzip get
  those bytes, the others the plain ones.
- the HTML pages (`/` sign-in, `/ide`, `/teacher`, `/admin`, `/class/<id>`): templates of
  static/src/pages/ filled in with the hashed names of manifest.json, sent
  with `Cache-Control: no-cache` (and an ETag), so a deploy shows at once.
  The sign-in page says whether a session cookie came with it
  (`data-session`), so that its script asks `/api/me` only then.
- the page for an address that is not there (NotFoundHandler), for a
  person's browser: a sentence and a link back, no script; programs get
  the JSON error every API answers with.
- the icon, `/favicon.svg` (and `/favicon.ico`, where browsers look unasked).
"""
import gzip
import hashlib
import html
import json
import logging
import os
import re
import urllib.parse

from . import web
from .db import DatabaseUnavailable
from .errors import Refused
from . import seb
from .web import SESSION_COOKIE, ApiError, BaseHandler

log = logging.getLogger(__name__)

STATIC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "static")
DIST = os.path.join(STATIC, "dist")
TEMPLATES = os.path.join(STATIC, "src", "pages")
FAVICON = os.path.join(STATIC, "src", "favicon.svg")
NOT_FOUND = "not-found.html"
IMMUTABLE = "public, max-age=31536000, immutable"
TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
         ".json": "application/json; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png",
         ".woff2": "font/woff2", ".txt": "text/plain; charset=utf-8"}
COMPRESSIBLE = (".js", ".css", ".json", ".svg", ".txt")
# CodeMirror sets styles from JavaScript, hence 'unsafe-inline' for styles;
# figures are data: URLs; the run socket is same-origin ('self').
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
       "connect-src 'self'; font-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
       "form-action 'self'")

PER_REQUEST = ("session", "notice", "signin", "password")  # the sign-in page's (LoginPage)
# path -> (template, title, view, which bundle)
PAGES = {
    "/": ("login.html", "Sign in", "", "login"),
    "/ide": ("ide.html", "IDE", "ide", "ide"),
    "/teacher": ("ide.html", "Teacher", "teacher", "ide"),
    "/admin": ("admin.html", "Administration", "", "admin"),
    "/class": ("class.html", "Class", "", "class"),  # served at /class/<id>
}


class Asset:
    __slots__ = ("body", "gzipped", "content_type", "etag")

    def __init__(self, name, body):
        ext = os.path.splitext(name)[1]
        self.body = body
        self.content_type = TYPES.get(ext, "application/octet-stream")
        self.gzipped = gzip.compress(body, compresslevel=9, mtime=0) if ext in COMPRESSIBLE else None
        self.etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def load(dist=DIST, templates=TEMPLATES):
    """(assets by file name, page bodies by URL path), from disk, once."""
    try:
        manifest = json.loads(_read(os.path.join(dist, "manifest.json")))
    except FileNotFoundError:
        log.error("static/dist/manifest.json is missing: run `npm ci && npm run build`")
        return {}, {path: _not_built() for path in [*PAGES, NOT_FOUND]}
    assets = {name: Asset(name, _read(os.path.join(dist, name))) for name in manifest["files"]}
    pages = {}
    for path, (template, title, view, bundle) in PAGES.items():
        page = manifest["pages"][bundle]
        head = "\n".join(
            ['<link rel="icon" href="/favicon.svg" type="image/svg+xml">']
            + [f'<link rel="stylesheet" href="/static/dist/{html.escape(css)}">' for css in page["styles"]]
            + [f'<link rel="modulepreload" href="/static/dist/{html.escape(c)}">' for c in page["preload"]]
            + [f'<script type="module" src="/static/dist/{html.escape(page["script"])}"></script>'])
        text = _read(os.path.join(templates, template)).decode("utf-8")
        values = {"head": head, "title": html.escape(title), "view": html.escape(view),
                  **{name: "{{%s}}" % name for name in PER_REQUEST}}  # filled in per request (LoginPage)
        pages[path] = re.sub(r"\{\{(\w+)\}\}", lambda m: values[m.group(1)], text).encode("utf-8")
    # The not-found page: the sign-in page's style, no script; its
    # {{path}} and {{back}} are filled in per request.
    styles = manifest["pages"]["login"]["styles"]
    head = "\n".join(['<link rel="icon" href="/favicon.svg" type="image/svg+xml">']
                     + [f'<link rel="stylesheet" href="/static/dist/{html.escape(css)}">' for css in styles])
    pages[NOT_FOUND] = _read(os.path.join(templates, NOT_FOUND)).replace(b"{{head}}", head.encode("utf-8"))
    return assets, pages


def _not_built():
    return (b"<!doctype html><title>PyClassroom</title><p>The front-end is not built: run "
            b"<code>npm ci &amp;&amp; npm run build</code>.</p>")


ASSETS, PAGE_BODIES = load()
ICON = Asset("favicon.svg", _read(FAVICON))


class PageHandler(BaseHandler):
    """One of the HTML pages; the page's script asks /api/me who is there."""

    path: str | None = None  # the key of PAGES

    def page(self):
        return PAGE_BODIES[self.path]

    def get(self):
        self.body = self.page()
        if not self.get_cookie("_xsrf"):
            self.xsrf_token  # noqa: B018 - reading it sets the cookie the page's first write needs
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("Content-Security-Policy", CSP)
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Referrer-Policy", "same-origin")
        self.finish(self.body)  # Tornado adds the ETag and answers 304, and gzips


class AssetHandler(BaseHandler):
    """A file of the built bundle, by its content-hashed name."""

    def get(self, name):
        asset = ASSETS.get(name)
        if asset is None:
            raise ApiError(404, "not_found", f"There is no file {name} in this build.")
        self.set_header("Content-Type", asset.content_type)
        self.set_header("Cache-Control", IMMUTABLE)
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("ETag", asset.etag)
        if self.check_etag_header():
            self.set_status(304)
            return self.finish()
        if asset.gzipped is not None and "gzip" in self.request.headers.get("Accept-Encoding", ""):
            self.set_header("Content-Encoding", "gzip")  # already compressed: Tornado leaves it
            return self.finish(asset.gzipped)
        self.finish(asset.body)

    def compute_etag(self):
        return None  # set above, from the content, not from the (maybe gzipped) body

    head = get


SIGNED_OUT = ("You have signed out of PyClassroom. Your school account is still signed in on this browser: "
              "on a shared computer, sign out of it too, on your school account's own page.")


class LoginPage(PageHandler):
    """The sign-in page: a button per school account (OIDC_ISSUERS), the
    password form unless PASSWORD_SIGN_IN is off, and `notice`, a sentence
    for the person (a school sign-in refused; else, for the script to show
    after signing out, that the school account stays signed in). With a session cookie its script asks
    /api/me whether the session still holds (without one, it would only log
    a 401)."""

    path = "/"
    notice = ""

    def page(self):
        buttons = self.ctx.cfg.OIDC_ISSUERS
        notice = self.notice
        next_page = self.get_argument("next", "")
        query = "?" + urllib.parse.urlencode({"next": next_page}) if next_page else ""
        links = "".join(f'<li><a class="btn wide" href="/signin/{i.id}{html.escape(query)}">'
                        f'Sign in with {html.escape(i.name)}</a></li>' for i in buttons)
        values = {
            "session": "1" if self.get_cookie(SESSION_COOKIE) else "",
            "notice": f'<p id="notice" class="message" role="alert">{html.escape(notice)}</p>' if notice
                      # shown by the page's script right after signing out
                      else f'<p id="signed-out" class="message" data-kind="info" role="status" hidden>{SIGNED_OUT}</p>'
                      if buttons else "",
            "signin": f'<ul class="school-accounts" aria-label="School accounts">{links}</ul>' if links else "",
            "password": "" if self.ctx.cfg.PASSWORD_SIGN_IN else "hidden",
        }
        return re.sub(rb"\{\{(%s)\}\}" % "|".join(PER_REQUEST).encode(),
                      lambda m: values[m.group(1).decode()].encode("utf-8"), PAGE_BODIES[self.path])


class IconHandler(BaseHandler):
    """The site's icon; cached for a day (its name has no hash)."""

    def get(self):
        self.set_header("Content-Type", ICON.content_type)
        self.set_header("Cache-Control", "public, max-age=86400")
        self.set_header("X-Content-Type-Options", "nosniff")
        self.finish(ICON.body)

    head = get


# An exam's IDE opened outside Safe Exam Browser: what to do, and nothing else (no script).
SEB_PAGE = ('<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
            'content="width=device-width, initial-scale=1"><title>Safe Exam Browser needed — PyClassroom</title>'
            '</head><body><main><h1>Safe Exam Browser needed</h1><p>{sentence}</p></main></body></html>')


class IdePage(PageHandler):
    """The IDE; while an exam that requires Safe Exam Browser runs for the
    student, only in it (the request's header: seb.py), else a page
    that says what to open."""

    path = "/ide"

    async def get(self):
        try:
            user, _, _ = await web.user_for_session(self)
            if user is not None:
                await self.ctx.exams.require_seb(user, None, seb.proof_of(self, self.ctx.cfg))
        except DatabaseUnavailable:
            pass  # the page opens and says so itself; what it then asks of the exam is checked as it comes
        except Refused as e:
            self.set_status(e.status)
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.set_header("Cache-Control", "no-store")
            self.set_header("Content-Security-Policy", CSP)
            return self.finish(SEB_PAGE.format(sentence=html.escape(e.message, quote=False)))
        super().get()


class TeacherPage(PageHandler):
    path = "/teacher"


class AdminPage(PageHandler):
    path = "/admin"


class ClassPage(PageHandler):
    """/class/<id>: the full-screen class view; its script asks whether the
    user teaches the class (the roster API) and says so if not."""

    path = "/class"

    def get(self, _number):
        super().get()


def wants_page(request):
    """Whether a person's browser asked for this address (typed in, or a
    link followed), rather than a program. Programs ask for JSON, send
    X-Requested-With, or use /api/ and /ws/; a browser's own navigation
    says so in Sec-Fetch-Mode, which no script can set."""
    headers = request.headers
    accept = headers.get("Accept", "")
    if "application/json" in accept or headers.get("X-Requested-With"):
        return False
    if headers.get("Sec-Fetch-Mode") == "navigate":
        return True
    return "text/html" in accept and not request.path.startswith(("/api/", "/ws/"))


class NotFoundHandler(web.NotFoundHandler):
    """An address no route matches: for a person, a page that says so and
    leads back (to the sign-in page, which sends a signed-in user on to
    their files); for a program, the JSON error."""

    def prepare(self):
        if not wants_page(self.request):
            return super().prepare()
        path = urllib.parse.unquote(self.request.path, errors="replace")  # as the address bar shows it
        path = path if len(path) <= 200 else path[:200] + "…"
        back = "Back to your files" if self.get_cookie(SESSION_COOKIE) else "Go to the sign-in page"
        values = {b"path": html.escape(path).encode("utf-8"), b"back": back.encode("utf-8")}
        body = re.sub(rb"\{\{(path|back)\}\}", lambda m: values[m.group(1)], PAGE_BODIES[NOT_FOUND])  # one pass
        self.set_status(404)
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.set_header("Content-Security-Policy", CSP)
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Referrer-Policy", "same-origin")
        self.finish(body)
