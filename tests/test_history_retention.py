"""History that reaches back: versions are thinned as they age (dense when
recent, sparse when old), with a bound per file, counted in the home's
quota. The clock is history's own (`history.now_ns`), set by the tests:
hours pass in a loop, never by waiting."""
import os

import pytest
from hypothesis import given, settings, strategies as st

from server.files import history
from server.files.history import retained
from server.files.store import Area, Limits, Store

ADA = Area.home("ada")
MINUTE, HOUR, DAY = 60, 3600, 86400
NS = 10**9
START = 1_800_000_000 * NS  # a fixed instant: the tests never read the real clock


class Clock:
    def __init__(self, at=START):
        self.at = at

    def __call__(self):
        return self.at

    def advance(self, seconds):
        self.at += int(seconds * NS)


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(history, "now_ns", c)
    return c


def make_store(tmp_path, versions=100):
    s = Store(str(tmp_path / "storage"), Limits(quota_bytes=100 << 20, quota_files=5000,
                                                 max_file_bytes=1 << 20, history_versions=versions))
    s.ensure_home("ada", welcome=False)
    return s


def ages(store, clock, path="essay.py"):
    """The age in seconds of each kept version of `path`, newest first."""
    return [clock.at / NS - v["saved"] for v in store.history(ADA, (path,))]


def near(found, seconds, within):
    return any(abs(age - seconds) <= within for age in found)


# The moments whose text the history keeps, by their age: each minute for ten
# minutes, each ten minutes for two hours, each hour for the day, each day for
# thirty days, each thirty days before.
KEPT_MOMENTS = ((0, 10 * MINUTE, MINUTE), (10 * MINUTE, 2 * HOUR, 10 * MINUTE), (2 * HOUR, DAY, HOUR),
                (DAY, 30 * DAY, DAY), (30 * DAY, None, 30 * DAY))


