"""analyzers/thread_waits.py: tiny ops that wait on intra-op threads get the torch.set_num_threads advice with a
predicted gain; ops that merely vary in size, matmuls large enough to pay for the threads, and a run on one
thread do not. End to end: the bundled RL example of tiny matmuls, with two torch threads on one core, gets the
advice as a finding and an action; examples/compute_bound.py and examples/launch_bound.py do not."""
import os

import pytest

from conftest import EXAMPLES, load_summary, run_haiprof
from haiprof.analyzers import thread_waits

PEAK = 8e9   # FLOP/s, 2 threads


def _op(name, ts, dur, dims, tid=1):
    return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "tid": tid, "args": {"Input Dims": dims}}


def _trace(calls: list) -> list:
    """One ProfilerStep around calls [(name, dur µs, dims)], each an outer aten::linear with its addmm inside
    (addmm dims: bias, input, weight) or a bare op, back to back."""
    ev, t = [], 0.0
    for name, dur, dims in calls:
        if name == "aten::addmm":
            ev.append(_op("aten::linear", t, dur, [dims[1], [dims[2][1], dims[2][0]], dims[0]]))
            ev.append(_op("aten::addmm", t + 0.5, dur - 1, dims))
        else:
            ev.append(_op(name, t, dur, dims))
        t += dur
    return [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "ts": 0.0, "dur": t, "tid": 1}] + ev


TINY = [[128], [1, 128], [128, 128]]          # 32.8 kFLOP: 8 µs on one thread at 4 GFLOP/s
BIG = [[2048], [256, 1024], [1024, 2048]]    # 1.07 GFLOP: 270 ms on one thread


def test_tiny_matmuls_waiting_on_threads_get_the_advice_with_a_predicted_gain():
    calls = [("aten::addmm", 20.0, TINY)] * 90 + [("aten::addmm", 2000.0, TINY)] * 10 + [("aten::tanh", 5.0, [[1, 128]])] * 100
    f = thread_waits.analyze(_trace(calls), threads=2, peak_flops=PEAK, steady_s=0.03)
    total = 90 * 20 + 10 * 2000 + 100 * 5
    waiting = 10 * (2000 - 20) / total
    ev = f["evidence"]
    assert f["kind"] == "threads" and f["fixes"] == [] and ev["advised_threads"] == 1
    assert ev["waiting_share"] == pytest.approx(waiting) and ev["matmul_waiting_share"] == pytest.approx(waiting)
    assert "torch.set_num_threads(1)" in f["message"] and "OMP_NUM_THREADS=1" in ev["line"]
    p = ev["predicted"]
    cost = 100 * 2 * 128 * 128 * (1 / (PEAK / 2) - 1 / PEAK) / (total / 1e6)   # the matmuls on one thread
    assert p["gain_share"] == pytest.approx(waiting - cost) and p["low_share"] <= p["gain_share"] <= p["high_share"]
    assert p["step_after_s"] == pytest.approx(0.03 * (1 - p["gain_share"])) and p["text"].startswith("predicted:")


def test_the_console_names_an_advice_without_a_fix_id():
    """Led by the threads advice (no fix id), the console line names the advice, not "--fix None"."""
    from haiprof.render.console import verdict_lines
    calls = [("aten::addmm", 20.0, TINY)] * 90 + [("aten::addmm", 100.0, TINY)] * 10 + [("aten::tanh", 5.0, [[1, 128]])] * 100
    f = thread_waits.analyze(_trace(calls), threads=2, peak_flops=PEAK, steady_s=0.03)
    p = f["evidence"]["predicted"]
    lines = verdict_lines({"headline": "Launch-bound", "findings": [], "exit_code": 0, "bottleneck": "launch",
                           "next_steps": [{"fix": None, "kind": "threads", "title": "Use 1 torch thread(s)",
                                           "predicted": p}]}, "r.html")
    assert lines[1].startswith("haiprof:   Use 1 torch thread(s) predicted:") and "--fix" not in lines[1]


