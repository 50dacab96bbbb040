"""analyzers/fix_gain.py: speedup from the steady step, wall time of both runs, compile cost and break-even step,
and the loud regression line; table-driven on plain numbers."""
import pytest

from haiprof.analyzers import fix_gain as G
from haiprof.analyzers.compare import compare_summaries


@pytest.mark.parametrize("durations,steady,extra", [
    ([], 0.1, 0.0),
    ([0.1, 0.1, 0.1, 0.1], 0.1, 0.0),                      # no slow start
    ([5.0, 0.1, 0.1, 0.1, 0.1, 0.1], 0.1, 4.9),            # one compile step
    ([5.0, 2.0, 0.1, 0.1, 0.1, 0.1], 0.1, 4.9 + 1.9),      # forward compile, then the backward's
    ([5.0, 0.1, 2.0, 0.1, 0.1, 0.1], 0.1, 4.9),            # only *leading* slow steps count
    ([5.0, 0.1, 0.1], 0.1, 0.0),                           # too few steps to call anything a slow start
])
def test_slow_start_extra(durations, steady, extra):
    assert G.slow_start_extra_s(durations, steady) == pytest.approx(extra)


@pytest.mark.parametrize("cost,before,after,step", [
    (80.0, 0.0275, 0.0078, 4061),   # the CPU launch example: 80 s compile, 27.5 -> 7.8 ms per step
    (10.0, 0.2, 0.1, 100),          # exact: 10 s at 0.1 s saved per step
    (10.0, 0.2, 0.1 + 1e-12, 100),
    (0.0, 0.2, 0.1, 0),
    (5.0, 0.1, 0.1, None),          # saves nothing per step: never pays off
    (5.0, 0.1, 0.2, None),          # slower: never
    (None, 0.2, 0.1, None),
])
def test_break_even_step(cost, before, after, step):
    assert G.break_even_step(cost, before, after) == step


CASES = [
    # name, before (steady s, wall s, steps), after, applied, before durations, after durations -> expected
    ("plain speedup", (0.030, 10.0, 100), (0.015, 6.0, 100), ["prefetch"], None, None,
     {"speedup": 2.0, "wall_speedup": 10 / 6, "regression": False, "compile": None}),
    ("slower by 20%", (0.0302, 5.0, 50), (0.03624, 6.0, 50), ["prefetch"], None, None,
     {"speedup": 0.0302 / 0.03624, "regression": True, "slower_pct": 20.0}),
    ("within noise", (0.100, 5.0, 50), (0.102, 5.0, 50), ["amp"], None, None,
     {"regression": False, "slower_pct": 2.0}),
    ("exactly 3% is a regression", (0.100, 5.0, 50), (0.103, 5.0, 50), ["amp"], None, None,
     {"regression": True}),
    ("compile pays off late", (0.0275, 5.5, 200), (0.0078, 86.0, 200), ["compile", "fused-optim"],
     [0.0275] * 199, [60.0078, 20.0078] + [0.0078] * 197,
     {"speedup": 0.0275 / 0.0078, "wall_speedup": 5.5 / 86.0, "regression": False,
      "compile": {"cost_s": 80.0, "break_even_step": 4061, "paid_off_in_run": False}}),
    ("baseline warm-up is not compile cost", (0.1, 5.0, 100), (0.05, 8.0, 100), ["cuda-graphs"],
     [1.1] + [0.1] * 98, [3.05] + [0.05] * 98,
     {"compile": {"cost_s": 2.0, "break_even_step": 40, "paid_off_in_run": True}}),
    ("compile fix not applied: no compile block", (0.1, 5.0, 100), (0.05, 8.0, 100), ["amp"],
     [0.1] * 99, [3.05] + [0.05] * 98, {"compile": None}),
]


@pytest.mark.parametrize("name,before,after,applied,bd,ad,expected", CASES, ids=[c[0] for c in CASES])
def test_fix_gain_table(name, before, after, applied, bd, ad, expected):
    b = {"step_time_s": before[0], "wall_time_s": before[1], "steps": before[2]}
    a = {"step_time_s": after[0], "wall_time_s": after[1], "steps": after[2]}
    g = G.fix_gain(b, a, applied, bd, ad)
    for k, v in expected.items():
        if isinstance(v, dict):
            for kk, vv in v.items():
                assert g[k][kk] == pytest.approx(vv), (k, kk, g[k])
        elif v is None or isinstance(v, bool):
            assert g[k] is v, (k, g[k])
        else:
            assert g[k] == pytest.approx(v), (k, g[k])
    assert (g["message"] is not None) == g["regression"]


