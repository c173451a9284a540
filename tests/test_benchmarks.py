"""The login, file, editing-help and peer benchmarks run end to end on this
machine (as root, their servers' sandbox uids must reach the students'
homes) and count every answer: the commands in docs/benchmarks.md's
Measuring section (the peer only if Jupyter is already installed in its cache). And the
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

from loadtest import jupyter, otter
from loadtest.bench_files import PARTS
from loadtest.bench_lesson import FIGURES
from loadtest.harness import ROOT


def bench(module, tmp_path, *args):
    out = tmp_path / "result.json"
    done = subprocess.run([sys.executable, "-m", f"loadtest.{module}", *args, "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(out.read_text())["results"]


def peer(tmp_path, *args):
    """bench_peer with tiny loads: (its --json document, its report)."""
    out = tmp_path / "peer.json"
    done = subprocess.run([sys.executable, "-m", "loadtest.bench_peer", "--processes", "1", "--files", "2",
                           "--runs", "1", "--duration", "1", *args, "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    document = json.loads(out.read_text())
    kinds = ["files"] + ([] if document["runs_skipped"] else ["runs"])
    for r in document["results"]:
        assert r["errors"] == 0 and r.get("setup_errors", {}) == {}, r
        assert (r["saves"] > 0 and r["loads"] > 0) if r["kind"] == "files" else r["runs"] > 0
    return document, kinds, done.stdout


def test_bench_peer_measures_pyclassroom_files_and_runs_without_jupyter(tmp_path):
    document, kinds, _ = peer(tmp_path, "--servers", "pyclassroom", "--peer-cache", str(tmp_path / "none"))
    assert [(r["server"], r["kind"]) for r in document["results"]] == [("PyClassroom 1w", k) for k in kinds]
    assert document["ratios"] == [] and not (tmp_path / "none").exists()  # nothing installed


@pytest.mark.skipif(not jupyter.cached()[1], reason="Jupyter Server is not installed in ~/.cache/pyclassroom-peer "
                    "(`python -m loadtest.bench_peer` installs it once; the suite does not download it)")
def test_bench_peer_measures_both_servers_and_their_ratios(tmp_path):
    document, kinds, report = peer(tmp_path)
    results = {(r["server"], r["kind"]) for r in document["results"]}
    assert results == {(server, kind) for server in ("PyClassroom 1w", "Jupyter") for kind in kinds}
    assert {(x["kind"], x["server"]) for x in document["ratios"]} == {(k, "PyClassroom 1w") for k in kinds}
    assert "PyClassroom / Jupyter" in report


def test_bench_checks_grades_every_students_check_without_otter(tmp_path):
    results = bench("bench_checks", tmp_path, "--students", "2", "--no-otter", "--otter-venv", str(tmp_path / "none"))
    [result] = results
    assert result["system"] == "PyClassroom" and result["errors"] == 0, result
    assert result["graded"] == 2 and result["checks"] == 20 and result["checks_per_s"] > 0
    assert result["cpu_ms_per_check"] > 0 and result["p95_ms"] >= result["p50_ms"] > 0
    assert not (tmp_path / "none").exists()  # nothing installed


@pytest.mark.skipif(not otter.cached()[1], reason="Otter-Grader is not installed in ~/.cache/pyclassroom-peer "
                    "(`python -m loadtest.bench_checks` installs it once; the suite does not download it)")
def test_bench_checks_grades_the_same_submissions_with_otter_and_compares(tmp_path):
    out = tmp_path / "checks.json"
    done = subprocess.run([sys.executable, "-m", "loadtest.bench_checks", "--students", "2", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    document = json.loads(out.read_text())
    assert [r["system"] for r in document["results"]] == ["PyClassroom", "Otter-Grader"]
    for r in document["results"]:  # every score verified: right ones full marks, wrong ones exactly 6 of 12
        assert r["errors"] == 0 and r["graded"] == 2 and r["checks"] == 20, r
    [comparison] = document["comparisons"]
    assert comparison["throughput_ratio"] > 0 and "PyClassroom / Otter" in done.stdout


def test_bench_files_saves_loads_and_splits_the_servers_cpu_per_operation(tmp_path):
    [result] = bench("bench_files", tmp_path, "--processes", "1", "--students", "2", "--duration", "2", "--py-spy")
    assert result["errors"] == 0 and result["setup_errors"] == {}
    assert result["saves"] > 0 and result["loads"] > 0 and result["active_students"] == 2
    profile = result["profile"]
    assert profile["cpu_ms_per_op"] > 0
    # Every sample went to a named part; waiting for events is not the server's work.
    named = {part for part, _ in PARTS[1:]} | {"other", "file processes (the store's calls)"}
    assert set(profile["ms_per_op"]) <= named, profile["ms_per_op"]
    assert profile["ms_per_op"]["file processes (the store's calls)"] > 0
    assert profile["ms_per_op"]["Tornado and asyncio"] > 0


def test_bench_run_cost_refuses_more_runs_than_one_sandbox_serves():
    """Past them the sandbox would be replaced mid-measurement, and the
    launcher measured would no longer be the one serving."""
    done = subprocess.run([sys.executable, "-m", "loadtest.bench_run_cost", "--one-sandbox", "--runs", "2000"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--one-sandbox measures at most 780 runs" in done.stderr, done.stderr


def test_bench_login_logs_in_with_no_errors(tmp_path):
    [result] = bench("bench_login", tmp_path, "--processes", "1", "--concurrency", "2", "--rounds", "1",
                     "--warmup", "0")
    assert result["errors"] == 0 and result["count"] == 2


def test_bench_assist_types_asks_and_counts_every_answer(tmp_path):
    [result] = bench("bench_assist", tmp_path, "--students", "2", "--duration", "2")
    assert result["typing"] == 2 and result["setup_errors"] == {}
    assert all(result[op]["errors"] == 0 for op in ("complete", "signatures", "check"))
    # Each completion asked for was answered or cancelled by the next key (on a busy machine, all may be).
    asked = result["complete"]["count"] + result["counts"].get("complete_cancelled", 0)
    assert asked > 0 and result["server_cpu_typing"] > 0


def test_bench_follow_hears_every_save_made_elsewhere(tmp_path):
    [result] = bench("bench_follow", tmp_path, "--processes", "2", "--students", "3", "--duration", "2")
    assert result["errors"] == 0 and result["count"] >= 3 and result["after_answer"]["count"] == result["count"]


def test_bench_class_view_sees_every_save_and_run_end_on_the_teachers_screen_or_counts_it(tmp_path):
    # 10 s: every student's first run starts within 8 s (RUN_PAUSE), so runs are caused whatever the draw.
    [result] = bench("bench_class_view", tmp_path, "--processes", "2", "--students", "3", "--duration", "10",
                     "--memory-every", "5")
    assert result["online"] == 3 and result["setup_errors"] == {} and result["page_errors"] == [], result
    for kind in ("saves", "runs"):
        events = result[kind]
        assert events["caused"] > 0 and events["count"] + events["errors"] == events["caused"], events
        assert events["errors"] == 0 and events["p95_ms"] >= events["p50_ms"] >= 0, events
    memory = result["memory"]
    assert len(memory) >= 3 and all(m["js_heap_used_mib"] > 0 and m["dom_nodes"] > 0 for m in memory), memory
    assert all(m["renderer_rss_mib"] > 0 for m in memory), memory


def test_bench_exam_times_every_event_on_the_proctors_screen_and_the_lock_at_the_end(tmp_path):
    [result] = bench("bench_exam", tmp_path, "--processes", "2", "--students", "3", "--duration", "15",
                     "--memory-every", "5")
    assert result["taking"] == 3 and result["setup_errors"] == {} and result["page_errors"] == [], result
    assert result["saves"]["caused"] > 0
    for kind in ("saves", "runs", "checks", "signals"):
        events = result[kind]
        assert events["count"] + events["errors"] == events["caused"] and events["errors"] == 0, (kind, events)
    lock = result["lock"]
    assert lock["lost_saves"] == 0 and lock["never_refused"] == 0 and lock["refused_after_end_s"]["min"] > 0, lock
    assert result["replay"]["rows"] > 0 and result["replay"]["bytes_per_student_hour"] > 0, result["replay"]
    assert len(result["memory"]) >= 3 and all(m["js_heap_used_mib"] > 0 for m in result["memory"])


def test_bench_lesson_shows_every_figure_of_a_lesson_to_the_teacher_and_students(tmp_path):
    out = tmp_path / "lesson.json"
    done = subprocess.run([sys.executable, "-m", "loadtest.bench_lesson", "--processes", "2", "--students", "4",
                           "--browsers", "1", "--rounds", "1", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    [result] = json.loads(out.read_text())["results"]
    assert result["rounds"] == 1 and result["group"] == 3 and result["in_browsers"] == 1, result
    assert result["page_errors"] == [], result
    for key, label in FIGURES + [("debug_start", "Debug → first pause")]:
        figure = result[key]
        assert figure["errors"] == 0 and figure["count"] == figure["events"] > 0, (key, figure)
        assert label in done.stdout
    # One group, one push and one message shown, each on the one page; every API student's check graded.
    assert [result[k]["count"] for k in ("errors", "push", "message", "check")] == [1, 1, 1, 3], result


def test_bench_busy_counts_every_run_of_a_class_pressing_run_beside_busy_loops(tmp_path):
    out = tmp_path / "busy.json"
    done = subprocess.run([sys.executable, "-m", "loadtest.bench_busy", "--students", "3", "--hogs", "1",
                           "--spin-up", "0", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())["results"]
    assert result["runs"] == result["started"] == result["ok"] == 3, result
    assert result["failed"] == 0 and result["failed_by_kind"] == {}, result
    # Whoever waited was told in which line (a student may have waited in both).
    assert set(result["waited_by_line"]) <= {"start", "run"}, result
    assert result["waited"] <= sum(result["waited_by_line"].values()) <= 2 * result["waited"] <= 6, result
    assert result["sandbox_starts"]["failed"] == {}, result  # this checkout's server reports its starts
    assert result["exit_p50_ms"] >= result["started_p50_ms"] > 0, result
    for label in ("runs", "started", "ok", "failed", "waited", "start ", "run ", "Run → started", "Run → exit",
                  "IDE opening → started", "load average (1 min)", "tasks running or ready", "sandbox_starts"):
        assert label in done.stdout, label
    assert len(result["hog_pids"]) == 1, result
    for pid in result["hog_pids"]:  # the busy loops were killed
        cmdline = pathlib.Path(f"/proc/{pid}/cmdline")
        assert not cmdline.exists() or b"monotonic" not in cmdline.read_bytes(), pid


def test_bench_ranking_finds_what_beginners_mean(tmp_path):
    out = tmp_path / "ranking.json"
    done = subprocess.run([sys.executable, "-m", "loadtest.bench_ranking", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["cases"] >= 30 and result["first"] >= 0.9, done.stdout


# -- the tools' package ----------------------------------------------------------------------

HEAVY = ("aiohttp", "hdrh", "matplotlib", "requests")  # what a script loads only to measure
SCENARIOS = ("loadtest.scenarios", "loadtest.classroom", "loadtest.cell", "loadtest.client", "loadtest.jupyter")
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
                                    "loadtest.bench_run_cost", "loadtest.bench_assist", "loadtest.bench_peer",
                                    "loadtest.bench_follow", "loadtest.bench_ranking",
                                    "loadtest.bench_checks", "loadtest.bench_class_view",
                                    "loadtest.bench_lesson", "loadtest.bench_busy", "loadtest.bench_exam"])
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
