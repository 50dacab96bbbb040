"""A script without an optimizer (parameters updated by hand) steps at each backward: the tracing window opens
and --steps N stops after step N, as for an optimizer's steps."""
from conftest import SCRIPTS, in_parallel, load_summary, run_haiprof

SCRIPT = SCRIPTS / "real" / "manual_sgd.py"


def test_tracing_window_and_steps_limit_without_an_optimizer(tmp_path):
    r, limited = in_parallel(   # two independent runs, side by side
        lambda: run_haiprof("run", "--quiet", "--out", tmp_path / "full", SCRIPT, "40"),
        lambda: run_haiprof("run", "--quiet", "--steps", "12", "--out", tmp_path / "twelve", SCRIPT, "40"))
    assert r.returncode == 0, r.stderr
    s = load_summary(tmp_path / "full")
    assert s["step_detection"]["boundary"] == "backward" and s["steps"] == 40
    assert (tmp_path / "full" / "trace.json.gz").is_file(), s["collectors"].get("trace")
    assert s["launch"]["cpu"]["steps"] == 3      # the op-level window traced 3 of its steps
    r = limited
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1].startswith("step 12 ") and len(r.stdout.splitlines()) == 12
