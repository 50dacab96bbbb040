"""The flight recorder (--trace-on-anomaly): the detector that predicts where the next slow step is due, the
window it asks for (a real torch.profiler trace with Python functions), the explanation read back from that trace,
and the verdict that weighs stalls against the bound classes."""
import os

import pytest

from haiprof.analyzers import stall_trace, stall_verdict
from haiprof.collectors import anomaly
from haiprof.collectors.anomaly import AnomalyDetector

MS = 1_000_000


def _feed(det, slow: dict, n: int, base_ms: float = 10.0):
    """Steps 0..n-1 of base_ms, those in `slow` of their own ms; the asks, by step."""
    asks = {}
    for step in range(n):
        ask = det.observe(step, int(slow.get(step, base_ms) * MS))
        if ask is not None:
            asks[step] = ask
    return asks


def test_periodic_stall_window_is_placed_on_the_next_occurrence():
    # stalls every 20 steps and a one-off at 34: the period is learned at the third stall (60), the window put
    # so the stall due at 80 is the middle of its three recorded steps (opened after 78: 79, 80, 81)
    asks = _feed(AnomalyDetector(), {20: 120, 34: 160, 40: 120, 60: 120}, 70)
    assert list(asks) == [60]
    a = asks[60]
    assert (a.due, a.period, a.open_at, a.seen) == (80, 20, 78, 60)
    assert a.open_at + 1 <= a.due <= a.open_at + 3


def test_a_jittered_period_is_learned_and_a_multiple_is_not_asked_again():
    det = AnomalyDetector()
    asks = _feed(det, {20: 90, 41: 90, 61: 90, 101: 90, 121: 90}, 130)
    assert [(s, a.period, a.due) for s, a in asks.items()] == [(61, 20, 81)]   # 101-61 = 40: the same stall twice


def test_no_anomaly_no_window_and_noise_below_k_is_not_one():
    import random
    rnd = random.Random(0)
    det = AnomalyDetector(factor=3.0)
    assert not _feed(det, {i: 10 * rnd.uniform(0.5, 2.5) for i in range(5000)}, 5000)
    assert det.anomalies == 0


def test_tiny_steps_need_an_absolute_excess_too():
    # 0.1 ms steps that take 0.5 ms once in a while: 5x, but 0.4 ms is scheduler jitter, not a stall
    det = AnomalyDetector()
    assert not _feed(det, {i: 0.5 for i in range(10, 400, 20)}, 400, base_ms=0.1)


def test_a_slow_stretch_is_traced_at_once():
    asks = _feed(AnomalyDetector(), {i: 80 for i in range(30, 40)}, 45)
    assert list(asks) == [32]
    assert asks[32].due is None and asks[32].open_at == 33


def test_memory_is_bounded_and_the_cost_constant():
    det = AnomalyDetector()
    _feed(det, {i: 100 for i in range(50, 200_000, 7)}, 200_000)
    assert len(det._ring) == anomaly.RING and len(det._seen) == anomaly.ANOMALIES
    assert len(det._traced_periods) <= 1


# -- the window, on a real profiler ----------------------------------------------------------------------------
def _checkpoint(path):
    with open(path, "wb") as f:
        f.write(os.urandom(1 << 20))
        f.flush()
        os.fsync(f.fileno())


def test_trace_requests_trace_the_due_stall_with_python_functions(tmp_path):
    """A loop whose step clock says: a stall every 20 steps. The window lands on the due step and its trace
    holds what that step really did (the checkpoint function, its fsync)."""
    import torch
    from haiprof.collectors.trace_requests import TraceRequests
    from haiprof.collectors.trace_window import TraceWindow
    from haiprof.rundir.vocabulary import ANOMALY_MARK, WINDOW_MARK

    status, records = [], []
    clock = [0]
    first = TraceWindow(tmp_path, records.append, lambda *a: status.append(a), warmup_steps=2, active_steps=3)
    asked = TraceRequests(tmp_path, records.append, lambda *a: status.append(a), first,
                          anomaly=AnomalyDetector(), anomaly_windows=2, step_clock=lambda: clock[0])
    x = torch.randn(32, 32)
    for n in range(1, 100):
        step = n - 1   # the step now ending (0-based)
        x = torch.tanh(x @ x)
        stall = step % 20 == 0 and step > 0
        if stall:
            _checkpoint(tmp_path / "ckpt.bin")
        clock[0] += (150 if stall else 10) * MS
        asked.on_step(n)
    first.close()
    asked.close()
    marks = [r for r in records if r[0] == ANOMALY_MARK]
    assert len(marks) == 1
    _, _, _, opened, steps, due, period, seen = marks[0]
    assert (due, period, seen, opened, steps) == (80, 20, 60, 78, 3)
    assert [r[3] for r in records if r[0] == WINDOW_MARK] == [78]
    assert (tmp_path / "trace-step78.json.gz").is_file()
    last = {name: reason for name, ok, reason in status}
    assert "1 window(s) traced" in last["anomaly"]
    from haiprof.analysis.windows import _read_events
    x = stall_trace.explain(_read_events(tmp_path / "trace-step78.json.gz"), ())
    # the recorded steps are 79, 80, 81: the checkpoint ran in step 80's span, the second recorded step
    assert x["step_in_window"] == 1
    assert x["culprit"] and x["culprit"].endswith("_checkpoint"), x
    assert x["ms"]["io"] > 0 and any(t["name"] == "fsync" for t in x["top"]), x


