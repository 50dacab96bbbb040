"""analyzers/fix_choice.py: `--fix auto` ranks the verdict's fixes by expected gain with a reason each, and leaves
out what cannot act here or what slowed this command before."""
import pytest

from haiprof.analyzers import fix_choice as C


def summary(bottleneck, share, phase_share, device=False):
    return {"bottleneck": bottleneck, "phase_share": phase_share, "device": {"timeline": "device"} if device else None,
            "findings": [{"kind": bottleneck, "share": share, "fixes": []}]}


LAUNCH_CPU = summary("launch", 0.6, {"forward": 0.4, "backward": 0.3, "optimizer": 0.25, "other": 0.05})
LAUNCH_CUDA = summary("launch", 0.6, {"forward": 0.4, "backward": 0.3, "optimizer": 0.02, "other": 0.28},
                      device=True)
IO = summary("io", 0.8, {"dataloader": 0.8, "forward": 0.1, "backward": 0.1})


@pytest.mark.parametrize("s,candidates,chosen,left_out", [
    (IO, ["prefetch"], ["prefetch"], []),
    (LAUNCH_CPU, ["compile", "cuda-graphs", "fused-optim"], ["compile", "fused-optim"], ["cuda-graphs"]),
    (LAUNCH_CUDA, ["compile", "cuda-graphs", "fused-optim"], ["cuda-graphs", "compile"], ["fused-optim"]),
])
def test_rank_table(s, candidates, chosen, left_out):
    got, excluded = C.rank(s, candidates)
    assert [c["id"] for c in got] == chosen
    assert [c["id"] for c in excluded] == left_out
    speeds = [c["expected_speedup"] for c in got]
    assert speeds == sorted(speeds, reverse=True) and all(x >= C.MIN_EXPECTED for x in speeds)
    assert all(c["reason"] for c in got + excluded)


def test_expected_gain_is_amdahl_on_the_share():
    gain, why = C.expected_gain("prefetch", IO)
    assert gain == pytest.approx(1 / (1 - 0.8 * C.REMOVES["prefetch"]))
    assert "80% of the step" in why
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
    chosen, excluded = C.rank(IO, ["prefetch"], [{"run": "/runs/x", "applied": ["prefetch"], "gain": SLOW}])
    assert chosen == [] and excluded == [{"id": "prefetch", "reason": "made this command's step 20% slower in /runs/x"}]


def test_a_fix_the_script_failed_with_is_left_out_until_it_succeeds():
    crashed = {"run": "r3", "applied": ["compile"], "gain": {}, "crashed": 1}
    got = C.regressed([crashed, {"run": "r2", "applied": ["compile"], "gain": FAST}])
    assert set(got) == {"compile"} and "failed (exit 1)" in got["compile"] and "r3" in got["compile"]
    assert C.regressed([{"run": "r4", "applied": ["compile"], "gain": FAST}, crashed]) == {}
