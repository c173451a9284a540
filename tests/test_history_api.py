"""History over HTTP, against the real server: restoring a version is a save
like any other (If-Match), so it makes a new version, the version restored
stays listed, and a restore from a stale page changes nothing."""
import os
import time

import pytest

from server.files import history
from server.files.store import Area, Limits, Store
from tests.helpers import put

MINUTE = 60 * 10**9


@pytest.fixture
def ada(people):
    return people.student("ada")


def listed(client, path):
    """[(version, text)] of a file's history, newest first."""
    versions = client.get(f"/api/history/home/{path}").json()["versions"]
    return [(v["version"], client.get(f"/api/history/home/{path}", params={"version": v["version"]}).json()["content"])
            for v in versions]


def restore(client, path, version, etag):
    """What the IDE does: the version's text saved over the one it shows."""
    text = client.get(f"/api/history/home/{path}", params={"version": version}).json()["content"]
    return put(client, path, text, etag)


def test_a_restore_is_a_new_version_and_the_restored_one_stays_listed(ada):
    etag = put(ada, "r.py", "one\n").json()["etag"]
    etag = put(ada, "r.py", "two\n", etag).json()["etag"]
    etag = put(ada, "r.py", "three\n", etag).json()["etag"]
    before = listed(ada, "r.py")
    assert [text for _, text in before] == ["two\n", "one\n"]
    oldest = before[-1][0]

    r = restore(ada, "r.py", oldest, etag)
    assert r.status_code == 200, r.text
    assert ada.get("/api/files/home/r.py").json()["content"] == "one\n"
    after = listed(ada, "r.py")
    assert [text for _, text in after] == ["three\n", "two\n", "one\n"]  # "three" can be had back
    assert after[-1][0] == oldest

    # Undo the restore: the newest version is the text it replaced.
    assert restore(ada, "r.py", after[0][0], r.json()["etag"]).status_code == 200
    assert ada.get("/api/files/home/r.py").json()["content"] == "three\n"
    assert [text for _, text in listed(ada, "r.py")] == ["one\n", "three\n", "two\n", "one\n"]


def test_a_restore_from_a_stale_page_is_a_conflict_and_changes_nothing(ada):
    first = put(ada, "s.py", "mine\n").json()["etag"]
    put(ada, "s.py", "saved elsewhere\n", first)
    version = listed(ada, "s.py")[0][0]
    r = restore(ada, "s.py", version, first)  # the page still shows the first text
    assert r.status_code == 409 and r.json()["current"]["content"] == "saved elsewhere\n"
    assert ada.get("/api/files/home/s.py").json()["content"] == "saved elsewhere\n"
    assert len(listed(ada, "s.py")) == 1


def test_a_version_of_an_hour_ago_stays_through_a_minute_of_autosaves_and_a_restore(ada, server, monkeypatch):
    # The first two saves are made through the store with history's clock an hour back.
    store = Store(os.path.join(server.env["DATA_DIR"], "storage"),
                  Limits(quota_bytes=200 << 20, quota_files=5000, max_file_bytes=10 << 20, history_versions=100))
    etag = None
    try:
        for text, ago in (("an hour ago\n", 70), ("later\n", 62)):
            monkeypatch.setattr(history, "now_ns", lambda ago=ago: time.time_ns() - ago * MINUTE)
            etag = store.save(Area.home(ada.username), ("h.py",), text.encode(), etag)["etag"]
    finally:
        store.close()
    # Then 30 autosaves, now: thinned to the last ten and the hour-old one.
    for i in range(30):
        etag = put(ada, "h.py", f"typing {i}\n", etag).json()["etag"]
    versions = ada.get("/api/history/home/h.py").json()["versions"]
    hour_old = [v for v in versions if time.time() - v["saved"] > 55 * 60]
    assert len(hour_old) == 1 and len(versions) <= 12
    r = restore(ada, "h.py", hour_old[0]["version"], etag)
    assert r.status_code == 200
    assert ada.get("/api/files/home/h.py").json()["content"] == "an hour ago\n"
    after = listed(ada, "h.py")
    assert after[0][1] == "typing 29\n" and (hour_old[0]["version"], "an hour ago\n") in after


def test_a_deleted_files_version_is_marked_and_outlives_a_new_file_of_that_name(ada):
    etag = put(ada, "d.py", "homework\n").json()["etag"]
    assert ada.request("DELETE", "/api/files/home/d.py").status_code == 200
    etag = None
    for i in range(15):
        etag = put(ada, "d.py", f"new {i}\n", etag).json()["etag"]
    versions = ada.get("/api/history/home/d.py").json()["versions"]
    deleted = [v for v in versions if v["deleted"]]
    assert len(deleted) == 1 and len(versions) <= 12  # the last ten saves (a minute's last), the deleted file
    assert ada.get("/api/history/home/d.py", params={"version": deleted[0]["version"]}).json()["content"] == \
        "homework\n"
    [entry] = ada.get("/api/trash/home").json()["entries"]
    assert entry["files"][0]["version"] == deleted[0]["version"]


def test_the_text_left_alone_before_a_burst_of_autosaves_is_kept_for_each_minute_it_was_there(ada, server, monkeypatch):
    # Two and a half minutes ago: some typing, then the text left alone (saved through the store,
    # with history's clock set back); now a burst of 25 autosaves through the API.
    store = Store(os.path.join(server.env["DATA_DIR"], "storage"),
                  Limits(quota_bytes=200 << 20, quota_files=5000, max_file_bytes=10 << 20, history_versions=100))
    saves, etag, start = [], None, time.time_ns()
    try:
        for i, text in enumerate(["typing 0\n", "typing 1\n", "typing 2\n", "the text left alone\n"]):
            at = start - 150 * 10**9 + i * 2 * 10**9
            monkeypatch.setattr(history, "now_ns", lambda at=at: at)
            etag = store.save(Area.home(ada.username), ("b.py",), text.encode(), etag)["etag"]
            saves.append((at, text))
    finally:
        store.close()
    burst = time.time_ns()
    for i in range(25):
        etag = put(ada, "b.py", f"burst {i}\n", etag).json()["etag"]
    now = time.time_ns()
    texts = [text for _, text in listed(ada, "b.py")] + ["burst 24\n"]
    assert "the text left alone\n" in texts
    assert len(texts) <= 1 + 10 + 3  # the file, the burst's last ten, a text per minute before
    # Each minute since the first save (none during the burst, where the server's clock decides)
    # shows the text the file had then.
    for minute in range(-(-saves[0][0] // MINUTE) * MINUTE, now, MINUTE):
        if not burst <= minute <= now:
            assert [text for at, text in saves if at <= minute][-1] in texts


def test_each_version_says_from_when_until_when_it_was_the_file(ada):
    # The kernel stamps files with a coarse clock: a few milliseconds either way are allowed.
    slack, times, etag = 0.05, [], None
    for text in ("one\n", "two\n", "three\n"):
        before = time.time()
        etag = put(ada, "w.py", text, etag).json()["etag"]
        times.append((before, time.time()))
    two, one = ada.get("/api/history/home/w.py").json()["versions"]
    # "two" was the file from its save until the save of "three"; "one" until the save of "two".
    assert times[1][0] - slack <= two["since"] <= times[1][1] + slack
    assert times[2][0] - slack <= two["saved"] <= times[2][1] + slack
    assert times[0][0] - slack <= one["since"] <= times[0][1] + slack
    assert one["since"] <= one["saved"] <= two["since"]
