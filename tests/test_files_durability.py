"""Saved files survive what a real class throws at the server: a crash in
the middle of a save, a full disk, full quotas, oversized files, and a big
zip download to a slow browser. Everything runs against the real server."""
import errno
import hashlib
import io
import os
import random
import shutil
import signal
import subprocess
import threading
import time
import zipfile

import psutil
import pytest
import requests

from loadtest.bench_zip import download_slowly

from tests.helpers import create_user

TEMP_PREFIX = ".~pyc"  # server/files/paths.RESERVED_PREFIX: the store's own names
USER, PASSWORD = "ada", "ada-password-1"


def login(server, username=USER, password=PASSWORD):
    client = server.client()
    client.login_ok(username, password)
    return client


def home_on_disk(storage_root, username=USER):
    return os.path.join(storage_root, "home", username)


def read_disk(path):
    with open(path, "rb") as f:
        return f.read()


def put(client, path, data, etag=None, **kwargs):
    """PUT a file; If-Match only when `etag` is given (absent = create only)."""
    headers = {"If-Match": f'"{etag}"'} if etag else {}
    return client.request("PUT", "/api/files/home/" + path, data=data, headers=headers, **kwargs)


def temp_files(folder):
    return [n for n in os.listdir(folder) if n.startswith(TEMP_PREFIX)]


# -- a. crash consistency ------------------------------------------------------

CRASH_FILE = "lesson/crash.py"
CYCLES = 6


def content_of(seq):
    """The unique content of save number `seq`: a header naming the sequence
    number and the sha256 of a 2-4 KiB body derived from it, so any content
    read back can be checked on its own (not torn) and matched to its save."""
    rng = random.Random(seq)
    body = rng.randbytes(rng.randint(1024, 2048)).hex()
    return f"seq={seq} sha256={hashlib.sha256(body.encode()).hexdigest()}\n{body}\n"


def check_self_consistent(text):
    header, _, rest = text.partition("\n")
    seq = int(header.split()[0].removeprefix("seq="))
    assert text == content_of(seq), f"torn or foreign content (header {header!r}, {len(text)} chars)"
    return seq


def kill_everything(server):
    """SIGKILL every process of the server at once, as a power cut would: no
    handler, no cleanup. Workers first: a worker outliving its parent would
    get SIGTERM (PDEATHSIG) and could finish gracefully. Their file
    processes last: one that outlived its worker's answer would be refused
    as lost (a 503), which a power cut never shows."""
    below = [p.pid for p in psutil.Process(server.proc.pid).children(recursive=True)]
    workers = [pid for pid in server.pids if pid != server.proc.pid]
    victims = workers + [server.proc.pid] + [pid for pid in below if pid not in workers]
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    server.proc.wait(10)
    # Workers are not our children: wait until they are gone (or zombies),
    # so nothing can touch the file while we inspect it.
    deadline = time.monotonic() + 10
    for pid in victims:
        while _alive(pid):
            assert time.monotonic() < deadline, f"pid {pid} survived SIGKILL"
            time.sleep(0.01)


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def save_until_killed(client, etag, seq, acked):
    """Save new content in a tight loop until a request fails because the
    server is gone. Returns (last acknowledged content, the content of the
    request that got no answer, next seq). Every 200 is checked: the server
    must never acknowledge anything but what we sent."""
    deadline = time.monotonic() + 30
    while True:
        assert time.monotonic() < deadline, "the server was never killed"
        seq += 1
        in_flight = content_of(seq)
        try:
            r = put(client, CRASH_FILE, in_flight.encode(), etag, timeout=10)
        except requests.RequestException:
            return acked, in_flight, seq
        assert r.status_code == 200, r.text
        assert r.json()["etag"] == hashlib.sha256(in_flight.encode()).hexdigest()[:20]
        etag, acked = r.json()["etag"], in_flight


def assert_no_temp_listed(client):
    for path in ("/api/files/home", "/api/files/home/lesson", "/api/files/home?tree=1"):
        r = client.get(path)
        assert r.status_code == 200, r.text
        names = [e.get("name") or e.get("path") for e in r.json()["entries"]]
        assert not [n for n in names if TEMP_PREFIX in n], f"{path} lists temporary files: {names}"


