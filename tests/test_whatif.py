"""analyzers/whatif.py: each fix's predicted gain is a point inside its range, and never more than the time of what
that fix touches, on any timeline (property tests over synthetic device and host timelines); the cases the issue
names (a CPU without bf16, a script already in reduced precision, a CPU-bound worker pool, the wait for a slower
rank, a fix that pays less than its compile time); and the recorded H100 launch run's fused-optim prediction
within its optimizer's share."""
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import GPU_RUNS
from haiprof.analyzers import fix_choice, whatif

FIXES = list(whatif.PREDICTORS)
share = st.floats(0.0, 1.0)


@st.composite
def device_summaries(draw):
    """A device timeline: spans per phase (a partition of at most the step), kernels inside them, idle by host."""
    cuts = sorted(draw(st.lists(share, min_size=5, max_size=5)))
    fwd, bwd, opt, h2d, dl = (b - a for a, b in zip([0.0] + cuts[:-1], cuts))
    density = draw(share)
    busy = {"forward": fwd, "backward": bwd, "optimizer": opt, "h2d": h2d, "dataloader": 0.0, "allreduce": 0.0}
    spans = fwd + bwd + opt + h2d
    unfilled = spans * (1 - density) * draw(share)
    top = [{"name": draw(st.sampled_from(["sgemm_f32", "vectorized_elementwise_kernel", "reduce_kernel"])),
            "launched_by": draw(st.sampled_from(["aten::mm", "aten::addmm", "aten::add_", "aten::_foreach_add_"])),
            "tensor_cores": draw(st.booleans()), "share": s} for s in draw(st.lists(st.floats(0, 0.3), max_size=4))]
    steps = draw(st.integers(1, 5))
    return {
        "step_time_s": {"steady": draw(st.floats(1e-3, 1.0)), "median": 0.05, "p10": 0.049, "p90": 0.051},
        "steps": draw(st.integers(3, 10000)), "steps_analyzed": 50,
        "device": {"timeline": "device", "busy": busy, "busy_share": spans * density,
                   "bound": {"io": dl + h2d, "compute": spans * density, "launch": unfilled, "communication": 0.0},
                   "idle_by_host": {"dataloader": dl, "forward": 0.0, "backward": 0.0, "optimizer": 0.0, "h2d": 0.0},
                   "launch_parts": {"unfilled_spans": unfilled}},
        "gpu": {"steps": steps, "top_kernels": top,
                "copies": [{"kind": "HtoD pageable", "bytes": draw(st.integers(0, 10 ** 9)),
                            "gb_per_s": draw(st.floats(0.5, 50)), "total_us": draw(st.floats(0, 1e5))}]},
        "findings": [{"kind": "io", "share": dl + h2d, "fixes": ["prefetch"], "evidence": {"input_split": {
            "cores": draw(st.integers(1, 64)), "workers": {"workers": draw(st.sampled_from([0, 0, 4]))},
            "loader_cpu_share": draw(share),
            "loader_thread": {"waits": draw(st.integers(1, 100)), "wall_s": draw(st.floats(0.01, 10)),
                              "cpu_s": draw(st.floats(0, 10))}}}},
                     {"kind": "communication", "share": 0.0, "fixes": ["compress", "bucket"], "evidence": {}}],
        "phase_share": {"forward": fwd, "backward": bwd, "optimizer": opt, "h2d": h2d, "dataloader": dl},
        "script_uses": {}, "conditions": {"cores": 8},
    }


@st.composite
def host_summaries(draw):
    cuts = sorted(draw(st.lists(share, min_size=5, max_size=5)))
    fwd, bwd, opt, dl, ar = (b - a for a, b in zip([0.0] + cuts[:-1], cuts))
    transfer = draw(st.floats(0, 1)) * ar
    return {
        "step_time_s": {"steady": draw(st.floats(1e-3, 1.0))}, "steps": draw(st.integers(3, 10000)),
        "device": None, "phase_share": {"forward": fwd, "backward": bwd, "optimizer": opt, "dataloader": dl,
                                        "allreduce": ar},
        "launch": {"cpu": {"framework_share": draw(share), "tiny_share": draw(share),
                           "top_ops": [{"name": "aten::mm", "share": draw(share)}]}},
        "findings": [{"kind": "io", "share": dl, "fixes": ["prefetch"], "evidence": {}},
                     {"kind": "communication", "share": ar, "fixes": ["compress", "bucket"],
                      "evidence": {"transfer_share": transfer}}],
        "script_uses": {}, "conditions": {"cpu_bf16": draw(st.sampled_from([True, False, None]))},
        "efficiency": {"mfu": draw(st.sampled_from([None, 0.05, 0.5, 0.95, 1.2]))},
    }


