"""Evaluation passes between epochs (model.eval() + no_grad over a validation loader) are `eval`, outside the
training steps and their shares, on a real CPU run."""
from conftest import SCRIPTS, load_summary, run_haiprof


def test_eval_between_epochs_is_eval_not_forward(tmp_path):
    out = tmp_path / "r"
    r = run_haiprof("run", "--quiet", "--out", out, SCRIPTS / "eval_between_epochs.py")
    assert r.returncode == 0, r.stderr
    s = load_summary(out)
    assert s["steps"] == 24                                  # 3 epochs x 8 batches: training steps only
    assert s["eval_s"] > 0 and s["eval_share"] > 0.2         # the validation passes are big on purpose
    assert abs(sum(s["phase_share"].values()) - 1) <= 0.01
    # the steps right after an evaluation pass do not carry it (each pass takes about eval_s / 3)
    st = s["step_time_s"]
    assert st["max"] < s["eval_s"] / 3 / 4, st
    assert "evaluation passes between steps" in (out / "report.html").read_text()