@pytest.mark.parametrize("processes", [1, 2], ids=["1proc", "2proc"])
def test_sigkill_mid_save_leaves_the_acknowledged_or_the_in_flight_content(
        processes, start_server, fresh_db, data_dir):
    on_disk = os.path.join(home_on_disk(os.path.join(data_dir, "storage")), *CRASH_FILE.split("/"))
    server = start_server(processes=processes)
    create_user(fresh_db, USER, PASSWORD)  # after start-up: the server creates the tables
    client = login(server)
    seq = 0
    acked = content_of(seq)
    r = put(client, CRASH_FILE, acked.encode())
    assert r.status_code == 200, r.text
    etag = r.json()["etag"]
    rng = random.Random()
    in_flight_won = 0
    for cycle in range(CYCLES):
        killer = threading.Timer(rng.uniform(0.2, 1.0), kill_everything, [server])
        killer.start()
        acked, in_flight, seq = save_until_killed(client, etag, seq, acked)
        killer.join()

        # What survived, before anything else runs: disk first, then the API.
        survived = read_disk(on_disk).decode()
        assert survived, "the file is empty after a crash"
        check_self_consistent(survived)
        assert survived in (acked, in_flight), (
            f"cycle {cycle}: found {survived[:40]!r}, acknowledged {acked[:40]!r}, in flight {in_flight[:40]!r}")
        in_flight_won += survived == in_flight

        server = start_server(processes=processes)  # same database and DATA_DIR
        client = login(server)
        r = client.get("/api/files/home/" + CRASH_FILE)
        assert r.status_code == 200, r.text
        assert r.json()["content"] == survived
        etag = r.json()["etag"]
        assert r.headers["ETag"] == f'"{etag}"'
        assert_no_temp_listed(client)
        acked = survived  # the next cycle continues from what survived
    # Informational: how often the kill came after the rename of an unanswered save.
    print(f"{processes} process(es): {CYCLES} crashes, in-flight save survived {in_flight_won} times, "
          f"temp files left on disk: {temp_files(os.path.dirname(on_disk))}")


# -- b. full disk, quotas, file size --------------------------------------------

@pytest.fixture
def small_tmpfs(request, data_dir):
    """A 2 MiB tmpfs to use as STORAGE_ROOT, unmounted afterwards (extra
    mount options by indirect parametrization). Request it before
    start_server so the server stops before the unmount."""
    options = "size=2m,mode=0755" + getattr(request, "param", "")
    mnt = os.path.join(data_dir, "small-storage")
    os.mkdir(mnt)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root or CAP_SYS_ADMIN): {done.stderr.strip()}")
    try:
        yield str(mnt)
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)  # still busy: detach


def fill(folder, leave):
    """Fill the file system of `folder` with a filler file until it is full,
    then give back about `leave` bytes. Returns the filler's path."""
    filler = os.path.join(folder, "filler.bin")
    block = b"\xff" * (64 << 10)
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(block)
                f.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
        written = f.tell()
    os.truncate(filler, max(0, written - leave))
    return filler


def free_bytes(folder):
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


def test_full_disk_refuses_the_save_with_507_and_keeps_the_old_content(small_tmpfs, start_server, fresh_db):
    server = start_server(STORAGE_ROOT=small_tmpfs)
    create_user(fresh_db, USER, PASSWORD)
    client = login(server)
    home = home_on_disk(small_tmpfs)
    old = b"print('the version before the disk filled up')\n"
    r = put(client, "notes.py", old)
    assert r.status_code == 200, r.text
    etag = r.json()["etag"]

    filler = fill(small_tmpfs, leave=128 << 10)
    big = os.urandom(256 << 10).hex().encode()[: 512 << 10]  # 512 KiB, more than is free
    assert len(big) > free_bytes(small_tmpfs)
    r = put(client, "notes.py", big, etag)
    assert r.status_code == 507, r.text
    assert r.json()["error"] == "storage_full"
    assert read_disk(os.path.join(home, "notes.py")) == old
    assert temp_files(home) == [], "a refused save left its temporary file behind"
    assert client.get("/api/files/home/notes.py").json()["etag"] == etag

    os.unlink(filler)
    r = put(client, "notes.py", big, etag)  # the same save, now that there is room
    assert r.status_code == 200, r.text
    assert read_disk(os.path.join(home, "notes.py")) == big
    assert temp_files(home) == []


@pytest.mark.parametrize("small_tmpfs", [",nr_inodes=64"], indirect=True)
def test_no_free_inode_refuses_the_save_with_507_not_500(small_tmpfs, start_server, fresh_db):
    """Space can also run out as inodes: then creating the temporary file
    (or a new folder) fails, before a byte is written."""
    server = start_server(STORAGE_ROOT=small_tmpfs)
    create_user(fresh_db, USER, PASSWORD)
    client = login(server)
    home = home_on_disk(small_tmpfs)
    old = b"print('old')\n"
    r = put(client, "notes.py", old)
    assert r.status_code == 200, r.text
    etag = r.json()["etag"]

    fillers = os.path.join(small_tmpfs, "fillers")
    os.mkdir(fillers)
    try:
        for i in range(1000):
            open(os.path.join(fillers, str(i)), "wb").close()
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
    else:
        pytest.fail("nr_inodes did not limit the number of files")
    for path, tag in (("notes.py", etag), ("new.py", None), ("lesson/new.py", None)):
        r = put(client, path, b"print('new')\n", tag)
        assert r.status_code == 507 and r.json()["error"] == "storage_full", (path, r.status_code, r.text)
    assert read_disk(os.path.join(home, "notes.py")) == old
    assert sorted(os.listdir(home)) == ["hello.py", "notes.py"]

    shutil.rmtree(fillers)
    assert put(client, "notes.py", b"print('new')\n", etag).status_code == 200
    assert put(client, "lesson/new.py", b"print('new')\n").status_code == 200