def _touched(fix: str, s: dict) -> float:
    """The time each fix can act on, read from the timeline independently of whatif's own bookkeeping."""
    dev, ps = s.get("device"), s["phase_share"]
    if fix == "prefetch":
        return dev["bound"]["io"] if dev else s["findings"][0]["share"]
    if fix == "fused-optim":
        return dev["busy"]["optimizer"] + dev["idle_by_host"]["optimizer"] if dev else ps["optimizer"]
    if fix in ("cuda-graphs", "compile"):
        return dev["busy"]["forward"] + dev["busy"]["backward"] if dev else ps["forward"] + ps["backward"]
    if fix == "amp":
        return dev["busy_share"] if dev else ps["forward"] + ps["backward"]
    return s["findings"][1]["evidence"].get("transfer_share", s["findings"][1]["share"])  # compress, bucket


def _check(s: dict):
    for fix in FIXES:
        p = whatif.predict(fix, s)
        assert p["low_share"] <= p["gain_share"] <= p["high_share"] <= p["touches_share"] + 1e-9, (fix, p)
        # a slow hand-off: only prefetch may predict a slower step, and then it is not proposed
        assert p["gain_share"] >= 0.0 or (fix == "prefetch" and not p["worth"]), (fix, p)
        assert p["low_share"] >= 0.0 or fix == "prefetch", (fix, p)
        assert p["high_share"] <= _touched(fix, s) + 1e-9, (fix, p, _touched(fix, s))
        assert p["text"].startswith("predicted:") and p["assumed"]
        if not p["worth"]:
            assert p["why_not"]


@settings(max_examples=300, deadline=None)
@given(device_summaries())
def test_device_prediction_never_exceeds_what_the_fix_touches(s):
    _check(s)


@settings(max_examples=300, deadline=None)
@given(host_summaries())
def test_host_prediction_never_exceeds_what_the_fix_touches(s):
    _check(s)


CPU = {"step_time_s": {"steady": 0.1}, "steps": 100, "device": None, "script_uses": {},
       "phase_share": {"forward": 0.4, "backward": 0.4, "optimizer": 0.1, "dataloader": 0.1},
       "launch": {"cpu": {"framework_share": 0.2, "tiny_share": 0.1, "top_ops": [{"name": "aten::mm", "share": 0.8}]}},
       "findings": [], "conditions": {"cpu_bf16": False}}


def test_amp_gains_nothing_on_a_cpu_without_bf16_or_a_script_already_in_reduced_precision():
    p = whatif.predict("amp", CPU)
    assert p["gain_share"] == 0 and not p["worth"] and "no native bf16" in p["why_not"]
    with_bf16 = whatif.predict("amp", {**CPU, "conditions": {"cpu_bf16": True}})
    assert 0 < with_bf16["gain_share"] <= 0.8 and with_bf16["worth"]
    already = whatif.predict("amp", {**CPU, "conditions": {"cpu_bf16": True}, "script_uses": {"amp": "autocast"}})
    assert already["gain_share"] == 0 and "already runs in reduced precision" in already["why_not"]
    # --fix auto leaves it out with that reason, where it used to expect 1.41x
    chosen, excluded = fix_choice.rank(CPU, ["amp"])
    assert chosen == [] and "no native bf16" in excluded[0]["reason"]


def _io_run(workers: int, cpu_share: float, wall_s: float = 0.8) -> dict:
    return {"step_time_s": {"steady": 0.1}, "steps": 100, "script_uses": {}, "conditions": {},
            "device": {"timeline": "device", "bound": {"io": 0.8}, "busy": {"h2d": 0.05, "forward": 0.1},
                       "idle_by_host": {"dataloader": 0.75}, "busy_share": 0.15},
            "findings": [{"kind": "io", "share": 0.8, "fixes": ["prefetch"], "evidence": {"input_split": {
                "cores": 8, "workers": {"workers": workers}, "loader_cpu_share": cpu_share,
                "loader_thread": {"waits": 10, "wall_s": wall_s, "cpu_s": wall_s * cpu_share}}}}],
            "phase_share": {"dataloader": 0.75, "h2d": 0.05, "forward": 0.2}}


