"""The storage failing, filling and hanging under a real server, as issue 20
found it: saves answered 500 with tracebacks on a read-only file system,
sign-ins failed with it, and every request waited out a frozen mount.

The storage here is a real file system that misbehaves on demand: faultfs
(tests/faultfs.py), a FUSE passthrough run with the system Python, mounted
over a temporary folder and given to the server as STORAGE_ROOT. Its mode
is switched while the server runs: fail with EROFS, EIO or ENOSPC, hang
every call until released, or answer slowly.

What a student must see: a JSON answer with a plain sentence (503, or 507
for a full disk; Retry-After where waiting helps), never a 500; sign-in and
the session answer whatever the storage does; a hung storage is answered
within the deadline; /readyz says what is wrong; the log says it once per
worker, not once per request; and once the storage works again, saves do,
with nothing acknowledged lost."""
import os
import collections
import re
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from loadtest.harness import ADMIN_PASSWORD
from tests.helpers import create_user

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYSTEM_PYTHON = "/usr/bin/python3"
PASSWORD = "a-test-password"
HANG_GUARD = 30  # seconds: only a request that waits out the hang takes this long


class FaultFS:
    """A faultfs mount: `path` is the folder to use as STORAGE_ROOT, `source`
    the real folder behind it; set(mode) switches what it does."""

    def __init__(self, base):
        self.base = base
        self.source, self.path = os.path.join(base, "source"), os.path.join(base, "storage")
        self.control = os.path.join(base, "control")
        for folder in (self.source, self.path):
            os.mkdir(folder, 0o755)
        self._write_control("normal")
        self.log = os.path.join(base, "faultfs.log")  # a file, not a pipe nobody reads while tests run
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([SYSTEM_PYTHON, os.path.join(ROOT, "tests", "faultfs.py"), self.source,
                                          self.path, self.control], stdout=log, stderr=subprocess.STDOUT)
        self._wait_ack("normal")
        deadline = time.monotonic() + 10
        while not os.path.ismount(self.path):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"faultfs did not mount: {self.output()}")
            time.sleep(0.02)

    def output(self):
        with open(self.log) as f:
            return f.read()

    def _write_control(self, mode):
        temp = self.control + ".tmp"
        with open(temp, "w") as f:
            f.write(mode)
        os.replace(temp, self.control)

    def _wait_ack(self, mode):
        deadline = time.monotonic() + 10
        while True:
            try:
                with open(self.control + ".ack") as f:
                    if f.read() == mode:
                        return
            except FileNotFoundError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"faultfs did not take mode {mode!r}: {self.output()}")
            time.sleep(0.02)

    def set(self, mode):
        """'normal', 'delay <ms>', 'hang', 'fail EROFS|EIO|ENOSPC'; in force on return."""
        self._write_control(mode)
        self._wait_ack(mode)

    def close(self):
        if self.proc.poll() is None:
            self.set("normal")  # calls held by a hang finish
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if os.path.ismount(self.path):
            subprocess.run(["fusermount3", "-u", "-z", self.path], capture_output=True)


@pytest.fixture
def faultfs():
    """A faultfs mount to use as STORAGE_ROOT. Request it before start_server,
    so that the server stops before the mount goes."""
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse on this machine: the kernel's FUSE is needed for a file system that misbehaves")
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import pyfuse3, trio"], capture_output=True, text=True)
    if probe.returncode != 0 or not shutil.which("fusermount3"):
        pytest.fail("faultfs needs fuse3 and python3-pyfuse3: run scripts/install-system-deps as root")
    base = tempfile.mkdtemp(prefix="pyclassroom-test-faultfs-")
    os.chmod(base, 0o755)
    fs = FaultFS(base)
    try:
        yield fs
    finally:
        fs.close()
        print(f"--- faultfs output ---\n{fs.output()}")  # shown when the test fails
        shutil.rmtree(base, ignore_errors=True)


def student(server, dsn):
    """A new student, signed in: (client, username)."""
    username = f"ada-{uuid.uuid4().hex[:6]}"
    create_user(dsn, username, PASSWORD)
    client = server.client()
    r = client.login(username, PASSWORD)
    assert r.status_code == 200, r.text
    return client, username


