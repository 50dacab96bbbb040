"""benchmarks/prediction_error.py: docs/predictions.md is what the what-if predicts today for every recorded fix
pair (regenerated from the same re-analysed recordings the other GPU tests read and compared), and the recorded
launch run's first recommendation, fused-optim, is predicted within its optimizer's share."""
import sys

import pytest

from conftest import GPU_RUNS, REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import prediction_error as PE  # noqa: E402

DOC = REPO / "docs" / "predictions.md"


@pytest.mark.skipif(not (GPU_RUNS / "truth.json").is_file(), reason=f"no recorded GPU runs at {GPU_RUNS}")
def test_the_doc_is_the_regenerated_table(tmp_path, gpu_reports):
    import json

    def report(run):
        d, r = gpu_reports([run.name])[run.name]
        assert r.returncode == 0, r.stderr
        return json.loads((d / "summary.json").read_text())
    measured, unmeasured = PE.rows(GPU_RUNS, tmp_path, report)
    text = DOC.read_text()
    start, end = "<!-- predictions table: start -->\n", "<!-- predictions table: end -->"
    assert PE.markdown(measured, unmeasured) == text[text.index(start) + len(start):text.index(end)]
    assert {r["fixed"] for r in measured} >= {"compute_a", "io_p", "h2d_p", "launch_g", "launch_cf"}
    fused = next(u for u in unmeasured if (u["base"], u["fix"]) == ("launch_base", "fused-optim"))
    assert fused["gain"] <= fused["bound"] < 0.6
    # the pairs over 15 points are named in the doc with why
    for r in measured:
        if r["error"] > PE.LIMIT_POINTS:
            assert f"{r['base']} → " in text and r["fixed"] in text.split("## Where the error is above")[1]
