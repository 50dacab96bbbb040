"""Findings follow the verdict's minimum of measured steps: an LBFGS run of 3 steps (20 closures each) gets
`none` and no share-based finding; with more steps both come back."""
from conftest import SCRIPTS, load_summary, run_haiprof

SHARE_KINDS = {"io", "compute", "launch", "communication", "other", "energy"}


def _run(tmp_path, steps):
    out = tmp_path / f"lbfgs{steps}"
    r = run_haiprof("run", "--quiet", "--trace-steps", "0", "--out", out, SCRIPTS / "real" / "lbfgs_closure.py",
                    str(steps))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\n") == steps
    return load_summary(out)


def test_three_lbfgs_steps_judge_nothing(tmp_path):
    s = _run(tmp_path, 3)
    assert s["bottleneck"] == "none" and s["steps_measured"] < 3
    assert not [f for f in s["findings"] if f["kind"] in SHARE_KINDS], s["findings"]
    assert s["next_steps"] == []


def test_enough_lbfgs_steps_get_findings_again(tmp_path):
    s = _run(tmp_path, 8)
    assert s["steps_measured"] >= 3
    assert [f for f in s["findings"] if f["kind"] in SHARE_KINDS], s["findings"]