def save(client, path, text, etag=None):
    headers = {"Content-Type": "text/plain; charset=utf-8"}
    if etag:
        headers["If-Match"] = f'"{etag}"'
    return client.request("PUT", "/api/files/home/" + path, data=text.encode(), headers=headers,
                          timeout=HANG_GUARD)


def load(client, path):
    return client.get("/api/files/home/" + path, timeout=HANG_GUARD)


def assert_refused(r, status, code):
    """A JSON refusal with a plain sentence, never a 500 or a traceback."""
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert body["error"] == code, body
    assert body["message"].endswith(".") and "Traceback" not in body["message"] and "Errno" not in body["message"]


def logged(server, pattern):
    return len(re.findall(pattern, server.output()))


def until(fn, tries=40, pause=0.5):
    """fn()'s first true answer, asked at most `tries` times."""
    for _ in range(tries):
        answer = fn()
        if answer:
            return answer
        time.sleep(pause)
    raise AssertionError(f"{fn.__doc__ or fn} never came true")


def saves_again(client, path, text):
    """A save after the storage is back, retried a bounded number of times."""
    def saved():
        current = load(client, path)  # an edit names the version it replaces (If-Match)
        r = save(client, path, text, current.json().get("etag") if current.status_code == 200 else None)
        return r.json()["etag"] if r.status_code == 200 else None
    return until(saved)


# What each failure gives a save and a load of an existing file, and what /readyz says.
FAILURES = [
    ("fail EROFS", (503, "storage_read_only"), 200, "read_only", 503),
    ("fail EIO", (503, "storage_error"), (503, "storage_error"), "failing", 503),
    ("fail ENOSPC", (507, "storage_full"), 200, "full", 200),
]


@pytest.mark.parametrize("mode, save_answer, load_answer, state, ready_status", FAILURES,
                         ids=["read-only", "io-error", "full"])
def test_a_failing_storage_is_answered_in_words_and_sign_in_still_works(
        faultfs, start_server, fresh_db, mode, save_answer, load_answer, state, ready_status):
    server = start_server(STORAGE_ROOT=faultfs.path)
    ada, _ = student(server, fresh_db)
    acknowledged = "print('saved before the storage failed')\n"
    r = save(ada, "notes.py", acknowledged)
    assert r.status_code == 200, r.text
    etag = r.json()["etag"]

    faultfs.set(mode)
    for i in range(5):
        r = save(ada, "notes.py", f"print('edit {i}')\n", etag)
        assert_refused(r, *save_answer)
        if save_answer[0] == 503:
            assert int(r.headers["Retry-After"]) > 0
    r = load(ada, "notes.py")
    if load_answer == 200:
        assert r.status_code == 200 and r.json()["content"] == acknowledged, r.text
    else:
        assert_refused(r, *load_answer)
    # Signing in and the session need no storage.
    newcomer, _ = student(server, fresh_db)
    assert newcomer.get("/api/me").status_code == 200
    assert ada.get("/api/me").status_code == 200

    def ready_says():
        r = server.client().get("/readyz", timeout=HANG_GUARD)
        return [r] if r.json().get("storage", {}).get("state") == state else None  # a 503 is falsy
    ready, = until(ready_says)
    assert ready.status_code == ready_status, ready.text
    assert ready.json()["storage"]["message"].endswith(".")
    admin = server.client()
    admin.login_ok("admin", ADMIN_PASSWORD)
    assert admin.get("/api/status", timeout=HANG_GUARD).json()["storage"]["state"] == state

    faultfs.set("normal")
    saves_again(ada, "notes.py", "print('after')\n")
    assert load(ada, "notes.py").json()["content"] == "print('after')\n"
    assert until(lambda: server.client().get("/readyz").status_code == 200)
    out = server.output()
    assert "Traceback" not in out and "internal_error" not in out, out
    assert logged(server, r"file storage (read-only|failing|full):") == 1, out  # once, not per request
    # The server's output is read by a thread of the test: the line may come a moment after /readyz says so.
    until(lambda: logged(server, r"file storage works again"))
    assert logged(server, r"file storage works again") == 1, server.output()


