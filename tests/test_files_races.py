"""Finding 1 of issue 11, as the attack: many tabs of one student save at
the same moment, from one worker and from several. Each round, every tab
names the same version (If-Match); exactly one may win, every time, or an
edit is silently lost. The quota holds under the same races: concurrent
big saves and a flood of small new files never store more than it allows.
These run against the real server (real HTTP, real PostgreSQL); the last
drives the Store alone from many threads at once (its lock must exclude
threads, not only processes)."""
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from server.errors import Refused
from server.files import lock
from server.files.store import Area, Limits, Store

from tests.helpers import create_user

TABS = 16
ROUNDS = 12


def tabs_of(server, client, n):
    """n browser tabs of one signed-in student: same cookies, each its own
    connections (so the kernel may hand them to any worker)."""
    tabs = []
    for _ in range(n):
        tab = server.client()
        tab.http.cookies.update(client.http.cookies)
        tabs.append(tab)
    return tabs


def put(tab, path, data, etag=None):
    headers = {"If-Match": f'"{etag}"'} if etag else {}
    tab.http.close()  # a new connection: any worker may take it
    return tab.request("PUT", "/api/files/home/" + path, data=data, headers=headers, timeout=60)


def at_once(fns):
    """Call every fn from its own thread, released together; their results."""
    gate = threading.Barrier(len(fns))

    def call(fn):
        gate.wait()
        return fn()

    with ThreadPoolExecutor(len(fns)) as pool:
        return list(pool.map(call, fns))


@pytest.mark.parametrize("processes", [1, 2], ids=["1proc", "2proc"])
def test_many_tabs_with_the_same_if_match_exactly_one_wins_every_round(start_server, fresh_db, processes):
    server = start_server(processes=processes, FILE_PROCESSES=16)
    create_user(fresh_db, "ada", "ada-password")
    ada = server.client()
    ada.login_ok("ada", "ada-password")
    tabs = tabs_of(server, ada, TABS)
    etag = put(ada, "essay.py", b"# v0\n").json()["etag"]
    winners, workers = [], set()
    for rnd in range(ROUNDS):
        answers = at_once([lambda t=t, i=i: put(t, "essay.py", f"# round {rnd} tab {i}\n".encode(), etag)
                           for i, t in enumerate(tabs)])
        workers |= {int(r.headers["X-Worker-Pid"]) for r in answers}
        codes = sorted(r.status_code for r in answers)
        won = [r for r in answers if r.status_code == 200]
        winners.append(len(won))
        assert set(codes) <= {200, 409}, [r.text for r in answers if r.status_code not in (200, 409)]
        assert len(won) == 1, f"round {rnd}: {len(won)} of {TABS} saves acknowledged for one version"
        etag = won[0].json()["etag"]
        # The acknowledged text is the one on disk; every loser was shown it.
        now = ada.get("/api/files/home/essay.py").json()
        assert now["etag"] == etag
        for lost in (r for r in answers if r.status_code == 409):
            assert lost.json()["current"]["etag"] == etag
    print(f"{processes} process(es): acknowledged per version over {ROUNDS} rounds of {TABS} tabs: {winners}")
    if processes > 1:
        assert workers == set(server.pids), f"only {workers} of {server.pids} answered"


