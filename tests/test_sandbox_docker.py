"""The docker sandbox used directly, as the run handler uses it: prepare,
wait for `ready`, send `go`, read, wait (no HTTP server).

Needs root and docker.io: a session fixture starts the daemon
(scripts/start-docker) and builds the image offline
(scripts/build-sandbox-image; minutes the first time, then cached).
"""
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import time

import pytest

from server import config
from server.runs.sandbox import Limits
from server.runs import session
from server.runs.session import OscParser, Sandboxed, frame

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGE = "pyclassroom-sandbox:latest"
UID = 200001  # as the server runs a student's code when it is root

if os.geteuid() != 0:
    pytest.skip("the docker sandbox tests start dockerd and build an image: they need root",
                allow_module_level=True)
if not shutil.which("dockerd"):
    pytest.skip("docker.io is not installed (scripts/install-system-deps installs it)",
                allow_module_level=True)

docker = pytest.importorskip("docker", reason="the docker SDK is not installed (pip install -r requirements.txt)")
from server.runs.sandbox_docker import LABEL, DockerSandbox  # noqa: E402 (needs the SDK)


def make_cfg(**env):
    return config.load(dict({"SANDBOX": "docker", "SANDBOX_IMAGE": IMAGE}, **{k: str(v) for k, v in env.items()}))


@pytest.fixture
def sandbox(docker_image):
    made = []

    def make(**env):
        made.append(DockerSandbox(make_cfg(**env)))
        return made[-1]

    yield make
    for s in made:
        s.close()


@pytest.fixture
def home(tmp_path):
    """A student's home, owned by the uid the program runs as."""
    path = tmp_path / "home"
    path.mkdir()
    os.chown(path, UID, UID)
    return str(path)


def write(home, name, source):
    path = os.path.join(home, name)
    with open(path, "w") as f:
        f.write(source)
    os.chown(path, UID, UID)


def settings(sandbox, **limits):
    """The launcher's settings as the run handler makes them, with `limits` changed."""
    return {"limits": dict(Limits.from_config(sandbox.cfg).__dict__, **limits), "nice": 10}


async def start(sandbox, home, **limits):
    """A prepared sandbox whose launcher said `ready`."""
    prepared = await sandbox.prepare(home, UID, settings(sandbox, **limits))
    assert await Sandboxed(prepared).ready()
    return prepared


def go(prepared, path="prog.py", args=()):
    prepared.send(frame(b"g", json.dumps({"path": path, "args": list(args)}).encode()))


async def drain(prepared, timeout=60):
    """Read stdout and stderr to their end: (text, images, exit status, stderr)."""
    async def read_all(stream):
        chunks = []
        while True:
            data = await stream.read(65536)
            if not data:
                return b"".join(chunks)
            chunks.append(data)

    out, err = await asyncio.wait_for(
        asyncio.gather(read_all(prepared.stdout), read_all(prepared.stderr)), timeout)
    text, images, status = b"", [], None
    for kind, payload in OscParser().feed(out):
        if kind == "text":
            text += payload
        elif payload.startswith(session.IMAGE):
            images.append(payload[len(session.IMAGE):])
        elif payload.startswith(session.EXIT):
            status = json.loads(payload[len(session.EXIT):])
    return text.decode(errors="replace"), images, status, err.decode(errors="replace")


async def run(sandbox, home, source, **limits):
    """Run `source` to its end: (text, images, status, stderr, Exit, container id)."""
    write(home, "prog.py", source)
    prepared = await start(sandbox, home, **limits)
    go(prepared)
    text, images, status, err = await drain(prepared)
    exit_ = await prepared.wait()
    return text, images, status, err, exit_, prepared.container


def containers(*filters):
    """Ids of the containers (running or not) matching docker ps filters."""
    argv = ["docker", "ps", "-a", "-q", "--no-trunc"]
    for f in filters:
        argv += ["--filter", f]
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.split()


def test_hello_and_the_container_is_removed(sandbox, home):
    text, _, status, err, exit_, container = asyncio.run(run(
        sandbox(), home, "import sys\nprint('hello')\nprint('oops', file=sys.stderr)\n"))
    assert text == "hello\r\n"  # through the program's terminal
    assert err == "oops\n"
    assert status == {"code": 0, "signal": None, "reason": None}
    assert exit_.code == 0 and exit_.signal is None and exit_.reason is None
    assert container not in containers(f"label={LABEL}")


def test_input_reaches_the_program(sandbox, home):
    async def scenario():
        write(home, "prog.py", "name = input('Name? ')\nprint('Hi', name)\n")
        prepared = await start(sandbox(), home)
        go(prepared)
        prompt = await asyncio.wait_for(prepared.stdout.readuntil(b"Name? "), 20)
        prepared.send(frame(b"d", b"Ada\n"))
        text, _, status, _ = await drain(prepared)
        await prepared.wait()
        return prompt, text, status

    prompt, text, status = asyncio.run(scenario())
    assert prompt.endswith(b"Name? ")
    assert "Hi Ada" in text
    assert status["code"] == 0


def test_runs_as_the_students_uid_in_its_home(sandbox, home):
    source = ("import os\nprint(os.getuid(), os.getgid(), os.getcwd())\n"
              "open('made.txt', 'w').write('x')\nopen('/tmp/scratch', 'w').write('y')\n")
    text, *_ = asyncio.run(run(sandbox(), home, source))
    assert text.split() == [str(UID), str(UID), "/home/student"]
    assert os.stat(os.path.join(home, "made.txt")).st_uid == UID


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


