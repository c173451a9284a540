"""The file system benchmark, run as an operator runs it (python -m
loadtest.efs_bench) on a temporary folder with small sizes. These check
the tool's behaviour, not the machine's speed: no timing assertions except
that an injected delay shows in what it reports."""
import json
import os
import re
import subprocess
import sys

import pytest

from loadtest.efs_bench import figures

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Small and quick; --no-drop-caches: a test must not empty the whole host's page cache.
FAST = ["--writers", "1,2", "--duration", "0.5", "--file-size", "2K-4K", "--list-files", "20",
        "--big-size", "256K", "--parallel", "1,2", "--no-drop-caches"]


def bench(*args):
    return subprocess.run([sys.executable, "-m", "loadtest.efs_bench", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bench-dir")
    out = tmp_path_factory.mktemp("bench-out") / "first.json"
    proc = bench("--dir", str(folder), "--json", str(out), *FAST)
    assert proc.returncode == 0, proc.stderr
    return folder, out, proc, json.loads(out.read_text())


def test_json_has_every_section_with_counts_and_no_errors(first_run):
    folder, _, _, run = first_run
    assert run["tool"] == "efs_bench" and run["format"] == 1 and run["time"]
    assert run["settings"]["writers"] == [1, 2] and run["settings"]["file_size"] == [2048, 4096]
    host = run["host"]
    for key in ("hostname", "cpus", "memory_gib", "kernel"):
        assert host[key]
    assert host["mount"]["fstype"] and host["mount"]["mount_options"] and host["mount"]["mount_point"]
    results = run["results"]
    assert [lvl["writers"] for lvl in results["small_files"]] == [1, 2]
    for lvl in results["small_files"]:
        for op in ("save", "load"):
            s = lvl[op]
            assert s["count"] > 0 and s["errors"] == 0 and s["ops_per_s"] > 0
            assert 0 < s["p50_ms"] <= s["p95_ms"] <= s["p99_ms"] <= s["max_ms"]
    for op in ("list", "stat"):
        m = results["metadata"][op]
        assert m["count"] > 0 and m["errors"] == 0 and m["ops_per_s"] > 0 and m["p50_ms"] > 0
        assert m["files"] == 20
    assert [s["parallel"] for s in results["sequential"]] == [1, 2]
    for s in results["sequential"]:
        assert s["write_mib_s"] > 0 and s["read_mib_s"] > 0 and s["errors"] == 0
        assert s["cache_drop"] == "fadvise"
    assert run["errors"] == 0


def test_prints_a_readable_table(first_run):
    _, out, proc, _ = first_run
    text = proc.stdout
    for heading in ("Small files", "Metadata", "Sequential", "errors: 0", f"written to {out}"):
        assert heading in text
    for writers in (1, 2):  # a row per level: writers, then numbers
        assert re.search(rf"^\s+{writers}\s+\d+\.\d{{3}}\s+\d+\.\d{{3}}", text, re.M)
    assert re.search(r"^\s+list\s+\d+\.\d{3}", text, re.M) and re.search(r"^\s+stat\s+\d+\.\d{3}", text, re.M)
    assert "reads may be partly cached" in text  # fadvise only: said so


def test_leaves_the_folder_empty(first_run):
    folder = first_run[0]
    assert os.listdir(folder) == []


def test_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "student.py").write_text("print('mine')\n")
    out = tmp_path.parent / (tmp_path.name + "-refused.json")
    proc = bench("--dir", str(tmp_path), "--json", str(out), *FAST)
    assert proc.returncode == 2
    assert "not empty" in proc.stderr and "--allow-nonempty" in proc.stderr
    assert os.listdir(tmp_path) == ["student.py"] and not out.exists()


@pytest.fixture(scope="module")
def second_run(tmp_path_factory):
    """With --allow-nonempty in a folder that has a file: works beside it, removes only its own."""
    folder = tmp_path_factory.mktemp("bench-nonempty")
    (folder / "keep.txt").write_text("keep me\n")
    out = tmp_path_factory.mktemp("bench-out2") / "second.json"
    proc = bench("--dir", str(folder), "--allow-nonempty", "--json", str(out), *FAST)
    assert proc.returncode == 0, proc.stderr
    return folder, out


def test_allow_nonempty_cleans_up_only_its_own(second_run):
    folder, out = second_run
    assert os.listdir(folder) == ["keep.txt"] and (folder / "keep.txt").read_text() == "keep me\n"
    assert json.loads(out.read_text())["errors"] == 0


def test_compare_has_a_ratio_for_every_figure(first_run, second_run):
    before, after = first_run[1], second_run[1]
    proc = bench("--compare", str(before), str(after))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    names = [name for name, _, _ in figures(json.loads(before.read_text())["results"])]
    assert len(names) == 2 * 8 + 2 * 4 + 2 * 2  # small files, metadata, sequential
    for name, _, better in figures(json.loads(before.read_text())["results"]):
        row = [line for line in lines if line.startswith(name + " ")]
        assert len(row) == 1, name
        assert re.search(r"\s\d+\.\d\dx\s+(lower|higher)\s+(same|better|WORSE)$", row[0]), row[0]
        assert better in row[0]
    assert any(line.startswith("save p95 ms") and "lower" in line for line in lines)
    assert any(line.startswith("write MiB/s") and "higher" in line for line in lines)


def test_compare_refuses_what_is_not_a_bench_output(first_run, tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"count": 3, "p50_ms": 1.0}))
    proc = bench("--compare", str(first_run[1]), str(other))
    assert proc.returncode == 2 and "not an efs_bench output" in proc.stderr and not proc.stdout
    garbage = tmp_path / "garbage.json"
    garbage.write_text("not json at all")
    proc = bench("--compare", str(garbage), str(first_run[1]))
    assert proc.returncode == 2 and "cannot read" in proc.stderr


def test_injected_delay_shows_in_the_reported_save_latency(tmp_path):
    folder, out = tmp_path / "dir", tmp_path / "delay.json"
    folder.mkdir()
    proc = bench("--dir", str(folder), "--json", str(out), "--inject-delay-ms", "20", "--writers", "1",
                 "--count", "5", "--list-files", "5", "--big-size", "64K", "--parallel", "1", "--no-drop-caches")
    assert proc.returncode == 0, proc.stderr
    run = json.loads(out.read_text())
    assert run["settings"]["inject_delay_ms"] == 20
    level = run["results"]["small_files"][0]
    assert level["save"]["count"] == 5 and level["save"]["p50_ms"] >= 20
    assert level["load"]["p50_ms"] >= 20  # Store.read waits too
    assert "INJECTED DELAY 20 ms" in proc.stdout
    assert os.listdir(folder) == []