def test_regression_message_is_first_and_loud():
    g = G.fix_gain({"step_time_s": 0.0302, "wall_time_s": 5.0, "steps": 50},
                   {"step_time_s": 0.0363, "wall_time_s": 6.0, "steps": 50}, ["prefetch"])
    lines = G.text_lines(g)
    assert lines[0].startswith("WARNING: prefetch made each step 20% slower")
    assert lines[0].endswith("not recommended for this script")
    assert "0.83x" in lines[1] and "whole run wall time: 5.0 s -> 6.0 s (0.83x), 50 steps each" == lines[2]


def test_wall_time_with_different_step_counts_has_no_ratio():
    g = G.fix_gain({"step_time_s": 0.2, "wall_time_s": 10.0, "steps": 50},
                   {"step_time_s": 0.1, "wall_time_s": 8.0, "steps": 20}, ["amp"])
    assert any("not comparable as a ratio" in x for x in G.text_lines(g))


def test_reported_speedup_is_the_steady_ratio_not_the_median():
    before = {"step_time_s": {"median": 0.010, "steady": 0.100}, "steps": 20}
    after = {"step_time_s": {"median": 0.009, "steady": 0.025}, "steps": 20}
    c = compare_summaries(before, after)
    assert c["speedup"] == pytest.approx(4.0)
    assert G.fix_gain(c["before"], c["after"], ["prefetch"])["speedup"] == pytest.approx(4.0)


def test_a_phase_the_fix_cannot_touch_moving_marks_the_comparison_unreliable():
    from haiprof.analyzers import fix_gain as G

    def phases(**kw):
        return {p: {"before_s": a, "after_s": b} for p, (a, b) in kw.items()}
    # only compile applied, yet the loader went 1036 -> 433 ms/step: another machine state, not the fix
    moved = G.untouched_moves(phases(dataloader=(1.036, 0.433), forward=(0.2, 0.1)), ["compile"], 1.3)
    assert [m["phase"] for m in moved] == ["dataloader"]
    assert "unreliable" in G.unreliable_message(moved, ["compile"])
    # prefetch may move the loader; small moves of untouched phases are noise, not a different machine
    assert G.untouched_moves(phases(dataloader=(1.0, 0.2), optimizer=(0.010, 0.011)), ["prefetch"], 1.2) == []
    assert G.unreliable_message([], ["prefetch"]) is None


def test_the_comparison_shows_its_noise_and_the_baselines_age():
    from haiprof.analyzers import fix_gain as G

    assert G.spread({"median": 0.1, "p10": 0.09, "p90": 0.12}) == pytest.approx(0.3)
    assert G.spread({"median": None}) is None
    gain = {"speedup": 1.1, "step_time_before_s": 0.11, "step_time_after_s": 0.1, "noise": {"before": 0.3,
            "after": 0.05}, "baseline_age_s": 5400.0}
    lines = G.text_lines(gain)
    assert any("baseline 30%, fixed run 5%" in x and "recorded 90 min before" in x for x in lines), lines


def test_a_speedup_against_a_baseline_under_other_conditions_says_unreliable_and_why_in_its_line():
    from haiprof.analyzers import conditions, fix_gain as G

    gain = {"speedup": 5.33, "step_time_before_s": 0.533, "step_time_after_s": 0.1,
            "conditions": conditions.message(["torch threads 1 -> 2", "OMP_NUM_THREADS 1 -> unset"])}
    line = next(x for x in G.text_lines(gain) if x.startswith("speedup"))
    assert line.endswith("5.33x (533.0 -> 100.0 ms per step): unreliable, the baseline ran under other conditions "
                         "(torch threads 1 -> 2; OMP_NUM_THREADS 1 -> unset)"), line
    moved = G.untouched_moves({"dataloader": {"before_s": 1.036, "after_s": 0.433}}, ["compile"], 1.3)
    line = next(x for x in G.text_lines({**gain, "conditions": None, "unreliable": G.unreliable_message(
        moved, ["compile"])}) if x.startswith("speedup"))
    assert "unreliable, a phase no applied fix touches moved (dataloader 1036.0 -> 433.0 ms/step)" in line, line
    nested = conditions.message(["the training thread's CPU work took 2.4x -> 1.9x its CPU time (waiting for a CPU "
                                 "58% -> 47% of its runnable time)"])
    line = next(x for x in G.text_lines({**gain, "conditions": nested}) if x.startswith("speedup"))
    assert line.endswith("(waiting for a CPU 58% -> 47% of its runnable time))"), line
    clean = next(x for x in G.text_lines({**gain, "conditions": None}) if x.startswith("speedup"))
    assert "unreliable" not in clean


