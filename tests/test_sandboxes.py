"""The sandboxes used directly, as the run manager uses them: prepare, wait
for `ready`, send `go`, read the launcher's frames, wait, kill (no HTTP
server). Every test runs in `local` (bubblewrap) and `docker`.

Needs root (each program runs as a student's own uid). The docker tests
start dockerd and build the image offline (scripts/start-docker,
scripts/build-sandbox-image; minutes the first time, then cached).
"""
import asyncio
import dataclasses
import json
import os
import shutil
import socket
import subprocess
import tempfile

import pytest

from server import config
from server.runs import cgroups
from server.runs.protocol import INPUT, OSC, PROMPT
from server.runs.starts import ready
from server.runs.protocol import ImageParser, frame, read_frame
from server.runs.sandbox import SandboxKind, StartedSandbox
from server.runs.sandbox.launch import LAUNCHER_PROCESSES
from server.runs.sandbox.local import LocalKind, build_mpl_cache
from server.runs.spec import Limits

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGE = "pyclassroom-sandbox:latest"
UID = int(os.environ.get("SANDBOX_UID_BASE", 200000)) + 1  # as the server runs a student's code when it is root

if os.geteuid() != 0:
    pytest.skip("the sandboxes run programs as students' uids: these tests need root",
                allow_module_level=True)


@pytest.fixture(params=["local", "docker"])
def sandbox(request, data_dir):
    """sandbox(**settings) -> a sandbox of the kind, made as a worker makes it."""
    kind = request.param
    if kind == "docker":
        if not shutil.which("dockerd"):
            pytest.skip("docker.io is not installed (scripts/install-system-deps installs it)")
        request.getfixturevalue("docker_image")
        from server.runs.sandbox.docker import DockerKind
        make_kind = DockerKind
    else:
        make_kind = LocalKind
    made = []

    def make(**env):
        cfg = config.load(dict({"SANDBOX": kind, "SANDBOX_IMAGE": IMAGE, "DATA_DIR": data_dir},
                               **{k: str(v) for k, v in env.items()}))
        if kind == "local":
            build_mpl_cache(cfg)
        made.append(make_kind(cfg))
        return made[-1]

    yield make
    for s in made:
        s.close()


@pytest.fixture
def home(data_dir):
    """A student's home, owned by the uid the program runs as (in a folder
    that uid may walk through, as bubblewrap needs)."""
    path = tempfile.mkdtemp(prefix="home-", dir=data_dir)
    os.chown(path, UID, UID)
    return path


def write(home, name, source):
    path = os.path.join(home, name)
    with open(path, "w") as f:
        f.write(source)
    os.chown(path, UID, UID)


def settings(sandbox, **limits):
    """The launcher's settings as the run manager makes them, with `limits` changed."""
    return {"limits": dict(dataclasses.asdict(Limits.of(sandbox.cfg).program()), **limits), "nice": 10, "runs": 1}


async def start(sandbox, home, **limits):
    """A prepared sandbox whose launcher said `ready`."""
    prepared = await sandbox.prepare(home, UID, settings(sandbox, **limits))
    assert await ready(prepared), prepared.diagnostics()
    return prepared


def go(prepared, path="prog.py", args=()):
    prepared.send(frame(b"g", json.dumps({"path": path, "args": list(args)}).encode()))


async def drain(prepared, timeout=60):
    """Read the launcher's frames to its exit: (text, images, stderr, status)."""
    parser, text, images, err, status = ImageParser(), b"", [], b"", None

    async def read():
        nonlocal text, err, status
        while True:
            item = await read_frame(prepared.stdout)
            if item is None:
                return
            kind, payload = item
            if kind == b"o":
                for part, data in parser.feed(payload):
                    if part == "text":
                        text += data
                    elif part == "image":
                        images.append(data)
            elif kind == b"e":
                err += payload
            elif kind == b"X":
                status = json.loads(payload)
                return
    await asyncio.wait_for(read(), timeout)
    return text.decode(errors="replace"), images, err.decode(errors="replace"), status


async def finish(prepared):
    """After the run: the launcher's exit, and everything released."""
    exit_ = await asyncio.wait_for(prepared.wait(), 30)
    await prepared.kill()
    await prepared.release()
    return exit_


