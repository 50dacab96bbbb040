"""Small things of issue 13: fewer than 3 measured steps conclude nothing."""
from conftest import SCRIPTS, load_summary, run_haiprof


def test_steps_3_measures_too_few_steps_for_a_verdict(tmp_path):
    out = tmp_path / "r"
    r = run_haiprof("run", "--quiet", "--steps", "3", "--out", out, SCRIPTS / "seeded_train.py")
    assert r.returncode == 0, r.stderr
    s = load_summary(out)
    assert s["steps"] == 3 and s["steps_analyzed"] < 3
    assert s["bottleneck"] == "none" and "Too little data" in s["headline"]
    assert s["next_steps"] == []
