"""A script that trains in processes it spawns (torch.multiprocessing.spawn, a Pool) has no steps in its own
process: the headline says where the work went and how to profile the ranks, not only "no training steps"."""
from conftest import load_summary, run_haiprof
from haiprof.analyzers import thresholds as T
from haiprof.analyzers.utilization import summarize_system, work_in_children


def _samples(main_pct, children_pct, procs, n=6):
    return [{"t_ns": i * 500_000_000, "cpu_main_pct": main_pct, "cpu_children_pct": children_pct, "procs": procs,
             "cpu_cores_pct": [50.0, 50.0]} for i in range(n)]


def test_children_that_did_the_work_are_said_with_their_share():
    said = work_in_children(summarize_system(_samples(18.0, 60.0, 3)), T.CHILD_WORK_CORES)
    assert "up to 2 at once; 60% of a core against 18% in its own" in said and "--nproc-per-node" in said


def test_idle_or_minor_children_are_not_said():
    # the script did more; the children under a quarter of a core; no samples
    assert work_in_children(summarize_system(_samples(80.0, 60.0, 3)), T.CHILD_WORK_CORES) == ""
    assert work_in_children(summarize_system(_samples(2.0, 10.0, 2)), T.CHILD_WORK_CORES) == ""
    assert work_in_children(summarize_system([]), T.CHILD_WORK_CORES) == ""


BUSY_CHILD = """\
import subprocess, sys
subprocess.run([sys.executable, "-c", "import time\\nt = time.time()\\nwhile time.time() - t < 3: pass"], check=True)
print("child done")
"""


def test_a_run_whose_child_did_the_work_says_so_in_its_headline(tmp_path):
    script, out = tmp_path / "spawner.py", tmp_path / "r"
    script.write_text(BUSY_CHILD)
    r = run_haiprof("run", "--quiet", "--sample-interval", "0.2", "--out", out, script)
    assert (r.returncode, r.stdout) == (0, "child done\n"), r.stderr
    s = load_summary(out)
    assert s["bottleneck"] == "none" and s["headline"].startswith("No training steps detected"), s["headline"]
    assert "processes the script started" in s["headline"], (s["headline"], s["utilization"])
