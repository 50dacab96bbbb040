"""analyzers/fix_choice.py: `--fix auto` ranks the verdict's fixes by predicted gain (analyzers/whatif.py) with a reason each, and leaves
out what cannot act here or what slowed this command before."""
import pytest

from haiprof.analyzers import fix_choice as C


LAUNCH_CUDA = {   # a device timeline: 60% launch gaps inside forward/backward, a per-parameter optimizer, no input wait
    "bottleneck": "launch", "steps": 100000, "step_time_s": {"steady": 0.03},
    "phase_share": {"forward": 0.3, "backward": 0.4, "optimizer": 0.25, "other": 0.05},
    "device": {"timeline": "device", "busy": {"forward": 0.3, "backward": 0.4, "optimizer": 0.25}, "busy_share": 0.05,
               "launch_parts": {"unfilled_spans": 0.85}, "idle_by_host": {"optimizer": 0.0},
               "bound": {"launch": 0.85, "io": 0.0}},
    "findings": [{"kind": "launch", "share": 0.85, "fixes": ["compile", "cuda-graphs", "fused-optim"]}]}
LAUNCH_CPU = {**LAUNCH_CUDA, "device": None, "launch": {"cpu": {"framework_share": 0.5, "tiny_share": 0.3}}}


@pytest.mark.parametrize("s,chosen,left_out", [
    # cuda-graphs: the gaps in forward/backward (0.85 x 0.7 / 0.95); fused-optim the optimizer's; compile fuses the
    # elementwise kernels (none listed), not the gaps
    (LAUNCH_CUDA, ["cuda-graphs", "fused-optim"], ["compile"]),
    # on the host clock: no CUDA graphs; fused-optim takes the optimizer's dispatch (20%), compile half the tiny ops (10%)
    (LAUNCH_CPU, ["fused-optim", "compile"], ["cuda-graphs"]),
])
def test_rank_by_prediction(s, chosen, left_out):
    got, excluded = C.rank(s, ["compile", "cuda-graphs", "fused-optim"])
    assert [c["id"] for c in got] == chosen
    assert [c["id"] for c in excluded] == left_out
    speeds = [c["expected_speedup"] for c in got]
    assert speeds == sorted(speeds, reverse=True) and all(x >= C.MIN_EXPECTED for x in speeds)
    assert all(c["reason"] for c in got + excluded)


def test_expected_gain_is_the_what_if():
    gain, why, p = C.expected_gain("fused-optim", LAUNCH_CUDA)
    assert p["gain_share"] <= 0.25 and gain == pytest.approx(1 / (1 - p["gain_share"]))
    # said of the run it was predicted on (the diagnosis), not as a step time of the fixed run's page
    assert why.startswith(f"predicted on the run it was chosen from: {100 * p['gain_share']:.0f}% of its 30.0 ms step")
    assert "the optimizer is 25% of the step" in why and "→" not in why
    assert C.expected_gain("cuda-graphs", LAUNCH_CPU)[0] is None


SLOW = {"regression": True, "slower_pct": 20.0}
FAST = {"regression": False, "slower_pct": 0.0}


@pytest.mark.parametrize("history,left_out", [
    ([], set()),
    ([{"run": "r2", "applied": ["prefetch"], "gain": SLOW}], {"prefetch"}),
    # the newest run of a fix decides: a later good run clears an older regression, and vice versa
    ([{"run": "r3", "applied": ["prefetch"], "gain": FAST}, {"run": "r2", "applied": ["prefetch"], "gain": SLOW}],
     set()),
    ([{"run": "r3", "applied": ["compile", "fused-optim"], "gain": SLOW},
      {"run": "r2", "applied": ["fused-optim"], "gain": FAST}], {"compile", "fused-optim"}),
])
def test_regressed_history(history, left_out):
    got = C.regressed(history)
    assert set(got) == left_out
    for why in got.values():
        assert "20% slower" in why


def test_rank_leaves_out_a_fix_that_slowed_this_command():
    chosen, excluded = C.rank(LAUNCH_CUDA, ["prefetch"], [{"run": "/runs/x", "applied": ["prefetch"], "gain": SLOW}])
    assert chosen == [] and excluded == [{"id": "prefetch", "reason": "made this command's step 20% slower in /runs/x"}]


def test_a_fix_the_script_failed_with_is_left_out_until_it_succeeds():
    crashed = {"run": "r3", "applied": ["compile"], "gain": {}, "crashed": 1}
    got = C.regressed([crashed, {"run": "r2", "applied": ["compile"], "gain": FAST}])
    assert set(got) == {"compile"} and "failed (exit 1)" in got["compile"] and "r3" in got["compile"]
    assert C.regressed([{"run": "r4", "applied": ["compile"], "gain": FAST}, crashed]) == {}