@pytest.mark.parametrize("processes", [1, 2], ids=["1proc", "2proc"])
def test_concurrent_big_saves_never_overshoot_the_quota(start_server, fresh_db, data_dir, processes):
    quota, size, tabs = 8 << 20, 1 << 20, 24
    server = start_server(processes=processes, QUOTA_BYTES=quota, MAX_FILE_BYTES=2 << 20)
    create_user(fresh_db, "ada", "ada-password")
    ada = server.client()
    ada.login_ok("ada", "ada-password")
    home = os.path.join(data_dir, "storage", "home", "ada")
    answers = at_once([lambda t=t, i=i: put(t, f"big{i}.bin", os.urandom(size))
                       for i, t in enumerate(tabs_of(server, ada, tabs))])
    codes = [r.status_code for r in answers]
    assert set(codes) <= {200, 507}, codes
    assert all(r.json()["error"] == "quota_exceeded" for r in answers if r.status_code == 507)
    stored = sum(os.path.getsize(os.path.join(home, n)) for n in os.listdir(home))
    print(f"{processes} process(es): {codes.count(200)} of {tabs} 1 MiB saves acknowledged, "
          f"{stored / 2**20:.2f} MiB stored under a {quota >> 20} MiB quota")
    assert stored <= quota, f"{stored} bytes stored under a quota of {quota}"
    assert codes.count(200) == quota // size - 1  # hello.py takes a little of the last MiB


@pytest.mark.parametrize("processes", [1, 2], ids=["1proc", "2proc"])
def test_a_flood_of_new_files_never_passes_the_files_quota(start_server, fresh_db, data_dir, processes):
    quota_files, saves = 100, 400
    server = start_server(processes=processes, QUOTA_FILES=quota_files)
    create_user(fresh_db, "ada", "ada-password")
    ada = server.client()
    ada.login_ok("ada", "ada-password")
    tabs = tabs_of(server, ada, 32)

    def save(i):
        return put(tabs[i % len(tabs)], f"f{i}.py", b"x = 1\n").status_code

    with ThreadPoolExecutor(len(tabs)) as pool:
        codes = list(pool.map(save, range(saves)))
    home = os.path.join(data_dir, "storage", "home", "ada")
    stored = len(os.listdir(home))
    print(f"{processes} process(es): {saves} new files 32 at a time under QUOTA_FILES={quota_files}: "
          f"{codes.count(200)} acknowledged, {stored} stored")
    assert set(codes) <= {200, 507}, codes
    assert stored <= quota_files and stored == codes.count(200) + 1  # + hello.py


def test_a_save_refused_for_the_quota_says_how_much_to_delete(start_server, fresh_db):
    """The 507 of a refused save says how much is used, of what, and how
    much to delete (the sentence runs refuse with too)."""
    server = start_server(QUOTA_BYTES=64 << 10)
    create_user(fresh_db, "ada", "ada-password")
    ada = server.client()
    ada.login_ok("ada", "ada-password")
    assert put(ada, "a.bin", b"#" * (40 << 10)).status_code == 200
    r = put(ada, "b.bin", b"#" * (40 << 10))
    assert r.status_code == 507, r.text
    body = r.json()
    assert body["error"] == "quota_exceeded"
    assert "of 64 KiB" in body["message"] and "Delete at least" in body["message"], body["message"]


def test_threads_of_one_process_exclude_each_other_and_leave_no_lock_behind(tmp_path):
    """The Store alone, from many threads (as a worker's file threads reach it): 32 threads race
    one If-Match on one area, 100 times; others save in their own areas.
    Exactly one wins each race, and the in-memory lock table is empty after."""
    store = Store(str(tmp_path), Limits(1 << 30, 100_000, 1 << 20, 3))
    try:
        ada, others = Area.home("ada"), [Area.home(f"s{i}") for i in range(8)]
        etag = store.save(ada, ("race.py",), b"v0", None)["etag"]
        for rnd in range(100):
            def attempt(i, etag=etag):
                if i % 4 == 3:  # a quarter of the threads work in other areas meanwhile
                    store.save(others[i % 8], (f"r{rnd}-{i}.py",), b"x", None)
                    return None
                try:
                    return store.save(ada, ("race.py",), f"r{rnd} t{i}".encode(), etag)["etag"]
                except Refused as e:
                    assert e.code == "conflict"
                    return None
            won = [e for e in at_once([lambda i=i: attempt(i) for i in range(32)]) if e]
            assert len(won) == 1, f"round {rnd}: {len(won)} threads won"
            etag = won[0]
        assert lock.held() == 0
    finally:
        store.close()