def test_a_device_prefetcher_does_not_help_a_cpu_bound_worker_pool():
    pool = whatif.predict("prefetch", _io_run(workers=4, cpu_share=0.95))
    assert pool["gain_share"] <= 0.05 + 1e-9 and "CPU-bound" in pool["assumed"]
    # loading on the training thread: workers take all of the wait (the step keeps its 20 ms of compute) while
    # 8 cores produce 80 ms fetches faster (10 ms a batch); 240 ms fetches, 30 ms a batch, are the step's floor
    assert whatif.predict("prefetch", _io_run(workers=0, cpu_share=0.95))["gain_share"] == pytest.approx(0.8)
    slow = whatif.predict("prefetch", _io_run(workers=0, cpu_share=0.95, wall_s=2.4))
    assert slow["gain_share"] == pytest.approx(0.7) and "8 workers produce a batch every 30.0 ms" in slow["assumed"]


def test_compress_acts_on_the_transfer_not_the_wait_for_a_slower_rank():
    s = {**CPU, "findings": [{"kind": "communication", "share": 0.5, "fixes": ["compress"],
                              "evidence": {"transfer_share": 0.1}}]}
    p = whatif.predict("compress", s)
    assert p["touches_share"] == pytest.approx(0.1) and p["high_share"] <= 0.1 and "slower rank (40%)" in p["assumed"]


def test_a_fix_that_pays_less_than_its_compile_time_is_not_proposed():
    dev = {"timeline": "device", "busy": {"forward": 0.2, "backward": 0.2, "optimizer": 0.1}, "busy_share": 0.1,
           "launch_parts": {"unfilled_spans": 0.4}, "idle_by_host": {}, "bound": {"launch": 0.4}}
    short = {**CPU, "device": dev, "steps": 50, "step_time_s": {"steady": 0.01}}
    p = whatif.predict("cuda-graphs", short)
    assert not p["worth"] and "less than its compile time" in p["why_not"]
    assert whatif.predict("cuda-graphs", {**short, "steps": 100000})["worth"]


def test_combined_fixes_on_the_same_part_do_not_add_up():
    a = {"fix": "cuda-graphs", "gain_share": 0.3, "low_share": 0.2, "high_share": 0.4, "step_s": 0.1, "assumed": "x"}
    b = {**a, "fix": "compile", "gain_share": 0.05, "low_share": 0.0, "high_share": 0.1}
    c = {**a, "fix": "prefetch", "gain_share": 0.2, "low_share": 0.1, "high_share": 0.3}
    got = whatif.combined({"cuda-graphs": a, "compile": b, "prefetch": c}, ["cuda-graphs", "compile", "prefetch"])
    assert got["gain_share"] == pytest.approx(0.55)   # gaps (0.3) + fusion (0.05) + input (0.2)
    assert whatif.combined({"cuda-graphs": a}, ["amp"]) is None


@pytest.mark.skipif(not (GPU_RUNS / "h100-2026-11-22" / "launch_base").is_dir(), reason="no recorded GPU runs")
def test_recorded_launch_run_fused_optim_stays_within_its_optimizer(gpu_reports):
    (d, r), = gpu_reports(["launch_base"]).values()
    assert r.returncode == 0, r.stderr
    s = json.loads((d / "summary.json").read_text())
    p = s["predictions"]["fused-optim"]
    opt = s["device"]["busy"]["optimizer"] + s["device"]["idle_by_host"]["optimizer"]
    assert p["high_share"] <= opt + 1e-9 and p["gain_share"] < 0.6   # was "92% of the step" from the class share
    first = s["next_steps"][0]
    assert first["predicted"] == p and first["gain_share"] <= opt + 1e-9
    assert f"predicted {p['gain_share'] * s['step_time_s']['steady'] * 1e3:.1f} ms" in s["headline"]