def test_a_read_only_storage_with_two_workers_loses_nothing_acknowledged(faultfs, start_server, fresh_db):
    server = start_server(processes=2, STORAGE_ROOT=faultfs.path)
    clients = [student(server, fresh_db)[0] for _ in range(4)]
    kept, etags = {}, {}
    for n, client in enumerate(clients):
        text = f"print({n})\n"
        r = save(client, "mine.py", text)
        assert r.status_code == 200, r.text
        kept[n], etags[n] = text, r.json()["etag"]
    faultfs.set("fail EROFS")
    for n, client in enumerate(clients):
        assert_refused(save(client, "mine.py", f"print('lost {n}')\n", etags[n]), 503, "storage_read_only")
        assert load(client, "mine.py").json()["content"] == kept[n]
        assert student(server, fresh_db)[0].get("/api/me").status_code == 200
    faultfs.set("normal")
    for n, client in enumerate(clients):
        assert load(client, "mine.py").json()["content"] == kept[n]
        saves_again(client, "mine.py", f"print('again {n}')\n")
    assert "Traceback" not in server.output()
    assert logged(server, r"file storage read-only:") <= 2  # at most once per worker


@pytest.mark.parametrize("processes", [1, 2])
def test_a_hung_storage_is_answered_within_the_deadline_and_recovers(faultfs, start_server, fresh_db, processes):
    server = start_server(processes=processes, STORAGE_ROOT=faultfs.path)
    ada, _ = student(server, fresh_db)
    bob, _ = student(server, fresh_db)
    acknowledged, etags = {}, {}
    for client, name in ((ada, "ada"), (bob, "bob")):
        text = f"print('{name} saved this before the hang')\n"
        r = save(client, "work.py", text)
        assert r.status_code == 200, r.text
        acknowledged[name], etags[name] = text, r.json()["etag"]

    faultfs.set("hang")
    try:
        waits = []
        for client, name in ((ada, "ada"), (bob, "bob")):
            started = time.monotonic()
            r = save(client, "work.py", "print('an edit the storage never took')\n", etags[name])
            waits.append(time.monotonic() - started)
            assert_refused(r, 503, "storage_not_answering")
            assert "not answering" in r.json()["message"] and "kept in this browser" in r.json()["message"]
            assert int(r.headers["Retry-After"]) > 0
            started = time.monotonic()
            assert_refused(load(client, "work.py"), 503, "storage_not_answering")
            waits.append(time.monotonic() - started)
        print(f"hung storage: a student waited {min(waits):.1f}-{max(waits):.1f} s for the message "
              f"(FILE_DEADLINE {server.env.get('FILE_DEADLINE', 5)} s)")
        # Sign-in, the session and liveness do not wait for the storage.
        newcomer, _ = student(server, fresh_db)
        assert newcomer.get("/api/me", timeout=HANG_GUARD).status_code == 200
        assert ada.get("/api/me", timeout=HANG_GUARD).status_code == 200
        assert server.client().get("/healthz", timeout=HANG_GUARD).status_code == 200

        def failing():
            r = server.client().get("/readyz", timeout=HANG_GUARD)
            return r.status_code == 503 and r.json()["error"] == "storage_failing"
        until(failing)
        # The admin's status page answers too, and says so (on the worker that answers it, in time).
        admin = server.client()
        admin.login_ok("admin", ADMIN_PASSWORD)
        until(lambda: admin.get("/api/status", timeout=HANG_GUARD).json()["storage"]["state"] == "failing")
    finally:
        faultfs.set("normal")

    # Back: saves work again within a few tries, and nothing acknowledged was lost.
    for client, name in ((ada, "ada"), (bob, "bob")):
        content = until(lambda: (r := load(client, "work.py")).status_code == 200 and r.json()["content"])
        assert content in (acknowledged[name], "print('an edit the storage never took')\n")
        saves_again(client, "work.py", f"print('{name} after the hang')\n")
        assert load(client, "work.py").json()["content"] == f"print('{name} after the hang')\n"
    assert until(lambda: server.client().get("/readyz").status_code == 200)
    out = server.output()
    assert "Traceback" not in out and "internal_error" not in out, out
    assert 1 <= logged(server, r"file storage failing:") <= processes, out