def test_memory_bomb_hits_the_launchers_limit(sandbox, home):
    source = "chunks = []\nwhile True:\n    chunks.append(bytearray(b'x') * (16 << 20))\n"
    _, _, status, err, exit_, _ = asyncio.run(run(sandbox(RUN_MEMORY_MB=128), home, source))
    assert status["reason"] == "memory_limit" or exit_.reason == "memory_limit"
    assert "MemoryError" in err or exit_.reason == "memory_limit"


def test_memory_bomb_is_stopped_by_the_container_limit(sandbox, home):
    """Without the launcher's rlimit (memory_bytes 0), the cgroup's limit
    still holds, and the OOM kill is reported as the memory limit."""
    source = "chunks = []\nwhile True:\n    chunks.append(bytearray(b'x') * (16 << 20))\n"
    _, _, status, _, exit_, _ = asyncio.run(run(sandbox(RUN_MEMORY_MB=64), home, source, memory_bytes=0))
    assert exit_.reason == "memory_limit"
    assert status is None or status["signal"] == 9  # the program was killed, or the launcher too


def test_fork_bomb_is_contained_by_the_pids_limit(sandbox, home):
    """Without the launcher's RLIMIT_NPROC, the cgroup's pids limit stops it."""
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
    started = time.monotonic()
    text, _, status, _, exit_, container = asyncio.run(run(box, home, source, processes=0))
    made = int(text.split("stopped after")[1].split()[0])
    assert made < 24  # RUN_PROCESSES plus the launcher's few
    assert status["code"] == 0
    assert time.monotonic() - started < 30  # its sleeping children went with the container
    assert container not in containers(f"label={LABEL}")


def test_kill_removes_a_running_container(sandbox, home):
    async def scenario():
        box = sandbox()
        write(home, "prog.py", "while True:\n    pass\n")
        prepared = await start(box, home)
        go(prepared)
        await asyncio.sleep(0.5)
        assert containers(f"id={prepared.container}", "status=running")
        waiting = asyncio.ensure_future(prepared.wait())  # pending while kill() runs
        reading = asyncio.ensure_future(drain(prepared))
        await asyncio.sleep(0.1)
        started = time.monotonic()
        await prepared.kill()
        killed_in = time.monotonic() - started
        exit_ = await asyncio.wait_for(waiting, 10)
        await asyncio.wait_for(reading, 10)
        await prepared.kill()  # again: nothing to do, no error
        return prepared.container, exit_, killed_in

    container, exit_, killed_in = asyncio.run(scenario())
    assert exit_.signal == 9
    assert killed_in < 10
    assert not containers(f"id={container}")


def test_kill_of_a_sandbox_that_never_ran(sandbox, home):
    async def scenario():
        prepared = await start(sandbox(), home)
        await prepared.kill()
        return prepared.container

    assert not containers(f"id={asyncio.run(scenario())}")


def test_output_is_not_read_ahead_without_bound(sandbox, home):
    """While nobody reads, the program stops at its next print."""
    source = ("import sys\nfor i in range(200000):\n    print('x' * 99)\n"
              "open('done', 'w').close()\n")

    async def scenario():
        write(home, "prog.py", source)
        prepared = await start(sandbox(), home)
        go(prepared)
        await asyncio.sleep(3)  # 20 MB would be printed by now if nothing held it back
        blocked = not os.path.exists(os.path.join(home, "done"))
        held = len(prepared.stdout._buffer)  # what the sandbox read ahead for us
        text, _, status, _ = await drain(prepared, timeout=120)
        await prepared.wait()
        return blocked, held, text, status

    blocked, held, text, status = asyncio.run(scenario())
    assert blocked
    assert held <= 128 << 10  # STREAM_LIMIT plus at most one frame
    assert text.count("x" * 99) == 200000
    assert status["code"] == 0
    assert os.path.exists(os.path.join(home, "done"))


def test_matplotlib_plots(sandbox, home):
    source = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()\nprint('plotted')\n"
    started = time.monotonic()
    text, images, status, err, *_ = asyncio.run(run(sandbox(), home, source))
    assert "plotted" in text, err
    assert len(images) == 1 and images[0].startswith(b"iVBORw0KGgo")  # a PNG, in base64
    assert time.monotonic() - started < 20


def test_cleanup_leftovers_removes_only_orphans(sandbox, home):
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
        box = sandbox()
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


def test_works(docker_image):
    assert DockerSandbox.works(make_cfg())
    assert not DockerSandbox.works(make_cfg(SANDBOX_IMAGE="pyclassroom-no-such-image:0"))


def test_cold_start_latency(sandbox, home):
    """Create + start + the launcher's `ready`, on a warm daemon and image."""
    async def scenario():
        box = sandbox()
        times = []
        for _ in range(5):
            started = time.monotonic()
            prepared = await start(box, home)
            times.append(time.monotonic() - started)
            await prepared.kill()
        return times

    times = asyncio.run(scenario())
    print(f"\ndocker sandbox cold start: median {statistics.median(times):.3f} s, "
          f"min {min(times):.3f} s, max {max(times):.3f} s")
    assert statistics.median(times) < 5