async def run(sandbox, home, source, **limits):
    """Run `source` to its end: (text, images, stderr, status, Exit, prepared)."""
    write(home, "prog.py", source)
    prepared = await start(sandbox, home, **limits)
    oom_before = prepared.oom_kills()
    go(prepared)
    text, images, err, status = await drain(prepared)
    oom = prepared.oom_kills() > oom_before
    exit_ = await finish(prepared)
    exit_.oom_killed = exit_.oom_killed or oom
    return text, images, err, status, exit_, prepared


def gone(prepared):
    """Nothing of the sandbox is left (its container, or its cgroup)."""
    if hasattr(prepared, "container"):
        return not containers(f"id={prepared.container}")
    return prepared.group is None or not any(os.path.exists(p) for p in prepared.group.dirs.values())


def containers(*filters):
    """Ids of the containers (running or not) matching docker ps filters."""
    argv = ["docker", "ps", "-a", "-q", "--no-trunc"]
    for f in filters:
        argv += ["--filter", f]
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.split()


def test_hello_and_nothing_is_left(sandbox, home):
    kind = sandbox()
    assert isinstance(kind, SandboxKind)  # the declared interface of a kind (runs/sandbox/__init__.py)
    text, _, err, status, exit_, prepared = asyncio.run(run(
        kind, home, "import sys\nprint('hello')\nprint('oops', file=sys.stderr)\n"))
    assert isinstance(prepared, StartedSandbox)  # ... and of what it started
    assert text == "hello\r\n"  # through the program's terminal
    assert err == "oops\n"
    assert status == {"code": 0, "signal": None, "interrupted": False, "memory_error": False}
    assert exit_.code == 0 and exit_.signal is None
    assert gone(prepared)


def test_input_reaches_the_program(sandbox, home):
    async def scenario():
        write(home, "prog.py", "name = input('Name? ')\nprint('Hi', name)\n")
        prepared = await start(sandbox(), home)
        go(prepared)
        # The prompt and the marks are three writes: a busy launcher may relay them
        # as one frame or more. Terminal output up to the input mark, frame by frame.
        kinds, prompt = set(), b""
        while not prompt.endswith(INPUT + b"\x07") and len(prompt) < 100:
            kind, payload = await asyncio.wait_for(read_frame(prepared.stdout), 20)
            kinds.add(kind)
            prompt += payload
        prepared.send(frame(b"d", b"Ada\n"))
        text, _, _, status = await drain(prepared)
        await finish(prepared)
        return kinds, prompt, text, status

    kinds, prompt, text, status = asyncio.run(scenario())
    # input() marks where its prompt starts and that it waits after it (the server cuts the marks out: protocol.py).
    assert (kinds, prompt) == ({b"o"}, OSC + PROMPT + b"\x07" + b"Name? " + OSC + INPUT + b"\x07")
    assert "Hi Ada" in text
    assert status["code"] == 0


def test_input_sent_with_the_go_reaches_the_program(sandbox, home):
    """A busy launcher (idle CPU priority) may read the run's start and the
    first typed input at once: the input still reaches the program."""
    async def scenario():
        write(home, "prog.py", "print('Hi', input())\n")
        prepared = await start(sandbox(), home)
        go_frame = frame(b"g", json.dumps({"path": "prog.py", "args": []}).encode())
        prepared.send(go_frame + frame(b"d", b"Ada\n"))  # one write: one read
        text, _, _, status = await drain(prepared, timeout=30)
        await finish(prepared)
        return text, status

    text, status = asyncio.run(scenario())
    assert "Hi Ada" in text and status["code"] == 0


def test_runs_as_the_students_uid_in_its_home(sandbox, home):
    source = ("import os\nprint(os.getcwd())\n"
              "open('made.txt', 'w').write('x')\nopen('/tmp/scratch', 'w').write('y')\n")
    text, *_ = asyncio.run(run(sandbox(), home, source))
    assert text.split() == ["/home/student"]
    assert os.stat(os.path.join(home, "made.txt")).st_uid == UID  # as the host sees it