def test_a_slow_storage_is_named_by_readyz(faultfs, start_server, fresh_db):
    server = start_server(STORAGE_ROOT=faultfs.path)
    faultfs.set("delay 250")

    def slow():
        r = server.client().get("/readyz", timeout=HANG_GUARD)
        return [r] if r.json().get("storage", {}).get("state") == "slow" else None
    r, = until(slow)
    assert r.status_code == 200  # slow, not out of service
    faultfs.set("normal")
    assert until(lambda: server.client().get("/readyz").json()["storage"]["state"] == "ok")


def test_one_students_hung_files_do_not_stall_the_others(faultfs, start_server, fresh_db):
    """Only ada's files hang (her names, as a stuck export would): her calls
    hold two of the four file processes until their deadline, then those
    are replaced; bob's saves go to the others meanwhile."""
    server = start_server(STORAGE_ROOT=faultfs.path, FILE_PROCESSES="4")
    (ada, ada_name), (bob, _) = student(server, fresh_db), student(server, fresh_db)
    etags = {}
    for client in (ada, bob):
        r = save(client, "work.py", "print('before')\n")
        assert r.status_code == 200, r.text
        etags[client] = r.json()["etag"]

    faultfs.set(f"hang-name {ada_name}")
    try:
        with ThreadPoolExecutor(2) as pool:
            stuck = [pool.submit(save, ada, "work.py", "print('held')\n", etags[ada]) for _ in range(2)]
            time.sleep(0.5)  # for her calls to reach the storage
            for i in range(10):
                r = save(bob, "work.py", f"print({i})\n", etags[bob])
                assert r.status_code == 200, r.text
                etags[bob] = r.json()["etag"]
            # Bob was answered ten times while her calls still waited: not behind them.
            assert not any(f.done() for f in stuck)
            for f in stuck:
                assert f.result().status_code in (503, 409)  # 409: the other of her two saves won
            assert any(f.result().json()["error"] == "storage_not_answering" for f in stuck)
        assert save(bob, "work.py", "print('still')\n", etags[bob]).status_code == 200
    finally:
        faultfs.set("normal")
    saves_again(ada, "work.py", "print('after')\n")
    assert load(ada, "work.py").json()["content"] == "print('after')\n"
    assert "Traceback" not in server.output()


class Student(threading.Thread):
    """Types and saves (If-Match), loads, asks who she is and signs in again,
    in turn, until told to stop; keeps every answer with the phase it fell in."""

    def __init__(self, server, dsn, phase, stop):
        super().__init__(daemon=True)
        self.server, self.phase, self.stop = server, phase, stop
        self.username = f"kid-{uuid.uuid4().hex[:6]}"
        create_user(dsn, self.username, PASSWORD)
        self.client = server.client()
        assert self.client.login(self.username, PASSWORD).status_code == 200
        self.answers = []  # (phase, operation, status, error code, seconds)
        self.answers_by_phase = []  # (the phase's number, operation, status, error code)
        self.etag, self.acknowledged, self.maybe, self.n = None, None, [], 0

    def call(self, op, fn):
        started = time.monotonic()
        r = fn()
        body = r.json()  # every answer is JSON
        mode, number = tuple(self.phase)
        code = body.get("error") if isinstance(body, dict) else None
        self.answers.append((mode, op, r.status_code, code, time.monotonic() - started))
        self.answers_by_phase.append((number, op, r.status_code, code))
        return r, body

    def run(self):
        while not self.stop.is_set():
            self.n += 1
            text = f"print({self.n})  # {self.username}\n"
            r, body = self.call("save", lambda: save(self.client, "class.py", text, self.etag))
            if r.status_code == 200:
                self.etag, self.acknowledged, self.maybe = body["etag"], text, []
            elif r.status_code == 409:  # a save answered 503 was made after all: take the file as it is
                self.etag = body["current"]["etag"]
            elif body["error"] in ("storage_not_answering", "file_process_lost"):
                self.maybe.append(text)  # may or may not have been made, as when a connection drops
            self.call("load", lambda: load(self.client, "class.py"))
            self.call("me", lambda: self.client.get("/api/me", timeout=HANG_GUARD))
            if self.n % 5 == 0:
                fresh = self.server.client()
                self.call("login", lambda: fresh.login(self.username, PASSWORD))
            time.sleep(0.2)