def test_interleaved_pairs_wider_than_the_effect_say_no_measurable_change():
    from haiprof.analyzers import fix_gain as G

    # pair ratios 0.72-2.88x (median 0.85x): the spread is wider than the effect, not "15% slower"
    wide = G.with_interleaved({"applied": ["compile"]}, G.interleaved([(1.0, 1 / 0.85), (1.0, 1 / 0.72),
                                                                      (2.88, 1.0)]))
    assert not wide["regression"] and wide["message"] is None
    lines = G.text_lines(wide)
    assert any("no measurable change" in x for x in lines) and not any("slower" in x for x in lines), lines
    # tight pairs around 0.72x: a measured slow-down, said first
    tight = G.with_interleaved({"applied": ["compile"]}, G.interleaved([(1.0, 1 / 0.71), (1.0, 1 / 0.72),
                                                                       (1.0, 1 / 0.73)]))
    assert tight["regression"] and "39% slower" in tight["message"]
    assert any("0.72x median" in x for x in G.text_lines(tight))


def test_a_fixed_run_says_what_was_predicted_beside_what_it_measured():
    from haiprof.analyzers import fix_gain as G

    p = {"step_s": 0.0302, "step_before_s": 0.0302, "step_after_pred_s": 0.0209, "low_share": 0.0,
         "high_share": 0.58, "measured_step_after_s": 0.0386, "error_points": 58.6}
    lines = G.text_lines({"predicted": p})
    assert ("predicted before the fix: step 30.2 -> 20.9 ms (range 0-58%); measured 38.6 ms: off by 59 "
            "points of the baseline step") in lines, lines


def test_the_page_says_unreliable_and_no_measurable_change_as_the_console_does():
    from haiprof.render.before_after import _gain

    il = {"pairs": 3, "min": 0.72, "max": 2.88, "spread": 2.5, "speedup": 0.85, "measurable": False}
    rows = _gain({"interleaved": il, "speedup": 5.33, "unreliable_why": "the baseline ran under other conditions "
                  "(torch threads 1 -> 2)"})
    text = " ".join(cell for row in rows for cell, _ in row)
    assert "no measurable change" in text and "0.85× median" not in text
    assert "5.33×: unreliable, the baseline ran under other conditions (torch threads 1 -> 2)" in text


def test_a_slowdown_overlapping_the_baseline_in_an_unreliable_comparison_is_not_held_against_the_fix():
    """A GAN's fused-optim run on a machine that got busier: 0.11x, forward and backward (which fused-optim cannot
    change) 5-18x slower, the fixed run's steps from 3.0 ms (p10) against the baseline's up to 6.1 ms (p90). It was
    "not recommended for this script", and `--fix auto` would never have chosen it again."""
    from haiprof.analyzers import fix_gain as G
    from haiprof.analyzers.fix_choice import regressed

    base = {"p10": 0.0037, "p90": 0.0061}

    def gain(after_s, after_p10, why="a phase no applied fix touches moved (backward 1.8 -> 33.1 ms/step)"):
        g = G.fix_gain({"step_time_s": 0.0067, "wall_time_s": 5.1, "steps": 20},
                       {"step_time_s": after_s, "wall_time_s": 8.7, "steps": 41}, ["fused-optim"])
        g.update(unreliable_why=why, interleaved=None)
        return G.without_unreliable_regression(g, base, {"p10": after_p10, "p90": 0.21})

    noisy = gain(0.0594, 0.0030)
    assert not noisy["regression"] and noisy["message"] is None
    assert "from 3.0 ms, p10, against up to 6.1 ms, p90" in noisy["regression_withheld"]
    assert any(x.startswith("not held against fused-optim") for x in G.text_lines(noisy))
    assert regressed([{"run": "r", "applied": ["fused-optim"], "gain": noisy}]) == {}
    # every typical step slower (an extra 500 ms a step beside busy processes: 529 ms p10 against 456 ms p90): stands
    slower = gain(0.0594, 0.0070)
    assert slower["regression"] and "not recommended" in slower["message"]
    # a reliable comparison's slowdown stands, overlap or not
    assert gain(0.0594, 0.0030, why=None)["regression"]
