"""The login and file benchmarks run end to end on this machine (as root,
their servers' sandbox uids must reach the students' homes) and count
every answer: the commands in the README's Measuring section. And the
tools stay apart from the server: their --help loads no client, histogram,
chart or scenario, and the server image needs none of their dependencies."""
import ast
import importlib.metadata
import json
import pathlib
import re
import subprocess
import sys

import pytest
from packaging.requirements import Requirement

from loadtest.harness import ROOT


def bench(module, tmp_path, *args):
    out = tmp_path / "result.json"
    done = subprocess.run([sys.executable, "-m", f"loadtest.{module}", *args, "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(out.read_text())["results"]


def test_bench_files_saves_and_loads_with_no_errors(tmp_path):
    [result] = bench("bench_files", tmp_path, "--processes", "1", "--students", "2", "--duration", "1")
    assert result["errors"] == 0 and result["setup_errors"] == {}
    assert result["saves"] > 0 and result["loads"] > 0 and result["active_students"] == 2


def test_bench_login_logs_in_with_no_errors(tmp_path):
    [result] = bench("bench_login", tmp_path, "--processes", "1", "--concurrency", "2", "--rounds", "1",
                     "--warmup", "0")
    assert result["errors"] == 0 and result["count"] == 2


# -- the tools' package ----------------------------------------------------------------------

HEAVY = ("aiohttp", "hdrh", "matplotlib", "requests")  # what a script loads only to measure
SCENARIOS = ("loadtest.scenarios", "loadtest.classroom", "loadtest.cell", "loadtest.client")
HELP_PROBE = """
import contextlib, io, json, runpy, sys
sys.argv = [sys.argv[1], "--help"]
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        runpy.run_module(sys.argv[0], run_name="__main__")
    except SystemExit as e:
        code = e.code
print(json.dumps({"code": code, "help": out.getvalue(), "modules": sorted(sys.modules)}))
"""


@pytest.mark.parametrize("script", ["loadtest.loadtest", "loadtest.bench_login", "loadtest.bench_files",
                                    "loadtest.bench_runs", "loadtest.efs_bench", "loadtest.bench_zip",
                                    "loadtest.bench_run_cost"])
def test_help_loads_no_client_histogram_chart_or_scenario(script):
    done = subprocess.run([sys.executable, "-c", HELP_PROBE, script], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    probe = json.loads(done.stdout)
    assert probe["code"] == 0 and "usage:" in probe["help"] and "--help" in probe["help"]
    loaded = [m for m in probe["modules"] if m.split(".")[0] in HEAVY or m in SCENARIOS]
    assert loaded == [], f"{script} --help loaded {loaded}"


def installed_with(requirements):
    """The import names that the distributions pinned in `requirements`
    provide, with everything they depend on in turn."""
    def key(name):
        return re.sub(r"[-_.]+", "-", name).lower()

    wanted = [re.split(r"[ ;<>=!~\[]", line.strip())[0] for line in requirements.read_text().splitlines()
              if line.strip() and not line.lstrip().startswith(("#", "-"))]
    seen = set()
    while wanted:
        name = wanted.pop()
        if key(name) in seen:
            continue
        seen.add(key(name))
        for requirement in map(Requirement, importlib.metadata.requires(name) or []):
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                wanted.append(requirement.name)
    return {module for module, dists in importlib.metadata.packages_distributions().items()
            if any(key(d) in seen for d in dists)}


def test_the_server_package_imports_only_what_requirements_txt_installs():
    """The image installs requirements.txt and copies server/: nothing in it
    may need a tool's dependency (aiohttp, hdrh, matplotlib...)."""
    provided = installed_with(pathlib.Path(ROOT, "requirements.txt"))
    # Debian's python3-seccomp, imported by the sandbox's own interpreter (SANDBOX_PYTHON) only.
    system = {"seccomp"}
    missing = set()
    for path in pathlib.Path(ROOT, "server").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in provided | system | {"server"}:
                    missing.add(f"{path.relative_to(ROOT)}: {name}")
    assert not missing, sorted(missing)


def test_the_server_image_holds_the_server_only():
    copied = [line.split()[1:-1] for line in pathlib.Path(ROOT, "deploy", "Dockerfile").read_text().splitlines()
              if line.startswith("COPY ")]
    assert sorted(source for sources in copied for source in sources) == ["requirements.txt", "server", "static"]
    assert not pathlib.Path(ROOT, "server", "ops").exists()
