"""The committed bundle (static/dist/) is what the sources build to, and
the server sends it the way browsers should get it: hashed names cached
for a year, pages revalidated, text gzipped."""
import gzip
import json
import os
import shutil
import subprocess

import pytest
import requests

from tests.browser import ROOT

DIST = os.path.join(ROOT, "static", "dist")


def manifest():
    with open(os.path.join(DIST, "manifest.json")) as f:
        return json.load(f)


def read(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.timeout(600)
def test_committed_bundle_is_what_the_sources_build(tmp_path):
    """npm ci + npm run build in a copy of the sources gives exactly the
    committed static/dist/ (so it is fresh, and the build is deterministic:
    another folder, the same bytes)."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if not npm or not node:
        pytest.skip("node and npm are needed to rebuild the bundle")
    work = tmp_path / "src"
    (work / "static").mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy(os.path.join(ROOT, name), work / name)
    shutil.copy(os.path.join(ROOT, "static", "build.mjs"), work / "static" / "build.mjs")
    shutil.copytree(os.path.join(ROOT, "static", "src"), work / "static" / "src")
    subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--prefer-offline"],
                   cwd=work, check=True, capture_output=True, timeout=400)
    out = tmp_path / "dist"
    subprocess.run([node, "static/build.mjs", "--outdir", str(out)], cwd=work, check=True,
                   capture_output=True, timeout=120)
    built = sorted(os.listdir(out))
    committed = sorted(os.listdir(DIST))
    stale = "static/dist/ is stale: run `npm ci && npm run build` and commit static/dist/"
    assert built == committed, f"{stale}\nbuilt: {built}\ncommitted: {committed}"
    for name in built:
        assert read(out / name) == read(os.path.join(DIST, name)), f"{stale} ({name} differs)"


def test_manifest_names_every_file_by_its_content():
    m = manifest()
    files = sorted(f for f in os.listdir(DIST) if f != "manifest.json")
    assert sorted(m["files"]) == files
    for page in ("login", "ide", "admin"):
        entry = m["pages"][page]
        for name in [entry["script"], *entry["preload"], *entry["styles"]]:
            assert name in m["files"], name


def test_pages_and_bundle_are_served_with_the_right_headers(start_server):
    server = start_server(processes=1)
    m = manifest()
    with requests.Session() as http:
        for path, bundle in [("/", "login"), ("/ide", "ide"), ("/teacher", "ide"), ("/admin", "admin")]:
            r = http.get(server.url + path, timeout=10)
            assert r.status_code == 200, path
            assert r.headers["Content-Type"] == "text/html; charset=utf-8"
            assert r.headers["Cache-Control"] == "no-cache"
            assert "default-src 'self'" in r.headers["Content-Security-Policy"]
            page = m["pages"][bundle]
            assert f'src="/static/dist/{page["script"]}"' in r.text
            assert f'href="/static/dist/{page["styles"][0]}"' in r.text
            for chunk in page["preload"]:
                assert f'<link rel="modulepreload" href="/static/dist/{chunk}">' in r.text
            # Revalidation costs a 304, not the page.
            again = http.get(server.url + path, headers={"If-None-Match": r.headers["ETag"]}, timeout=10)
            assert again.status_code == 304
        assert http.get(server.url + "/", headers={"Accept-Encoding": "gzip"}, timeout=10).headers.get(
            "Content-Encoding") == "gzip"

        for name in m["files"]:
            raw = read(os.path.join(DIST, name))
            r = http.get(server.url + "/static/dist/" + name, headers={"Accept-Encoding": "gzip"}, stream=True,
                         timeout=10)
            assert r.status_code == 200, name
            assert r.headers["Cache-Control"] == "public, max-age=31536000, immutable"
            assert r.headers["Content-Type"].startswith("text/javascript" if name.endswith(".js") else "text/css")
            assert r.headers["Content-Encoding"] == "gzip"
            assert "Accept-Encoding" in r.headers["Vary"]
            assert gzip.decompress(r.raw.read()) == raw
            plain = http.get(server.url + "/static/dist/" + name, headers={"Accept-Encoding": "identity"},
                             timeout=10)
            assert plain.content == raw and "Content-Encoding" not in plain.headers
            cached = http.get(server.url + "/static/dist/" + name, headers={"If-None-Match": r.headers["ETag"]},
                              timeout=10)
            assert cached.status_code == 304

        missing = http.get(server.url + "/static/dist/app.00000000.js", timeout=10)
        assert missing.status_code == 404 and missing.json()["error"] == "not_found"
        assert http.get(server.url + "/static/dist/../server/config.py", timeout=10).status_code == 404