def test_budget_zero_windows_asks_for_none(tmp_path):
    from haiprof.collectors.trace_requests import TraceRequests
    from haiprof.collectors.trace_window import TraceWindow
    records = []
    clock = [0]
    first = TraceWindow(tmp_path, records.append, lambda *a: None, warmup_steps=2, active_steps=0)
    asked = TraceRequests(tmp_path, records.append, lambda *a: None, first, anomaly=AnomalyDetector(),
                          anomaly_windows=0, step_clock=lambda: clock[0])
    for n in range(1, 100):
        clock[0] += (150 if (n - 1) % 20 == 0 else 10) * MS
        asked.on_step(n)
    asked.close()
    assert not [r for r in records if r[0] != "@trace-begin" and r[0] != "@trace-end"]


# -- the explanation, table-driven ---------------------------------------------------------------------------
def _ev(name, ts, dur, cat="python_function", tid=1):
    return {"ph": "X", "name": name, "ts": ts, "dur": dur, "cat": cat, "tid": tid, "pid": 1}


def test_explain_splits_the_slowest_step_by_self_time():
    events = [
        _ev("ProfilerStep#1", 0, 10_000, "user_annotation"),
        _ev("aten::mm", 1_000, 5_000, "cpu_op"),
        _ev("aten::addmm", 1_500, 3_000, "cpu_op"),      # inside the mm: counted once, as the outer op
        _ev("ProfilerStep#2", 10_000, 100_000, "user_annotation"),
        _ev("aten::mm", 11_000, 5_000, "cpu_op"),
        _ev("train.py(20): save_checkpoint", 20_000, 80_000),
        _ev("<built-in function fsync>", 30_000, 50_000),
        _ev("<built-in method write of _io.BufferedWriter object at 0x7f>", 81_000, 10_000),
        _ev("<built-in function sleep>", 95_000, 4_000, tid=2),   # another thread: not this step's
        _ev("/opt/haiprof/collectors/phases.py(3): wrapper", 16_000, 1_000),
        _ev("ProfilerStep#3", 110_000, 10_000, "user_annotation"),
    ]
    x = stall_trace.explain(events, ("/opt/haiprof/",), median_step_ms=10.0)
    assert x["step_in_window"] == 1 and x["step_ms"] == 100.0
    assert x["ms"]["io"] == 60.0 and x["ms"]["ops"] == 5.0 and x["ms"]["wait"] == 0.0
    assert x["ms"]["python"] == pytest.approx(21.0)   # save_checkpoint's own 20 ms + haiprof's wrapper 1 ms
    assert x["culprit"] == "train.py(20): save_checkpoint" and x["culprit_ms"] == 80.0
    assert "file I/O 60 ms (fsync 50 ms, write 10 ms)" in x["sentence"]
    assert "against a 10 ms median step" in x["sentence"]


def test_explain_without_steps_is_none():
    assert stall_trace.explain([_ev("aten::mm", 0, 5, "cpu_op")]) is None


# -- the verdict weighs the stall --------------------------------------------------------------------------------
def _stall(share, trace_ms=None, phase="other", own=None):
    ev = {"period_steps": 20, "period_s": None, "excess_by_phase_s": {phase: 0.1}, "profiler_own": own}
    if trace_ms:
        ev.update(trace_ms=trace_ms, trace="trace-step78.json.gz", trace_step=80,
                  trace_culprit="train.py(20): save_checkpoint")
    return {"kind": "periodic-stall", "severity": "high", "share": share, "message": "a stall every 20 steps",
            "evidence": ev, "fixes": []}


def _compute(share):
    return {"kind": "compute", "severity": "moderate", "share": share, "message": "compute",
            "evidence": {}, "fixes": ["amp", "compile"]}


def test_a_stall_that_outweighs_the_verdict_leads_with_its_trace():
    w = stall_verdict.weigh([_compute(0.4), _stall(0.55, {"io": 60.0, "ops": 5.0, "python": 20.0})], "compute",
                            0.0123)
    assert w["bottleneck"] == "io" and w["instead_of"] == "compute"
    assert w["headline"].startswith("I/O-bound (high): a stall every 20 steps took 55% of the 12.3 ms step "
                                    "(file I/O or waiting in train.py(20): save_checkpoint, traced at step 80")
    assert "can remove at most 6.8 ms of it (55%)" in w["headline"]
    assert w["action"]["kind"] == "periodic-stall" and w["action"]["fix"] is None
    from haiprof.analyzers.page_invariants import check
    summary = {"bottleneck": w["bottleneck"], "headline": w["headline"], "step_time_s": {"steady": 0.0123},
               "next_steps": [w["action"]], "findings": [], "phase_share": {}}
    assert check(summary) == []


def test_what_the_stall_did_sets_the_bound_class():
    assert stall_verdict.weigh([_stall(0.5, {"ops": 60.0, "io": 1.0})], "none", 0.01)["bottleneck"] == "compute"
    assert stall_verdict.weigh([_stall(0.5, phase="dataloader")], "none", 0.01)["bottleneck"] == "io"
    untraced = stall_verdict.weigh([_stall(0.5)], "none", 0.01)   # outside the phases, no trace: unknown
    assert untraced["bottleneck"] == "none" and untraced["headline"].startswith("Stalls (high)")


def test_a_smaller_stall_or_the_profilers_own_does_not_take_the_verdict():
    assert stall_verdict.weigh([_compute(0.9), _stall(0.2)], "compute", 0.01) is None
    assert stall_verdict.weigh([_stall(0.5, own="haiprof's phase writer")], "none", 0.01) is None
