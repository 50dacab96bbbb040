"""The page invariants (analyzers/page_invariants.py) hold on every recorded H100 run and on a CPU run of this
machine, and the checker itself catches each kind of violation (it is a test that can fail)."""
import json

import pytest

from conftest import GPU_RUNS, load_summary
from haiprof.analyzers.page_invariants import check

RUNS = GPU_RUNS / "h100-2026-11-22"
NAMES = sorted(p.name for p in RUNS.iterdir() if (p / "meta.json").is_file()) if RUNS.is_dir() else []


def _page(d):
    meta = json.loads((d / "meta.json").read_text())
    return load_summary(d), meta, (d / "report.html").read_text()


@pytest.mark.skipif(not NAMES, reason="no shared GPU recordings")
def test_every_recorded_run_keeps_every_page_invariant(gpu_reports):
    bad = {}
    for name, (d, r) in gpu_reports(NAMES).items():
        assert r.returncode == 0, r.stderr
        found = check(*_page(d))
        if found:
            bad[name] = found
    assert not bad, bad


def test_a_cpu_run_keeps_every_page_invariant(seeded):
    _, out, _ = seeded
    assert check(*_page(out)) == []


GOOD = {"bottleneck": "io", "headline": "Input-bound (high): the GPU waited for input 80% of the 40.0 ms step; "
                                        "--fix prefetch can remove at most 32.0 ms of it (80%).",
        "step_time_s": {"steady": 0.04, "median": 0.041},
        "phase_share": {"dataloader": 0.8, "forward": 0.1, "backward": 0.1},
        "device": {"busy_share": 0.2},
        "findings": [{"kind": "io", "share": 0.8, "fixes": ["prefetch"], "message": "the GPU waited",
                      "evidence": {"timeline": "device"}},
                     {"kind": "compute", "share": 0.2, "fixes": ["amp"], "message": "the GPU computed",
                      "evidence": {"timeline": "device"}}],
        "next_steps": [{"fix": "prefetch", "title": "t", "reason": "r"}], "advice_left_out": {}}


def _with(**changes):
    return json.loads(json.dumps(GOOD)) | changes


def test_the_checker_passes_a_good_page_and_catches_each_violation():
    assert check(GOOD) == []
    two = _with(headline=GOOD["headline"][:-1] + ". Also 12 ms elsewhere.")
    assert any("more than one sentence" in v for v in check(two))
    other_step = _with(headline=GOOD["headline"].replace("40.0 ms step", "41.0 ms step"))
    assert any("not the steady step" in v for v in check(other_step))
    wrong_ms = _with(headline=GOOD["headline"].replace("32.0 ms of it", "30.0 ms of it"))
    assert any("is not 80% of" in v for v in check(wrong_ms))
    over = _with(findings=[{**GOOD["findings"][0]}, {**GOOD["findings"][1], "share": 0.74}])
    assert any("add up to 154%" in v for v in check(over))
    other_action = _with(next_steps=[{"fix": "amp", "title": "t", "reason": "r"}])
    assert any("'do this next' starts with amp" in v for v in check(other_action))
    done = _with(advice_left_out={"amp": "the script already does it"})
    assert any("finding compute offers ['amp']" in v for v in check(done))
    cpu = _with(device=None, findings=[{**GOOD["findings"][0], "evidence": {}}])
    assert any("speaks of a GPU" in v for v in check(cpu, {"gpus": []}))
    assert not any("speaks of a GPU" in v for v in check(cpu, {"gpus": ["NVIDIA H100"]}))
