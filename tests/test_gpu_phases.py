"""GPU-side phase timing with CUDA events (collectors/cuda_phases.py): runs only where CUDA is present."""
import pytest

from conftest import SCRIPTS, load_summary, run_haiprof

pytestmark = pytest.mark.gpu


def test_cuda_run_is_timed_with_events_and_h2d_is_measured(tmp_path):
    out = tmp_path / "r"
    r = run_haiprof("run", "--trace-steps", "0", "--out", out, SCRIPTS / "cuda_train.py")
    assert r.returncode == 0, r.stderr
    s = load_summary(out)
    assert s["steps"] == 20
    assert s["step_detection"]["timing"] == "cuda-events"
    share = s["phase_share"]
    assert share["h2d"] > 0                        # measured copies, not a guess
    assert share["forward"] > 0 and share["backward"] > 0
    assert abs(sum(share.values()) - 1) <= 0.01
    records = (out / "phases.jsonl").read_text()
    assert '"gpu:forward"' in records and '"gpu:h2d"' in records
