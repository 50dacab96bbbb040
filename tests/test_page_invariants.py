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
    # the headline's prediction: its ms are its share of the step, and never more than what the fix touches
    pred = _with(headline=GOOD["headline"].replace("(80%).", "(80%), predicted 20.0 ms (50%)."))
    assert check(pred) == []
    assert any("20.0 ms is not 60% of" in v for v in check(_with(headline=pred["headline"].replace("(50%)", "(60%)"))))
    beyond = _with(headline=GOOD["headline"].replace("(80%).", "(80%), predicted 36.0 ms (90%)."))
    assert any("beyond the at most 32.0 ms" in v for v in check(beyond))
    over = _with(findings=[{**GOOD["findings"][0]}, {**GOOD["findings"][1], "share": 0.74}])
    assert any("add up to 154%" in v for v in check(over))
    other_action = _with(next_steps=[{"fix": "amp", "title": "t", "reason": "r"}])
    assert any("'do this next' starts with amp" in v for v in check(other_action))
    done = _with(advice_left_out={"amp": "the script already does it"})
    assert any("finding compute offers ['amp']" in v for v in check(done))
    cpu = _with(device=None, findings=[{**GOOD["findings"][0], "evidence": {}}])
    assert any("speaks of a GPU" in v for v in check(cpu, {"gpus": []}))
    assert not any("speaks of a GPU" in v for v in check(cpu, {"gpus": ["NVIDIA H100"]}))


def test_the_checker_holds_every_step_time_to_its_clock():
    page = ("<p>Input-bound (high): the GPU waited for input 80% of the 40.0 ms step.</p>"
            "<p>A steady step takes 40.0 ms. The slowest steps, in ms on the host clock.</p>"
            "<p>expected, this action alone: step 40.0 → 8.0 ms at best (80% of the step)</p>"
            "<p>dataloader 30.4 -> 43.1 ms/step, the median step with the profiler on is 52 ms.</p>"
            "<p>transfer 50% (31.3 ms/step), +40 ms/step before the sync, 60 ms/step more waiting.</p>")
    assert check(GOOD, {}, page) == []
    host_median = page + "<p>The median step is 3.98 ms.</p>"   # a bimodal host median beside the device's step
    assert any("step time 3.98 ms where the page's steady step is 40.0 ms" in v for v in check(GOOD, {}, host_median))
    wrong_gain = page.replace("→ 8.0 ms", "→ 12.0 ms")
    assert any("removing 80% of 40.0 ms leaves 8.0 ms" in v for v in check(GOOD, {}, wrong_gain))
    predicted = page + "<p>predicted: step 40.0 → 20.0 ms (50% of the step, range 30-60%), assuming x</p>"
    assert check(GOOD, {}, predicted) == []
    wrong_pred = predicted.replace("→ 20.0 ms (50%", "→ 28.0 ms (50%")
    assert any("removing 50% of 40.0 ms leaves 20.0 ms" in v for v in check(GOOD, {}, wrong_pred))
    # a short step: the figures as printed are held to what they can stand for (1.86 ms less 12.49% is 1.63 ms),
    # not to 1.9 x 0.88 (the suite's own CPU run once printed this and was called inconsistent)
    short = {**GOOD, "step_time_s": {**GOOD["step_time_s"], "steady": 0.00186, "median": 0.00186},
             "headline": GOOD["headline"].replace("40.0 ms", "1.9 ms").replace("32.0 ms", "1.5 ms")}
    assert check(short, {}, "<p>expected: step 1.9 → 1.6 ms at best (12% of the step)</p>") == []
    assert any("removing 12% of 1.9 ms leaves 1.7 ms" in v
               for v in check(short, {}, "<p>expected: step 1.9 → 1.5 ms at best (12% of the step)</p>"))
    two_host = page + "<p>On the host clock the step is 31.0 ms. The host clock's step is 35.0 ms.</p>"
    assert any("host clock step is 31.0 ms" in v for v in check(GOOD, {}, two_host))