def test_a_fixed_run_reports_what_its_baseline_predicted_beside_what_it_measured(fix_pair):
    from haiprof.analyzers.page_invariants import check

    from conftest import load_summary
    fixed = fix_pair / "fixed"
    s = load_summary(fixed)
    gain = s["fixes"]["gain"]
    p = gain["predicted"]
    assert p["fixes"] == ["fused-optim"] and p["step_before_s"] == gain["step_time_before_s"]
    assert p["measured_step_after_s"] == gain["step_time_after_s"]
    assert p["step_after_pred_s"] == pytest.approx(p["step_before_s"] * (1 - p["gain_share"]))
    assert p["error_points"] == pytest.approx(100 * abs(p["step_after_pred_s"] - p["measured_step_after_s"])
                                              / p["step_before_s"], abs=0.05)
    html = (fixed / "report.html").read_text()
    assert "predicted before the fix (what-if of the baseline)" in html and f"off by {p['error_points']:.0f} points" in html
    assert check(s, json.loads((fixed / "meta.json").read_text()), html) == []


def test_predicted_vs_measured_takes_the_interleaved_pairs_where_there_are_some():
    from haiprof.analysis.fix_results import predicted_vs_measured

    base = {**CPU, "step_time_s": {"steady": 0.03}, "device": {
        "timeline": "device", "busy": {"forward": 0.3, "backward": 0.4, "optimizer": 0.25}, "busy_share": 0.05,
        "launch_parts": {"unfilled_spans": 0.85}, "idle_by_host": {}, "bound": {"launch": 0.85}}}
    gain = {"applied": ["cuda-graphs"], "step_time_before_s": 0.03, "step_time_after_s": 0.01}
    alone = predicted_vs_measured(base, gain)
    assert alone["measured_step_after_s"] == 0.01 and alone["measured_by"] == "this run's steady step"
    paired = predicted_vs_measured(base, {**gain, "interleaved": {"speedup": 1.5}})
    assert paired["measured_step_after_s"] == pytest.approx(0.02) and "interleaved" in paired["measured_by"]
    assert paired["error_points"] == pytest.approx(100 * abs(paired["step_after_pred_s"] - 0.02) / 0.03, abs=0.05)


def test_a_fix_auto_chose_is_held_to_the_prediction_it_was_chosen_on():
    """--fix auto chose the fix on the diagnosis run's what-if; the fixed run compares its pairs with the last
    baseline pass, which may not have measured what the diagnosis did (a 0.4 s pass ends before the sampler sees
    the loader's files: no read probe). The claim checked is the one the choice was made on."""
    from haiprof.analysis.fix_results import predicted_vs_measured

    base = _io_run(workers=0, cpu_share=0.1)   # its own what-if: 80% off the step
    gain = {"applied": ["prefetch"], "step_time_before_s": 0.1, "step_time_after_s": 0.09}
    own = predicted_vs_measured(base, gain)
    assert own["gain_share"] == pytest.approx(0.8)
    at_choice = {**whatif.predict("prefetch", base), "gain_share": 0.15, "low_share": 0.0, "high_share": 0.3,
                 "assumed": "the device read 667 MiB/s with one reader, 788 MiB/s with 8: 1.2x"}
    held = predicted_vs_measured(base, gain, [{"id": "prefetch", "predicted": at_choice}, {"id": "amp"}])
    assert held["gain_share"] == pytest.approx(0.15) and "1.2x" in held["assumed"]
    assert held["error_points"] == pytest.approx(100 * abs(0.1 * 0.85 - 0.09) / 0.1, abs=0.05)
    assert predicted_vs_measured(base, gain, [{"id": "prefetch", "predicted": {"gain_share": 0.1}}]) == own


def test_a_loss_difference_after_prefetch_started_workers_is_not_called_the_fix_changing_training():
    from haiprof.analysis.fix_results import workers_started
    from haiprof.analyzers.loss_guard import compare_losses, with_worker_caveat

    fixes = {"results": [{"id": "prefetch", "status": "applied",
                          "events": [{"status": "applied", "num_workers": 4}, {"status": "applied"}]}]}
    assert workers_started(fixes) == 4 and workers_started({"results": []}) is None
    diverged = compare_losses([1.0] * 10, [1.2] * 10)
    assert "the fix changes what is trained" in diverged["message"]
    said = with_worker_caveat(diverged, 4)
    assert said["status"] == "diverged" and said["data_order"]   # still said, as a difference to check
    assert "the fix changes what is trained" not in said["message"] and "4 DataLoader workers" in said["message"]
    assert with_worker_caveat(diverged, None) == diverged
    assert with_worker_caveat(compare_losses([1.0] * 10, [1.0] * 10), 4)["status"] == "ok"


