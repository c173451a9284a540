"""`make start` installs what the server needs and says what it is doing;
`make test` adds the test tools and checks the types before the tests. Driven for real, with a stand-in Python
that records what make asks of it instead of reaching the network."""
import os
import stat
import subprocess
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AXE = "node_modules/axe-core/axe.min.js"

# `python3 -m venv DIR` makes DIR/bin/python: a script that logs its arguments.
FAKE_PYTHON = textwrap.dedent("""\
    #!/bin/sh
    if [ "$1 $2" = "-m venv" ]; then
        mkdir -p "$3/bin"
        printf '#!/bin/sh\\necho "$*" >> "%s"\\n' "$LOG" > "$3/bin/python"
        chmod +x "$3/bin/python"
    fi
    """)


def make(tmp_path, target):
    fake = tmp_path / "python3"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "calls.log"
    # -o: the system packages are checked by a script of their own, not here.
    r = subprocess.run(["make", "-o", "server-deps", "-o", "system-deps", "-o", AXE, target, f"PYTHON={fake}",
                        f"VENV={tmp_path / 'venv'}"], cwd=ROOT, env={**os.environ, "LOG": str(log)},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout, log.read_text().splitlines()


def test_make_start_installs_only_the_servers_packages_and_says_so(tmp_path):
    out, calls = make(tmp_path, "start")
    installs = [c for c in calls if "pip install" in c]
    assert len(installs) == 1 and installs[0].endswith("-r requirements.txt"), calls
    assert "--quiet" not in installs[0]  # pip's own progress shows
    assert calls[-1] == "-m server"
    steps = [line for line in out.splitlines() if line.startswith("==>")]
    assert [s.split()[1] for s in steps] == ["Making", "Installing", "Starting"], out

    # A second start installs nothing again.
    out, calls = make(tmp_path, "start")
    assert sum("pip install" in c for c in calls) == 1 and calls[-1] == "-m server"


def test_make_test_adds_the_test_tools(tmp_path):
    make(tmp_path, "start")
    out, calls = make(tmp_path, "test")
    installs = [c for c in calls if "pip install" in c]
    assert [i.split()[-1] for i in installs] == ["requirements.txt", "requirements-test.txt"], calls
    assert calls[-2:] == ["-m mypy", "-m pytest"], calls  # the types are checked first (make typecheck)
    assert "Installing the test tools" in out and "Checking the server's types" in out


def test_make_test_installs_axe_core_when_missing_or_the_lock_changed(tmp_path):
    """The browser tests inject node_modules/axe-core/axe.min.js: `make test`
    runs `npm ci` (the locked versions, no install scripts) before pytest
    when it is missing or package-lock.json is newer. (-n: said, not done.)"""
    # --no-print-directory: under `make test` this make is a sub-make, which would say where it is.
    r = subprocess.run(["make", "-n", "--no-print-directory", "-o", "server-deps", "-o", "system-deps",
                        "-W", "package-lock.json", "test", f"VENV={tmp_path / 'venv'}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    npm = [n for n, line in enumerate(lines) if line == "npm ci --ignore-scripts --no-audit --no-fund"]
    assert npm and npm[0] < len(lines) - 1 and lines[-1].endswith("-m pytest"), r.stdout
