"""Interval arithmetic: each nanosecond of a step counted once, innermost phase first (table-driven)."""
import pytest

import partition_reference as R
from haiprof.analyzers import steps as S
from haiprof.analyzers import verdict
from step_rows import rows

CASES = [
    # name, intervals, (start, end), expected ns per phase (missing = 0)
    ("empty step is other", [], (0, 100), {"other": 100}),
    ("disjoint phases", [("dataloader", 0, 30), ("forward", 30, 50), ("backward", 50, 90)], (0, 100),
     {"dataloader": 30, "forward": 20, "backward": 40, "other": 10}),
    ("h2d inside forward", [("forward", 10, 60), ("h2d", 20, 30)], (0, 100),
     {"forward": 40, "h2d": 10, "other": 50}),
    ("closure inside optimizer.step", [("optimizer", 0, 100), ("forward", 10, 40), ("backward", 40, 90)],
     (0, 100), {"optimizer": 20, "forward": 30, "backward": 50}),
    ("allreduce inside backward", [("backward", 0, 80), ("allreduce", 60, 90)], (0, 100),
     {"backward": 60, "allreduce": 30, "other": 10}),
    ("clipped to step", [("dataloader", -50, 20), ("optimizer", 90, 150)], (0, 100),
     {"dataloader": 20, "optimizer": 10, "other": 70}),
    ("same start: priority decides", [("forward", 0, 50), ("h2d", 0, 50)], (0, 50), {"h2d": 50}),
]


@pytest.mark.parametrize("name,intervals,span,expected", CASES, ids=[c[0] for c in CASES])
def test_attribute(name, intervals, span, expected):
    got = R.attribute(intervals, *span)
    assert got == {p: expected.get(p, 0) for p in S.ALL_PHASES}
    assert sum(got.values()) == span[1] - span[0]


def test_steps_from_optimizer_marks():
    recs = [("dataloader", 0, 10), ("forward", 10, 20), ("backward", 20, 40), ("optimizer", 40, 50),
            ("@step", 50, 50), ("dataloader", 50, 70), ("forward", 70, 75), ("backward", 75, 90),
            ("optimizer", 90, 95), ("@step", 95, 95), ("forward", 100, 110)]  # trailing eval: no step
    steps, info = S.build_steps(recs)
    assert info["boundary"] == "optimizer.step"
    assert list(zip(steps.start_ns.tolist(), steps.end_ns.tolist())) == [(0, 50), (50, 95)]
    assert steps.phase("dataloader")[1] == 20 and steps.phase("backward")[1] == 15


def test_backward_fallback_without_optimizer():
    recs = [("forward", 0, 10), ("backward", 10, 30), ("@backward", 30, 30),
            ("forward", 30, 40), ("backward", 40, 60), ("@backward", 60, 60)]
    steps, info = S.build_steps(recs)
    assert info["boundary"] == "backward" and len(steps) == 2


def test_gpu_intervals_replace_host_compute():
    recs = [("dataloader", 0, 10), ("forward", 10, 12), ("gpu:forward", 12, 60), ("backward", 12, 14),
            ("gpu:backward", 60, 90), ("@step", 100, 100)]
    steps, info = S.build_steps(recs)
    assert info["timing"] == "cuda-events"
    p = rows(steps)[0][3]
    assert p["forward"] == 48 and p["backward"] == 30 and p["dataloader"] == 10 and p["other"] == 12


def test_share_sums_to_one_and_warmup_excluded():
    recs = []
    t = 0
    for i in range(5):
        recs += [("dataloader", t, t + 70), ("forward", t + 70, t + 90), ("@step", t + 100, t + 100)]
        t += 100
    steps, _ = S.build_steps(recs)
    steady = S.steady_steps(steps, 1)
    assert len(steady) == 4
    share = S.phase_share(steady)
    assert abs(sum(share.values()) - 1) < 1e-9 and share["dataloader"] == pytest.approx(0.7)


@pytest.mark.parametrize("untraced,expect_traced_in", [(0, True), (1, True), (2, True), (3, False), (6, False)])
def test_traced_steps_join_the_statistics_when_fewer_than_three_others_remain(untraced, expect_traced_in):
    # `--trace-steps 100000`: the window covers all but a step or two; findings "over 1 steps" describe nothing.
    recs, t = [], 0
    for i in range(2 + 5 + untraced):    # 2 warm-up, 5 traced, then `untraced`
        recs += [("forward", t, t + 90), ("@step", t + 100, t + 100)]
        t += 100
    steps, _ = S.build_steps(recs)
    R.mark_traced(steps, [(steps.start_ns[2], steps.end_ns[6])])
    steady = S.steady_steps(steps, 2)
    assert bool(steady.traced.any()) is expect_traced_in
    assert len(steady) == (5 + untraced if expect_traced_in else untraced)