def test_a_loader_reading_local_storage_keeps_a_device_that_reads_no_faster_in_its_range():
    """Eight workers help a loader waiting on local reads only as far as the device serves them in parallel: the
    point assumes it does, the range's slow end that it does not (one batch per fetch: no gain beyond overlap).
    The bundled storage example, O_DIRECT reads on a throughput-capped volume, measured 1.3x where 8x was promised
    with no range; a loader waiting without local reads (a remote fetch, a sleep) keeps its single point."""
    remote = whatif.predict("prefetch", _io_run(workers=0, cpu_share=0.1))
    local = _io_run(workers=0, cpu_share=0.1)
    local["findings"][0]["evidence"]["input_split"]["proc_read_bytes_per_s"] = 84 * 2**20
    disk = whatif.predict("prefetch", local)
    assert disk["gain_share"] == pytest.approx(remote["gain_share"])   # the point: the same parallel workers
    assert remote["low_share"] == pytest.approx(remote["gain_share"])
    fetch = 0.8 / 10   # wall per fetch, 10% of it CPU: the slow end is the device's wait for one reader, 72 ms a
    # batch (the CPU part spreads over the workers and cores)
    assert disk["low_share"] == pytest.approx(max(-1.0, (0.1 - max(0.02, 0.9 * fetch)) / 0.1))
    assert disk["low_share"] < disk["gain_share"] and "reads local storage (84 MiB/s" in disk["assumed"]
    slow = whatif.predict("prefetch", {**local, "findings": [{**local["findings"][0], "evidence": {"input_split": {
        **local["findings"][0]["evidence"]["input_split"], "loader_thread": {"waits": 10, "wall_s": 1.2,
                                                                             "cpu_s": 0.12}}}}]})
    assert slow["low_share"] < 0 and "slower to" in slow["text"]   # one reader's fetch is longer than the step


def test_a_range_reaching_a_slower_step_is_said_so_beside_the_measured_one():
    from haiprof.analyzers.fix_gain import text_lines
    from haiprof.render.before_after import _gain

    p = {**whatif.combined({"prefetch": whatif.predict("prefetch", _h2d_run())}, ["prefetch"]),
         "step_before_s": 0.0302, "step_after_pred_s": 0.0268, "measured_step_after_s": 0.0396, "error_points": 42.4}
    line = next(x for x in text_lines({"predicted": p}) if x.startswith("predicted before the fix"))
    assert "slower to" in line and "range -" not in line
    cells = str(_gain({"predicted": p}))
    assert "slower to" in cells and "range -" not in cells


@pytest.mark.parametrize("low,high", [(0.8905, 0.8912), (0.25, 0.89), (-0.1, 0.89)])
def test_the_console_and_the_page_quote_the_range_the_what_if_said(low, high):
    # the range was worded three times ("no range" / "no range: its assumptions give one figure"; "of the step" /
    # "of the baseline's time"); the what-if words it once and the fixed run's line and page cell quote it
    from haiprof.analyzers.fix_gain import text_lines
    from haiprof.render.before_after import _gain

    pred = whatif.combined({"prefetch": {"fix": "prefetch", "gain_share": 0.891, "low_share": low, "high_share": high,
                                         "step_s": 0.1174, "assumed": "x"}}, ["prefetch"])
    p = {**pred, "step_before_s": 0.1174, "step_after_pred_s": 0.0128, "measured_step_after_s": 0.02,
         "error_points": 6.2}
    line = next(x for x in text_lines({"predicted": p}) if x.startswith("predicted before the fix"))
    cells = [c[0] for row in _gain({"predicted": p}) for c in row]
    assert f"12.8 ms ({whatif.range_text(pred)}); measured" in line, line
    assert any(c.endswith(f"({whatif.range_text(pred)})") for c in cells), cells


def _h2d_run(probe: dict | None = None) -> dict:
    """The recorded h2d_base in its figures: a 30.2 ms step waiting 97% for input, 77 MB a step copied from
    pageable memory at 9.2 GB/s, loading on the training thread."""
    s = _io_run(workers=0, cpu_share=0.95, wall_s=0.135)
    s["step_time_s"] = {"steady": 0.0302}
    s["device"]["bound"]["io"] = 0.97
    s["gpu"] = {"steps": 1, "copies": [{"kind": "HtoD pageable", "bytes": 77e6, "gb_per_s": 9.2, "total_us": 8400}]}
    return {**s, "handoff": probe} if probe else s