PHASE_GUARD = 30  # seconds: a hang guard for a phase the class never meets


def all_saved(students, phase_no):
    """Every student has saved (200) since phase number `phase_no` began."""
    return all(any(p == phase_no and op == "save" and status == 200 for p, op, status, *_ in s.answers_by_phase)
               for s in students)


def refused(op, status, code):
    """A check that some student's `op` was answered `status`/`code` in the phase."""
    def met(students, phase_no):
        return any(a[:4] == (phase_no, op, status, code) for s in students for a in s.answers_by_phase)
    return met


def test_a_class_meets_every_fault_in_turn_and_loses_nothing_acknowledged(faultfs, start_server, fresh_db):
    server = start_server(processes=2, STORAGE_ROOT=faultfs.path, FILE_PROCESSES="4")
    phase, stop = ["normal", 0], threading.Event()  # the mode in force, and the phase's number
    students = [Student(server, fresh_db, phase, stop) for _ in range(16)]
    for s in students:
        s.start()
    try:
        # Each phase lasts until the class has met it (a hang guard of PHASE_GUARD
        # seconds, then on: the assertions below say what was missed), and at
        # least a second of the class's calls. The hang lasts its 8 s as
        # before: calls that began in it then meet their deadline (5 s) in it,
        # not after the storage is back (which would log 'failing' anew).
        for mode, least, met in (("normal", 1, all_saved), ("fail EROFS", 1, refused("save", 503, "storage_read_only")),
                                 ("normal", 1, all_saved), ("hang", 8, refused("save", 503, "storage_not_answering")),
                                 ("normal", 1, all_saved), ("fail ENOSPC", 1, refused("save", 507, "storage_full")),
                                 ("fail EIO", 1, refused("save", 503, "storage_error")), ("normal", 1, all_saved)):
            faultfs.set(mode)
            number = phase[1] + 1
            phase[:] = [mode, number]
            time.sleep(least)
            deadline = time.monotonic() + PHASE_GUARD
            while not met(students, number) and time.monotonic() < deadline:
                time.sleep(0.1)
    finally:
        stop.set()
        faultfs.set("normal")
        for s in students:
            s.join(HANG_GUARD)
    answers = [a for s in students for a in s.answers]
    by = collections.Counter((p, op, status, code) for p, op, status, code, _ in answers)
    print("\n".join(f"{k}: {v}" for k, v in sorted(by.items(), key=str)))
    hung = [seconds for p, _, _, _, seconds in answers if p == "hang"]
    print(f"during the hang: {len(hung)} answers, the slowest after {max(hung):.1f} s")

    allowed = {200, 409, 503, 507}
    assert all(status in allowed for _, _, status, _, _ in answers), by
    assert all(seconds < HANG_GUARD for *_, seconds in answers)  # hang guard: no request waited out the hang
    # Sign-in and the session answered whatever the storage did.
    assert all(status == 200 for p, op, status, _, _ in answers if op in ("login", "me")), by
    # The faults were met, each with its own answer.
    assert by[("fail EROFS", "save", 503, "storage_read_only")]
    assert by[("fail ENOSPC", "save", 507, "storage_full")]
    assert by[("fail EIO", "save", 503, "storage_error")]
    assert sum(v for k, v in by.items() if k[0] == "hang" and k[3] == "storage_not_answering")
    # Back to normal, every student saved again.
    for s in students:
        assert any(p == "normal" and op == "save" and status == 200 for p, op, status, _, _ in s.answers[-12:])
    # Nothing acknowledged was lost: the file holds the last acknowledged save or one made after it.
    for s in students:
        content = load(s.client, "class.py").json()["content"]
        assert content in [s.acknowledged] + s.maybe, (s.username, content, s.acknowledged)
    out = server.output()
    assert "Traceback" not in out and "internal_error" not in out, out
    for state in ("read-only", "full", "failing"):  # once per episode and worker, not per request
        assert logged(server, rf"file storage {state}:") <= 2 * 2, out