@pytest.mark.parametrize("share,steps,expected", [
    ({"dataloader": 0.7, "forward": 0.2, "other": 0.1}, 10, "io"),
    ({"forward": 0.3, "backward": 0.5, "optimizer": 0.1, "other": 0.1}, 10, "compute"),
    ({"allreduce": 0.45, "backward": 0.4, "other": 0.15}, 10, "communication"),
    ({"dataloader": 0.1, "forward": 0.2, "other": 0.7}, 10, "none"),
    ({"dataloader": 0.9, "other": 0.1}, 2, "none"),
    ({}, 0, "none"),
])
def test_decide(share, steps, expected):
    full = {p: share.get(p, 0.0) for p in S.ALL_PHASES}
    findings = verdict.phase_findings(full, steps, 0.1) if steps else []
    bottleneck, headline = verdict.decide(findings, steps)
    assert bottleneck == expected
    assert headline.endswith(".")
    if expected == "io":
        assert headline.startswith("Input-bound (high): the training loop waited for input 70% of the")


def test_launch_finding_beats_compute():
    share = {p: 0.0 for p in S.ALL_PHASES}
    share.update(forward=0.4, backward=0.5, other=0.1)
    findings = verdict.phase_findings(share, 10, 0.01)
    findings.append({"kind": "launch", "severity": "high", "share": 0.6, "message": "60% of step in tiny ops",
                     "evidence": {}, "fixes": ["compile"]})
    assert verdict.decide(findings, 10)[0] == "launch"


# -- evaluation between steps (issue 13) -------------------------------------------------------------------------
def _train_step(t):
    return [("dataloader", t, t + 10), ("forward", t + 10, t + 30), ("backward", t + 30, t + 60),
            ("optimizer", t + 60, t + 70), ("@step", t + 70, t + 70)]


def test_eval_pass_between_steps_is_cut_out_of_the_step():
    recs = _train_step(0) + _train_step(70)
    # evaluation after step 2: two batches, each a DataLoader wait and an eval forward
    recs += [("dataloader", 140, 150), ("eval", 150, 400), ("dataloader", 400, 410), ("eval", 410, 640)]
    recs += [(n, s + 500, e + 500) for n, s, e in _train_step(140)]
    steps, info = S.build_steps(recs)
    assert steps.duration_ns.tolist() == [70, 70, 70]       # the third step is training only
    assert info["eval_s"] * 1e9 == 640 - 140 and info["eval_passes"] == 1
    assert steps.phase("forward").tolist() == [20, 20, 20]


def test_a_single_no_grad_forward_inside_a_step_is_training_forward():
    recs = []
    for k in range(3):   # a frozen teacher: one eval forward before the student's forward in every step
        t = 100 * k
        recs += [("eval", t, t + 20), ("forward", t + 20, t + 40), ("backward", t + 40, t + 80),
                 ("optimizer", t + 80, t + 100), ("@step", t + 100, t + 100)]
    steps, info = S.build_steps(recs)
    assert info["eval_s"] == 0 and steps.phase("forward")[1] == 40


from hypothesis import given, settings, strategies as st

_iv = st.tuples(st.sampled_from(S.PHASES), st.integers(0, 1000), st.integers(0, 300)).map(
    lambda t: (t[0], t[1], t[1] + t[2]))


@settings(max_examples=300, deadline=None)
@given(st.lists(_iv, max_size=40), st.lists(st.integers(0, 1400), min_size=2, max_size=12, unique=True),
       st.lists(st.integers(0, 60), max_size=12))
def test_vectorised_attribution_equals_the_sweep(intervals, edges, cuts):
    # Windows as build_steps makes them: ordered, touching, some with their start cut (an evaluation block).
    edges = sorted(edges)
    windows = []
    for k, (a, b) in enumerate(zip(edges, edges[1:])):
        a = min(b - 1, a + (cuts[k] if k < len(cuts) else 0))
        windows.append((a, b))
    assert R.attribute_all(intervals, windows) == [R.attribute(intervals, a, b) for a, b in windows]


def test_vectorised_attribution_of_a_plain_loop():
    recs, t = [], 0
    for i in range(200):
        recs += [("dataloader", t, t + 10), ("forward", t + 12, t + 30), ("backward", t + 31, t + 90),
                 ("optimizer", t + 90, t + 100), ("@step", t + 100, t + 100)]
        t += 100
    steps, _ = S.build_steps(recs)
    assert len(steps) == 200 and rows(steps)[5][3] == {"dataloader": 10, "h2d": 0, "forward": 18, "backward": 59,
                                                        "optimizer": 10, "allreduce": 0, "other": 3}