def test_an_unmeasured_hand_off_of_large_batches_says_so_and_its_range_reaches_a_slower_step():
    p = whatif.predict("prefetch", _h2d_run())
    assert "hand-off rate from workers was not measured" in p["assumed"]
    one = 77e6 / 9.2e9
    slow = whatif.HANDOFF_COPIES["high"] * one   # the slowest hand-off measured; the copy overlaps it
    assert p["low_share"] == pytest.approx((0.0302 - slow) / 0.0302) and p["low_share"] < 0
    # the point: 4.25 copies of 8.4 ms, longer than the 30.2 ms step: predicted slower, and so not proposed
    assert p["gain_share"] == pytest.approx((0.0302 - whatif.HANDOFF_COPIES["point"] * one) / 0.0302)
    assert p["gain_share"] < 0 < p["high_share"] and not p["worth"] and "slower" in p["why_not"]
    assert "% slower, range" in p["text"] and "slower to" in p["text"]
    assert p["step_after_s"] == pytest.approx(whatif.HANDOFF_COPIES["point"] * one)
    assert whatif.handoff_bytes(_h2d_run()) == pytest.approx(77e6)   # a probe is asked for
    assert whatif.handoff_bytes({**_h2d_run(), "gpu": {"steps": 1, "copies": [
        {"kind": "HtoD pageable", "bytes": 1e6, "gb_per_s": 9.2}]}}) is None   # small batches: not worth a probe


def test_batches_workers_cannot_hand_over_in_time_get_fewer_bytes_advice_and_no_fix():
    from haiprof.analyzers import actions

    def first(s: dict) -> dict:
        s = {**s, "findings": [{**s["findings"][0], "severity": "high"}]}
        s["predictions"] = whatif.predict_all(s, ["prefetch"])
        s["advice_left_out"] = actions.left_out(s)
        return actions.rank(s)[0]

    slow = first(_h2d_run())   # 77 MB a step: the hand-off predicted slower than loading on the training thread
    assert slow["fix"] is None and slow["title"].startswith("Send fewer bytes per batch")
    assert "77 MB" in slow["reason"] and slow["gain_share"] == 0.0   # no gain claimed without a what-if
    fast = first(_h2d_run({"handoff_bytes_per_s": 20e9, "bytes": 77e6}))   # a fast hand-off: workers it is
    assert fast["fix"] == "prefetch" and not fast["title"].startswith("Send fewer")


def test_a_measured_hand_off_sets_the_prediction():
    fast = whatif.predict("prefetch", _h2d_run({"handoff_bytes_per_s": 20e9, "bytes": 77e6}))
    slow = whatif.predict("prefetch", _h2d_run({"handoff_bytes_per_s": 2.0e9, "bytes": 77e6}))
    assert "measured on this machine (20.00 GB/s" in fast["assumed"]
    one = 77e6 / 9.2e9
    assert fast["step_after_s"] == pytest.approx(max(77e6 / 20e9, one / whatif.PINNED_SPEEDUP, 0.0302 * 0.03))
    assert slow["gain_share"] == pytest.approx(1 - 77e6 / 2e9 / 0.0302)   # a 38.5 ms hand-off: slower
    assert not slow["worth"] and slow["low_share"] < fast["low_share"]
    assert whatif.handoff_bytes(_h2d_run({"handoff_bytes_per_s": 2e9})) is None   # measured once