def kept_moments(first, now):
    """The moments (ns) from `first` to `now` whose text the history keeps at `now`."""
    for older, younger, spacing in KEPT_MOMENTS:
        step = spacing * NS
        low = first if younger is None else max(first, now - younger * NS + 1)
        moment = -(-low // step) * step
        while moment <= now - older * NS:
            yield moment
            moment += step


def text_at(saves, moment):
    """The text a file had at `moment`, from its saves [(ns, text)] in order."""
    return [text for at, text in saves if at <= moment][-1]


def missing_moments(store, clock, saves, path="essay.py"):
    """The kept moments whose text is neither the file now nor one of its versions."""
    texts = {store.read_version(ADA, (path,), v["version"]) for v in store.history(ADA, (path,))}
    texts.add(saves[-1][1])
    return [(moment - START) / NS for moment in kept_moments(saves[0][0], clock.at)
            if text_at(saves, moment) not in texts]


def test_three_hours_of_autosaves_every_two_seconds_reach_back_hours(tmp_path, clock, monkeypatch):
    # Durability is not what this test is about: 5400 saves without fsync.
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    store = make_store(tmp_path)
    etag = None
    for i in range(3 * HOUR // 2):
        etag = store.save(ADA, ("essay.py",), f"line = {i}\n".encode(), etag)["etag"]
        clock.advance(2)
    found = ages(store, clock)
    assert found == sorted(found)  # newest first
    # The text just before the last save is the newest version.
    newest = store.history(ADA, ("essay.py",))[0]
    assert store.read_version(ADA, ("essay.py",), newest["version"]) == f"line = {3 * HOUR // 2 - 2}\n".encode()
    assert found[0] <= 4
    # The last seconds densely, then about 5 minutes ago, about an hour ago, hours ago.
    assert sum(age < MINUTE for age in found) >= 10
    assert near(found, 5 * MINUTE, within=MINUTE)
    assert near(found, HOUR, within=10 * MINUTE)
    assert near(found, 2.5 * HOUR, within=HOUR)
    # Thinned: far fewer than the 5400 saves, within the bound.
    assert len(found) <= 100
    assert len(found) < 60
    # Every version kept is counted in the home's quota, and nothing else is.
    assert store.usage(ADA) == store.usage(ADA, fresh=True)
    assert store.usage(ADA)[1] == 1 + len(found)
    store.close()


def test_the_bound_per_file_holds_and_keeps_the_newest(tmp_path, clock):
    store = make_store(tmp_path, versions=4)
    etag = None
    for i in range(12):
        etag = store.save(ADA, ("essay.py",), f"v{i}\n".encode(), etag)["etag"]
        clock.advance(HOUR)
    versions = store.history(ADA, ("essay.py",))
    assert len(versions) == 4
    assert [store.read_version(ADA, ("essay.py",), v["version"]) for v in versions] == \
        [b"v10\n", b"v9\n", b"v8\n", b"v7\n"]
    assert store.usage(ADA) == store.usage(ADA, fresh=True) == (len(b"v11\nv10\nv9\nv8\nv7\n"), 5)
    store.close()


def test_a_file_left_alone_is_thinned_only_when_it_is_saved_again(tmp_path, clock):
    store = make_store(tmp_path)
    etag = None
    for i in range(30):
        etag = store.save(ADA, ("old.py",), f"v{i}\n".encode(), etag)["etag"]
        clock.advance(2)
    kept = len(store.history(ADA, ("old.py",)))
    assert kept >= 10
    clock.advance(40 * DAY)  # untouched for weeks: nothing walks its history
    assert len(store.history(ADA, ("old.py",))) == kept
    for i in range(12):
        etag = store.save(ADA, ("old.py",), f"back {i}\n".encode(), etag)["etag"]
        clock.advance(2)
    found = ages(store, clock, "old.py")
    # The saves of weeks ago are one version now (one a month, at that age); the new ones are all there,
    # and so is the text the file had all those weeks (replaced by the first of them).
    assert sum(age > 30 * DAY for age in found) == 1
    texts = [store.read_version(ADA, ("old.py",), v["version"]) for v in store.history(ADA, ("old.py",))]
    assert b"v29\n" in texts and all(f"back {i}\n".encode() in texts for i in range(1, 11))
    assert store.usage(ADA) == store.usage(ADA, fresh=True)
    store.close()


def test_a_month_of_saves_keeps_days_and_hours_within_the_bound():
    # The policy alone, over 40 days of a save every 10 minutes.
    kept, at = [], START
    for i in range(40 * DAY // 600):
        at += 600 * NS
        kept = retained(kept + [f"{at}-{i:020x}"], at, 100)
    found = [(at - history._made_ns(v)) / NS for v in kept]
    assert len(kept) <= 100
    assert found[0] == 0  # the newest is kept
    assert near(found, HOUR, within=10 * MINUTE)
    assert near(found, 12 * HOUR, within=HOUR)
    assert near(found, 7 * DAY, within=DAY)
    assert near(found, 29 * DAY, within=DAY)
    # Older than an hour, never two versions closer together than the policy keeps.
    day_old = sorted(age for age in found if age >= DAY + HOUR)
    assert all(b - a >= HOUR for a, b in zip(day_old, day_old[1:]))


def test_retained_keeps_the_recent_ones_then_one_per_period():
    now = START
    # 30 saves in the last minute: the last 10 are kept, then one per minute.
    names = [f"{now - s * NS}-e{s}" for s in range(0, 60, 2)]
    kept = retained(names, now, 100)
    assert kept[:10] == names[:10]
    assert len(kept) <= 10 + 2
    # A version from the future (another host's clock) counts as recent.
    assert retained([f"{now + 5 * NS}-f"], now, 100) == [f"{now + 5 * NS}-f"]


def test_a_deleted_files_last_version_outlives_a_new_file_of_the_same_name(tmp_path, clock):
    store = make_store(tmp_path)
    etag = store.save(ADA, ("main.py",), b"my homework\n", None)["etag"]
    clock.advance(2)
    store.save(ADA, ("main.py",), b"my finished homework\n", etag)
    clock.advance(2)
    store.delete(ADA, ("main.py",))  # by mistake
    # A new main.py, typed into for ten minutes.
    etag = None
    for i in range(300):
        clock.advance(2)
        etag = store.save(ADA, ("main.py",), f"new {i}\n".encode(), etag)["etag"]
    [deleted] = store.trash_list(ADA)
    version = deleted["files"][0]["version"]
    assert store.read_version(ADA, ("main.py",), version) == b"my finished homework\n"
    assert [v["deleted"] for v in store.history(ADA, ("main.py",))].count(True) == 1
    # Put back beside the new one it cannot overwrite: the trash says so, and the text is there.
    assert store.trash_restore(ADA, deleted["id"])["skipped"][0]["path"] == "main.py"
    assert store.usage(ADA) == store.usage(ADA, fresh=True)
    store.close()


def test_the_text_left_alone_for_a_minute_outlives_the_burst_of_autosaves_that_replaces_it(tmp_path, clock):
    store = make_store(tmp_path)
    saves, etag = [], None

    def save(text):
        nonlocal etag
        etag = store.save(ADA, ("essay.py",), text, etag)["etag"]
        saves.append((clock.at, text))

    clock.advance(-150)  # 7:57:30 (START is 8:00)
    for i in range(4):
        save(f"typing {i}\n".encode())
        clock.advance(2)
    save(b"the program at 7:58, 7:59 and 8:00\n")
    clock.advance(152)  # left alone, then 25 autosaves in a burst at 8:00:10
    for i in range(25):
        save(f"burst {i}\n".encode())
        clock.advance(2)
    texts = [store.read_version(ADA, ("essay.py",), v["version"]) for v in store.history(ADA, ("essay.py",))]
    assert b"the program at 7:58, 7:59 and 8:00\n" in texts
    assert missing_moments(store, clock, saves) == []
    assert len(texts) <= 10 + 3  # the burst's last ten, and a text per minute before it
    store.close()


def versions_made(gaps, bound):
    """Saves `gaps` (ns) apart, the history thinned at each as the store does:
    (the saves [(ns, text)], the texts kept, whether the bound was reached)."""
    saves, kept, full = [(START, 0)], [], False
    for i, gap in enumerate(gaps, 1):
        at = saves[-1][0] + gap
        kept = retained(kept + [f"{at}-{i - 1:020x}"], at, bound)  # the version holds the text it replaced
        full = full or len(kept) == bound
        saves.append((at, i))
    return saves, [int(v.split("-")[1], 16) for v in kept], full


gaps = st.lists(st.one_of(st.integers(1, 3 * NS), st.integers(1, 2 * HOUR * NS), st.integers(1, 3 * DAY * NS)),
                min_size=1, max_size=150)


@given(gaps=gaps, bound=st.sampled_from([20, 1000]))
@settings(max_examples=300, deadline=None, derandomize=True, database=None)
def test_for_every_moment_kept_the_text_of_that_moment_is_kept(gaps, bound):
    saves, kept, full = versions_made(gaps, bound)
    now = saves[-1][0]
    assert len(kept) <= bound
    assert kept == sorted(kept, reverse=True)
    assert kept[:10] == list(range(len(saves) - 2, -1, -1))[:10]  # the last ten are all there
    oldest = min(kept)  # within the bound: the oldest go first
    for moment in kept_moments(START, now):
        text = text_at(saves, moment)
        if text != saves[-1][1] and (not full or text >= oldest):
            assert text in kept, f"the text of {(moment - START) / NS}s is gone"


def test_a_version_copied_where_it_cannot_be_linked_still_says_when_its_text_was_written(tmp_path, clock, monkeypatch):
    store = make_store(tmp_path)
    etag = store.save(ADA, ("essay.py",), b"first\n", None)["etag"]
    written = os.stat(os.path.join(store.home_path("ada"), "essay.py")).st_mtime_ns / NS

    def no_link(*args, **kwargs):
        raise OSError(18, "Invalid cross-device link")  # EXDEV: history on another file system
    monkeypatch.setattr(os, "link", no_link)
    clock.advance(HOUR)
    store.save(ADA, ("essay.py",), b"second\n", etag)
    [version] = store.history(ADA, ("essay.py",))
    assert store.read_version(ADA, ("essay.py",), version["version"]) == b"first\n"
    assert version["since"] == written and version["saved"] == clock.at / NS
    store.close()