def test_no_network(sandbox, home):
    source = """
import socket
try:
    socket.create_connection(("1.1.1.1", 53), timeout=3)
    print("connected")
except OSError as e:
    print("no network:", e)
print(sorted(name for _, name in socket.if_nameindex()))
"""
    text, *_ = asyncio.run(run(sandbox(), home, source))
    assert "no network:" in text and "connected" not in text
    assert "['lo']" in text


def test_read_only_root_and_no_docker_socket(sandbox, home):
    source = """
import os
for path in ("/usr/lib/evil", "/etc/evil", "/evil"):
    try:
        open(path, "w")
        print("wrote", path)
    except OSError as e:
        print("refused", path, e.errno)
print("docker.sock", any(os.path.exists(p) for p in ("/var/run/docker.sock", "/run/docker.sock")))
"""
    text, *_ = asyncio.run(run(sandbox(), home, source))
    assert "wrote" not in text
    assert text.count("refused") == 3
    assert "docker.sock False" in text


MEMORY_BOMB = "chunks = []\nwhile True:\n    chunks.append(bytearray(b'x') * (16 << 20))\n"


def test_memory_bomb_hits_the_per_process_limit(sandbox, home):
    _, _, err, status, *_ = asyncio.run(run(sandbox(RUN_MEMORY_MB=128), home, MEMORY_BOMB))
    assert status["memory_error"] and status["code"] == 1
    assert "MemoryError" in err


def test_memory_bomb_is_stopped_by_the_runs_cgroup(sandbox, home):
    """Without the per-process limit (memory_bytes 0), the run's cgroup still
    holds, and the kernel counts the OOM kill."""
    box = sandbox(RUN_MEMORY_MB=64)
    if box.name == "local" and box.groups is None:
        pytest.skip("no per-run cgroups here (needs root and cgroups)")
    _, _, _, status, exit_, _ = asyncio.run(run(box, home, MEMORY_BOMB, memory_bytes=0))
    assert exit_.oom_killed
    assert status is None or status["signal"] == 9  # the program was killed, or the launcher too


def test_fork_bomb_is_contained_by_the_runs_process_limit(sandbox, home):
    """Without the per-process RLIMIT_NPROC, the run's cgroup pids limit stops it."""
    source = """
import os, time
made = 0
try:
    while made < 10000:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        made += 1
except OSError as e:
    print("stopped after", made, e.errno)
"""
    box = sandbox(RUN_PROCESSES=20)
    if box.name == "local" and box.groups is None:
        pytest.skip("no per-run cgroups here (needs root and cgroups)")
    text, _, _, status, _, prepared = asyncio.run(run(box, home, source, processes=0))
    made = int(text.split("stopped after")[1].split()[0])
    assert made < 20 + LAUNCHER_PROCESSES
    assert status["code"] == 0
    assert gone(prepared)  # its sleeping children went with it


def test_kill_ends_everything_the_program_started(sandbox, home):
    source = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:
            time.sleep(0.1)
    os._exit(0)
print("started", flush=True)
while True:
    pass