def test_the_hand_off_probe_measures_a_real_worker_and_is_kept_in_the_run_directory(tmp_path, monkeypatch):
    from haiprof.analysis import handoff
    from haiprof.collectors import handoff_probe

    probe = handoff_probe.measure(8 << 20)
    st = probe["stages_s"]
    assert probe["bytes"] == 8 << 20 and all(v > 0 for v in st.values())
    # the training process's side: transport, the first read of the new mapping (its page faults), release
    assert probe["handoff_bytes_per_s"] == pytest.approx(probe["bytes"] / (st["transport"] + st["first_read"]
                                                                          + st["release"]))
    calls = []
    monkeypatch.setattr(handoff_probe, "measure", lambda n: calls.append(n) or {**probe, "bytes": int(n)})
    meta = {"host": __import__("socket").gethostname(), "cpu_model": handoff_probe_cpu_model(), "exit_code": 0}
    live = _h2d_run()   # a report of a run still training (no end, its process alive): no worker beside it
    handoff.attach(tmp_path, {**meta, "exit_code": None, "pid": __import__("os").getpid()}, live)
    assert "handoff" not in live and calls == []
    s = _h2d_run()
    handoff.attach(tmp_path, meta, s)
    assert calls == [77e6] and s["handoff"]["bytes"] == int(77e6) and (tmp_path / handoff.HANDOFF).is_file()
    again = _h2d_run()
    handoff.attach(tmp_path, {"host": "elsewhere"}, again)   # kept: a later report quotes the same rate
    assert again["handoff"] == s["handoff"] and calls == [77e6]
    (tmp_path / handoff.HANDOFF).unlink()
    elsewhere = _h2d_run()
    handoff.attach(tmp_path, {"host": "elsewhere"}, elsewhere)   # another machine: not measured, and said so
    assert "handoff" not in elsewhere and calls == [77e6]
    assert "not measured" in whatif.predict("prefetch", elsewhere)["assumed"]


def test_the_cpu_matmul_peak_is_measured_once_after_the_run_never_beside_it(tmp_path, monkeypatch):
    """The MFU's CPU peak: measured by the report of an ended run on its own machine and kept; a report of the run
    while it still trains (a snapshot) would run its matmuls beside the training: it quotes no peak instead."""
    import os
    import socket

    from haiprof.analysis import efficiency
    from haiprof.collectors import matmul_peak

    calls = []
    monkeypatch.setattr(matmul_peak, "measure", lambda dtype, threads: calls.append(dtype) or {"dtype": dtype,
                                                                                               "flops": 1e11})
    here = {"host": socket.gethostname(), "cpu_model": handoff_probe_cpu_model(), "torch_threads": 2}
    assert efficiency._cpu_peak(tmp_path, {**here, "pid": os.getpid()}, "fp32") is None and calls == []
    assert efficiency._cpu_peak(tmp_path, {**here, "exit_code": 0}, "fp32")["flops"] == 1e11 and calls == ["fp32"]
    assert efficiency._cpu_peak(tmp_path, {"host": "elsewhere"}, "fp32")["flops"] == 1e11 and calls == ["fp32"]


def handoff_probe_cpu_model() -> str:
    from haiprof.collectors.matmul_peak import cpu_model
    return cpu_model()


def test_cpu_amp_and_compile_are_bounded_by_the_compute_headroom_the_mfu_shows():
    bf16 = {**CPU, "conditions": {"cpu_bf16": True}}
    free = whatif.predict("amp", bf16)   # matmuls 64% of the step, 2x faster: 32%
    assert free["gain_share"] == pytest.approx(0.32) and "MFU" not in free["assumed"]
    # the matmuls' arithmetic at the measured fp32 peak is 10% of the step: bf16 shortens that, not the rest
    low_mfu = whatif.predict("amp", {**bf16, "efficiency": {"mfu": 0.10}})
    assert low_mfu["gain_share"] == pytest.approx(0.05) and "MFU 10%" in low_mfu["assumed"]
    fused = {**CPU, "launch": {"cpu": {**CPU["launch"]["cpu"], "tiny_share": 0.5}}}
    assert whatif.predict("compile", fused)["gain_share"] == pytest.approx(0.2)   # half of 40% tiny ops
    # 90% of the step is matmul arithmetic at the peak: fusion acts on the other 10% at most
    busy = whatif.predict("compile", {**fused, "efficiency": {"mfu": 0.9}})
    assert busy["gain_share"] == pytest.approx(0.05) and busy["high_share"] == pytest.approx(0.1)
    assert "which fusion cannot remove" in busy["assumed"]


def test_a_prediction_whose_ends_round_to_one_figure_says_no_range():
    """A latency-bound loader's prefetch (nothing it assumes is given a spread) printed "range 89-89%"."""
    one = {"gain_share": 0.891, "low_share": 0.8905, "high_share": 0.8912, "step_s": 0.1174, "assumed": "x"}
    assert whatif.range_text(one) == "no range: its assumptions give one figure"
    assert "(89% of the step, no range: its assumptions give one figure)" in whatif.quote(one)
    assert whatif.range_text({**one, "low_share": 0.25}) == "range 25-89%"
    assert whatif.range_text({**one, "low_share": -0.1}) == "range 10% slower to 89% faster"