def test_ops_that_vary_in_size_are_not_mistaken_for_waiting():
    # an optimizer's per-parameter ops of many sizes: each shape always takes its own time
    calls = [("aten::add_", 3.0 * (i + 1) ** 2, [[64 * (i + 1)], [64 * (i + 1)]]) for i in range(30)] * 4
    calls += [("aten::addmm", 20.0, TINY)] * 20
    assert thread_waits.analyze(_trace(calls), threads=2, peak_flops=PEAK, steady_s=0.01) is None


def test_matmuls_large_enough_to_pay_for_the_threads_or_a_single_thread_get_no_advice():
    calls = [("aten::addmm", 40000.0, BIG)] * 9 + [("aten::addmm", 90000.0, BIG)] + [("aten::addmm", 2000.0, TINY)] * 10
    assert thread_waits.analyze(_trace(calls), threads=8, peak_flops=PEAK, steady_s=0.5) is None
    tiny = [("aten::addmm", 20.0, TINY)] * 90 + [("aten::addmm", 2000.0, TINY)] * 10
    assert thread_waits.analyze(_trace(tiny), threads=1, peak_flops=PEAK, steady_s=0.03) is None
    assert thread_waits.analyze(_trace(tiny), threads=2, peak_flops=None, steady_s=0.03) is None   # no peak


def _one_core():   # in the child before exec: two torch threads on one core, however busy the machine is
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


@pytest.fixture(scope="module")
def runs(tmp_path_factory, example_run):
    """The RL example with more torch threads (2) than the cores it may use (1): a container's CPU limit below
    torch's default, or a machine busy with other work, made certain; launch_bound.py, run once; compute_bound.py
    from the session's runs."""
    parent = tmp_path_factory.mktemp("threads")
    out = {}
    for name, args, kw in (("rl_tiny_matmuls.py", ["--episodes", "24"],
                            {"env": {"OMP_NUM_THREADS": "2"}, "preexec_fn": _one_core}),
                           ("launch_bound.py", [], {})):
        d = parent / name
        r = run_haiprof("run", "--out", d, EXAMPLES / name, *args, timeout=300, **kw)
        assert r.returncode == 0, r.stderr
        out[name] = load_summary(d)
        out[name]["_dir"] = d
    d, r = example_run("compute_bound.py")
    assert r.returncode == 0, r.stderr
    out["compute_bound.py"] = load_summary(d)
    return out


def _why_no_advice(s: dict) -> str:
    """What the advice needed, as this run had it: said when the finding is missing (a run on a loaded machine
    must say why, not only that)."""
    import json
    d = s["_dir"]
    eff = s.get("efficiency") or {}
    meta = json.loads((d / "meta.json").read_text())
    status = (d / "status.jsonl").read_text()[-1500:] if (d / "status.jsonl").exists() else None
    return (f"no threads finding: kinds {[f['kind'] for f in s['findings']]}, steps_measured "
            f"{s.get('steps_measured')}, steady {s['step_time_s'].get('steady')}, torch_threads "
            f"{meta.get('torch_threads')}, peak {eff.get('peak_flops')}, windows "
            f"{[(w.get('file'), w.get('flops_per_step')) for w in eff.get('windows') or []]}, trace_windows "
            f"{s.get('trace_windows')}, files {sorted(p.name for p in d.iterdir())}, status {status}")


def test_the_rl_example_is_advised_one_thread_and_the_others_are_not(runs):
    s = runs["rl_tiny_matmuls.py"]
    f = next((f for f in s["findings"] if f["kind"] == "threads"), None)
    assert f is not None, _why_no_advice(s)
    assert f["evidence"]["threads"] == 2 and f["evidence"]["advised_threads"] == 1
    assert f["evidence"]["predicted"]["gain_share"] > 0
    a = next(a for a in s["next_steps"] if a["kind"] == "threads")
    assert "torch.set_num_threads(1)" in a["title"] and a["fix"] is None and a["predicted"]["text"]
    for name in ("compute_bound.py", "launch_bound.py"):
        assert not [f for f in runs[name]["findings"] if f["kind"] == "threads"], name
        assert not [a for a in runs[name]["next_steps"] or [] if a["kind"] == "threads"], name