def test_quota_refuses_with_507_changes_nothing_and_deleting_makes_room(start_server, fresh_db, data_dir):
    server = start_server(QUOTA_BYTES=64 << 10, QUOTA_FILES=6)
    create_user(fresh_db, USER, PASSWORD)
    client = login(server)  # creates the home with hello.py: 1 file, ~200 bytes
    home = home_on_disk(os.path.join(data_dir, "storage"))
    chunk = b"#" * (20 << 10)

    # Bytes: three 20 KiB files fit in 64 KiB, a fourth does not.
    names = []
    for i in range(10):
        r = put(client, f"big{i}.py", chunk)
        if r.status_code != 200:
            break
        names.append(f"big{i}.py")
    assert r.status_code == 507 and r.json()["error"] == "quota_exceeded", r.text
    assert len(names) == 3
    refused = f"big{len(names)}.py"
    before = sorted(os.listdir(home))
    assert refused not in before and temp_files(home) == []
    # Growing an existing file past the quota is refused too, and changes nothing.
    etag = client.get("/api/files/home/big0.py").json()["etag"]
    r = put(client, "big0.py", chunk * 2, etag)
    assert r.status_code == 507 and r.json()["error"] == "quota_exceeded", r.text
    assert read_disk(os.path.join(home, "big0.py")) == chunk
    assert sorted(os.listdir(home)) == before

    assert client.request("DELETE", "/api/files/home/big1.py").status_code == 200
    r = put(client, refused, chunk)
    assert r.status_code == 200, r.text
    assert read_disk(os.path.join(home, refused)) == chunk

    # Files: hello.py, big0, big2, big3 and two small ones make 6; a 7th is refused.
    for name in ("small0.py", "small1.py"):
        assert put(client, name, b"x = 1\n").status_code == 200
    r = put(client, "small2.py", b"x = 1\n")
    assert r.status_code == 507 and r.json()["error"] == "quota_exceeded", r.text
    assert not os.path.exists(os.path.join(home, "small2.py"))
    # A refused save into a new folder does not leave the folder behind.
    r = put(client, "new/deeper/small2.py", b"x = 1\n")
    assert r.status_code == 507 and not os.path.exists(os.path.join(home, "new"))
    assert client.request("DELETE", "/api/files/home/small0.py").status_code == 200
    assert put(client, "small2.py", b"x = 1\n").status_code == 200


def test_oversized_save_gets_413_and_writes_nothing(start_server, fresh_db, data_dir):
    server = start_server(MAX_FILE_BYTES=32 << 10)
    create_user(fresh_db, USER, PASSWORD)
    client = login(server)
    home = home_on_disk(os.path.join(data_dir, "storage"))
    r = put(client, "huge.py", b"#" * (40 << 10))
    assert r.status_code == 413, r.text
    assert not os.path.exists(os.path.join(home, "huge.py"))
    small = b"print('small')\n"
    r = put(client, "ok.py", small)
    assert r.status_code == 200, r.text
    r = put(client, "ok.py", b"#" * (40 << 10), r.json()["etag"])
    assert r.status_code == 413, r.text
    assert read_disk(os.path.join(home, "ok.py")) == small
    assert temp_files(home) == []


# -- c. a big zip ----------------------------------------------------------------
# (What it costs the worker in memory is measured by python -m loadtest.bench_zip.)

def test_zip_of_a_big_folder_read_slowly_is_complete(start_server, fresh_db, data_dir):
    server = start_server(processes=1)
    create_user(fresh_db, USER, PASSWORD)
    client = login(server)
    home = home_on_disk(os.path.join(data_dir, "storage"))
    files = {f"big/part{i}.bin": os.urandom(1 << 20) for i in range(12)}  # incompressible
    files["big/sub/readme.txt"] = b"nested files are zipped too\n"
    for name, data in files.items():
        os.makedirs(os.path.dirname(os.path.join(home, name)), exist_ok=True)
        with open(os.path.join(home, name), "wb") as f:
            f.write(data)
    data = download_slowly(client, "/api/zip/home/big", timeout=120)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert zf.testzip() is None
        got = {"big/" + n: zf.read(n) for n in zf.namelist() if not n.endswith("/")}
    assert got == files