"""

    async def scenario():
        write(home, "prog.py", source)
        prepared = await start(sandbox(), home)
        go(prepared)
        await asyncio.wait_for(read_frame(prepared.stdout), 30)
        waiting = asyncio.ensure_future(prepared.wait())  # pending while kill() runs
        await prepared.kill()
        exit_ = await asyncio.wait_for(waiting, 30)
        await prepared.kill()  # again: nothing to do, no error
        left = prepared.group.pids() if getattr(prepared, "group", None) else set()
        await prepared.release()
        return exit_, left, prepared

    exit_, left, prepared = asyncio.run(scenario())
    assert exit_.signal == 9
    assert left == set()
    assert gone(prepared)


def test_kill_of_a_sandbox_that_never_ran(sandbox, home):
    async def scenario():
        prepared = await start(sandbox(), home)
        await prepared.kill()
        await prepared.release()
        return prepared

    assert gone(asyncio.run(scenario()))


def test_output_is_not_read_ahead_without_bound(sandbox, home):
    """While nobody reads, the program stops at its next print."""
    source = ("import sys\nfor i in range(20000):\n    print('x' * 99)\n"
              "open('done', 'w').close()\n")

    async def scenario():
        write(home, "prog.py", source)
        prepared = await start(sandbox(), home)
        go(prepared)
        await asyncio.sleep(2)  # 2 MB would be printed by now if nothing held it back
        blocked = not os.path.exists(os.path.join(home, "done"))
        held = len(prepared.stdout._buffer)  # what the sandbox read ahead for us
        text, _, _, status = await drain(prepared, timeout=300)
        await finish(prepared)
        return blocked, held, text, status

    blocked, held, text, status = asyncio.run(scenario())
    assert blocked
    assert held <= 192 << 10  # STREAM_LIMIT plus at most a frame or two
    assert text.count("x" * 99) == 20000
    assert status["code"] == 0
    assert os.path.exists(os.path.join(home, "done"))


def test_matplotlib_plots(sandbox, home):
    source = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()\nprint('plotted')\n"
    text, images, err, *_ = asyncio.run(run(sandbox(), home, source))
    assert "plotted" in text, err
    assert len(images) == 1 and images[0].startswith(b"iVBORw0KGgo")  # a PNG, in base64


def test_cleanup_leftovers_removes_only_orphans(sandbox, home):
    box = sandbox()
    if box.name == "local":
        return _cleanup_of_local_cgroups(box, home)
    from server.runs.sandbox.docker import LABEL
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read().strip()
    owners = {
        "dead": f"{socket.gethostname()}/{boot}/999999999/1",  # a worker of this host, gone
        "unknown": None,  # no owner label: nobody will ever remove it
        "elsewhere": "another-host/some-boot/1/1",  # another host's worker sharing the daemon
    }
    made = {}
    for name, owner in owners.items():
        labels = ["--label", f"{LABEL}=1"] + (["--label", f"pyclassroom.owner={owner}"] if owner else [])
        made[name] = subprocess.run(["docker", "create", *labels, "--network", "none", IMAGE, "python3"],
                                    check=True, capture_output=True, text=True).stdout.strip()

    async def scenario():
        live = await start(box, home)  # this worker's own: kept
        removed = await box.cleanup_leftovers()
        alive = bool(containers(f"id={live.container}"))
        await live.kill()
        return removed, alive

    try:
        removed, alive = asyncio.run(scenario())
        assert alive
        assert removed >= 2
        assert not containers(f"id={made['dead']}")
        assert not containers(f"id={made['unknown']}")
        assert containers(f"id={made['elsewhere']}")
    finally:
        subprocess.run(["docker", "rm", "-f", *made.values()], capture_output=True)


def _cleanup_of_local_cgroups(box, home):
    """A worker killed with -9 leaves its sandboxes' cgroups, processes
    and all: the next worker kills and removes them; live ones stay."""
    if box.groups is None:
        pytest.skip("no per-run cgroups here (needs root and cgroups)")
    # A parent of this test's own: the sandboxes' parent is the machine's, and
    # another test process's server starting meanwhile would clean up the orphan first.
    box.groups = cgroups.Groups.detect(parent=f"pyclassroom-test-{os.getpid()}")
    orphan = subprocess.Popen(["sleep", "300"])
    dead_tag = "w999999999-1"
    dirs = {c: os.path.join(p, dead_tag + ".1") for c, p in box.groups.parents.items()}
    for path in dirs.values():
        os.makedirs(path, exist_ok=True)
    left = cgroups.RunGroup(box.groups.version, dirs)
    left.add(orphan.pid)

    async def scenario():
        live = await start(box, home)
        removed = await box.cleanup_leftovers()
        alive = not gone(live)
        await live.kill()
        await live.release()
        return removed, alive

    try:
        removed, alive = asyncio.run(scenario())
        assert removed == 1 and alive
        assert orphan.wait(10) == -9
        assert not any(os.path.exists(p) for p in dirs.values())
    finally:
        orphan.kill()
        for parent in box.groups.parents.values():
            os.rmdir(parent)


def test_works(sandbox):
    box = sandbox()
    assert type(box).works(box.cfg)
    if box.name == "docker":
        assert not type(box).works(config.load({"SANDBOX": "docker",
                                                "SANDBOX_IMAGE": "pyclassroom-no-such-image:0"}))
