"""The login and file benchmarks run end to end on this machine (as root,
their servers' sandbox uids must reach the students' homes) and count
every answer: the commands in the README's Measuring section."""
import json
import subprocess
import sys

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
