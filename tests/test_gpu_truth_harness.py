"""benchmarks/gpu_truth.py, the harness a GPU session records fixtures with: its tracing window ends before each
script's own clock starts, and it writes the verdict and steady step time beside that clock (dry run on CPU)."""
import json
import subprocess
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import gpu_truth  # noqa: E402


@pytest.mark.parametrize("source,extra,first,k", [
    ("clock = Clock(warm=3)", [], 4, 1),      # gpu_io.py / gpu_h2d.py: the clock times steps 4..
    ("clock = Clock(warm=5)", [], 6, 3),      # gpu_compute.py
    ("clock = Clock(warm=10)", [], 11, 3),
    ('ap.add_argument("--warm", type=int, default=20)', [], 20, 3),
    ('ap.add_argument("--warm", type=int, default=20)', ["--warm", "4"], 4, 1),
    ('ap.add_argument("--warm", type=int, default=20)', ["--warm=2"], 2, 0),
    ("print('no clock of its own')", [], None, 3),
])
def test_the_window_ends_before_the_clock_starts(tmp_path, source, extra, first, k):
    script = tmp_path / "w.py"
    script.write_text(source + "\n")
    assert gpu_truth.first_clocked_step(script, extra) == first
    assert gpu_truth.trace_steps_for(first) == k
    if first is not None and k:
        assert gpu_truth.WINDOW_START + k - 1 < first     # the last traced step comes before the first timed one


def test_dry_run_on_cpu_writes_truth_beside_the_scripts_clock(tmp_path):
    out = tmp_path / "truth"
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_truth.py"), "--allow-cpu", "--workloads",
                        str(tmp_path / "none"), "--only", "gpt_tiny", "--out", str(out),
                        "--workload-args", "--device cpu --steps 24 --warm 8 --batch-size 1"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    row = json.loads((out / "truth.json").read_text())["gpt_tiny_base"]
    assert row["error"] is None and row["clock_from_step"] == 8 and row["trace_steps"] == 3
    assert row["verdict"] in ("io", "compute", "launch", "communication", "none")
    assert row["step_ms"] > 0 and row["steady_ms"] > 0
    assert row["ratio"] == pytest.approx(row["steady_ms"] / row["step_ms"], rel=1e-3)
    # same steps, two clocks: the same order of magnitude (a loaded 2-core machine skews a dozen CPU steps); the
    # exact figure is the GPU session's to check
    assert 0.2 < row["ratio"] < 5.0
    assert (out / "gpt_tiny_base" / "summary.json").is_file() and "| gpt_tiny_base |" in r.stdout
