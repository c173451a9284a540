"""History in a real browser: versions from an hour ago are listed in words,
the dialog shows what restoring one would change, and a restore is a save
that can itself be undone from the history.

The versions of an hour ago are written through the store itself (as the
server's file processes write them) with history's clock set back an hour:
what the student sees of them is the real page of the real server."""
import datetime
import os
import re
import time

import pytest

from server.files import history
from server.files.store import Area, Limits, Store
from tests.browser import (editor, editor_text, expect, expect_saved, open_file, shot, student_ide,
                           wait_ready)

pytestmark = pytest.mark.timeout(300)
MINUTE = 60 * 10**9


def write_in_the_past(server, user, path, texts, minutes_ago, monkeypatch):
    """Save `texts` one after another, the n-th `minutes_ago[n]` minutes ago
    (so the n-th version is the file as it was from then on), the file
    stamped with that time as a save then would have."""
    store = Store(os.path.join(server.env["DATA_DIR"], "storage"),
                  Limits(quota_bytes=200 << 20, quota_files=5000, max_file_bytes=10 << 20, history_versions=100))
    area, etag = Area.home(user), None
    try:
        with monkeypatch.context() as m:
            for text, ago in zip(texts, minutes_ago):
                m.setattr(history, "now_ns", lambda ago=ago: time.time_ns() - int(ago * MINUTE))
                etag = store.save(area, (path,), text.encode(), etag)["etag"]
                at = time.time_ns() - int(ago * MINUTE)
                os.utime(os.path.join(store.home_path(user), path), ns=(at, at))
    finally:
        store.close()
    return etag


def versions_of(client, path):
    versions = client.get(f"/api/history/home/{path}").json()["versions"]
    return [client.get(f"/api/history/home/{path}", params={"version": v["version"]}).json()["content"]
            for v in versions]


def test_history_lists_an_hour_ago_in_words_and_a_restore_can_be_undone(start_server, new_page, monkeypatch):
    server = start_server(processes=1)
    page, user, password = student_ide(new_page, server)
    # Written 70 minutes ago, replaced 65 minutes ago, replaced again just now.
    before = datetime.datetime.now()
    write_in_the_past(server, user, "story.py",
                      ['print("what I had an hour ago")\n', 'print("later")\n', 'print("now")\n'],
                      [70, 65, 0], monkeypatch)
    page.reload()
    wait_ready(page)
    open_file(page, "story.py")
    expect(editor(page)).to_contain_text('print("now")')

    page.get_by_role("button", name="History").click()
    dialog = page.get_by_role("dialog", name=re.compile("History of story.py"))
    options = dialog.get_by_role("option")
    expect(options).to_have_count(2)
    expect(options.nth(0).locator(".when")).to_have_text("a few seconds ago")
    expect(options.nth(1).locator(".when")).to_have_text("an hour ago")
    # When it was the file: from its save 70 minutes ago until it was replaced 65 minutes ago
    # (the minutes of the clock as this test began or now, if a minute has turned since).
    def minutes(ago):
        return "|".join({f"{t - datetime.timedelta(minutes=ago):%H:%M}" for t in (before, datetime.datetime.now())})
    expect(options.nth(1).locator(".meta")).to_contain_text(
        re.compile(rf"({minutes(70)}):\d\d to (.*, )?({minutes(65)}):\d\d"))

    # The version of an hour ago: its text, and what restoring it would change.
    options.nth(1).click()
    preview = dialog.locator(".version-preview")
    expect(preview.locator(".version-title")).to_have_text("The file as it was an hour ago")
    expect(preview.get_by_role("textbox", name="This version, compared with the file now")).to_contain_text(
        "what I had an hour ago")
    expect(preview.locator(".cm-deletedChunk")).to_contain_text('print("now")')
    expect(preview.locator(".version-summary")).to_have_text(
        "Compared with the file now, restoring this version would bring back 1 line (green) "
        "and take out 1 line (red).")
    shot(page, "history-an-hour-ago")
    dialog.get_by_role("button", name="Restore this version").click()
    expect(dialog).to_have_count(0)
    expect(editor(page)).to_contain_text("what I had an hour ago")
    expect_saved(page)

    client = server.client()
    client.login_ok(user, password)
    assert client.get("/api/files/home/story.py").json()["content"] == 'print("what I had an hour ago")\n'
    # The restore was a save: the text it replaced is the newest version,
    # and the version of an hour ago is still there.
    assert versions_of(client, "story.py") == ['print("now")\n', 'print("later")\n',
                                               'print("what I had an hour ago")\n']

    # Undoing the restore: the newest version brings "now" back.
    page.get_by_role("button", name="History").click()
    dialog = page.get_by_role("dialog", name=re.compile("History of story.py"))
    expect(dialog.get_by_role("option").filter(has_text="an hour ago")).to_have_count(1)
    first = dialog.get_by_role("option").first
    expect(first.locator(".when")).to_have_text("a few seconds ago")
    first.click()
    expect(dialog.locator(".version-preview .cm-content")).to_contain_text('print("now")')
    dialog.get_by_role("button", name="Restore this version").click()
    expect_saved(page)
    assert editor_text(page).strip() == 'print("now")'
    assert client.get("/api/files/home/story.py").json()["content"] == 'print("now")\n'
    assert page.errors == []


def test_versions_are_said_in_words_a_student_reads(start_server, new_page, monkeypatch):
    server = start_server(processes=1)
    page, user, _ = student_ide(new_page, server, "bea")
    # Local times, as the page shows them (the browser runs on this machine).
    midnight = datetime.datetime.now().astimezone().replace(hour=0, minute=0, second=0, microsecond=0)
    minutes_before = lambda when: (time.time() - when.timestamp()) / 60
    yesterday = midnight - datetime.timedelta(hours=9, minutes=55)  # 14:05
    three_days = midnight - datetime.timedelta(days=2, hours=10)
    write_in_the_past(server, user, "words.py", ["a\n", "b\n", "c\n", "d\n", "e\n"],
                      [minutes_before(three_days) + 1, minutes_before(three_days),
                       minutes_before(yesterday), 4.8, 0], monkeypatch)
    page.reload()
    wait_ready(page)
    open_file(page, "words.py")
    page.get_by_role("button", name="History").click()
    dialog = page.get_by_role("dialog", name=re.compile("History of words.py"))
    when = dialog.get_by_role("option").locator(".when")
    expect(when).to_have_count(4)
    expect(when.nth(0)).to_have_text("a few seconds ago")
    expect(when.nth(1)).to_have_text(re.compile(r"^[56] minutes ago$"))
    expect(when.nth(2)).to_have_text("yesterday 14:05")
    expect(when.nth(3)).to_have_text("3 days ago")
    # Beside the words, the exact time; the oldest one, chosen, shows its text
    # (the file as it was 3 days ago: the first text, replaced then).
    expect(dialog.get_by_role("option").nth(2).locator(".meta")).to_contain_text("14:05")
    dialog.get_by_role("option").nth(3).click()
    expect(dialog.locator(".version-preview .cm-insertedLine")).to_have_text("a")
    expect(dialog.locator(".version-preview .cm-deletedChunk")).to_have_text("e")
    expect(dialog.locator(".version-summary")).to_contain_text("bring back 1 line (green) and take out 1 line (red)")
    assert page.errors == []
