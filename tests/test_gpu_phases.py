"""GPU-side phase timing with CUDA events (collectors/cuda_phases.py): runs only where CUDA is present."""
import pytest

from conftest import SCRIPTS, load_summary, run_haiprof, teardown_cupti_probe, phase_records

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
    names = {r[0] for r in phase_records(out)}
    assert "gpu:forward" in names and "gpu:h2d" in names


def test_default_window_detaches_cupti_and_restores_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("TEARDOWN_CUPTI", raising=False)
    script = teardown_cupti_probe(tmp_path, SCRIPTS / "cuda_train.py")
    out = tmp_path / "r"
    r = run_haiprof("run", "--quiet", "--out", out, script)
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip().endswith("TEARDOWN False")
    from haiprof.rundir import RunDir
    reason = RunDir(out).read_status()["trace"]["reason"]
    assert "CUPTI detached" in reason


def test_event_pool_and_resolving_from_another_thread_on_real_cuda():
    import threading

    import torch
    from haiprof.collectors.cuda_phases import CudaPhaseTimer

    out = []
    x = torch.randn(256, 256, device="cuda")
    timer = CudaPhaseTimer(torch, out.append)
    stop = threading.Event()

    def flusher():
        while not stop.wait(0.01):
            timer.resolve()

    t = threading.Thread(target=flusher, name="haiprof-test-flush")
    t.start()
    try:
        for _ in range(500):
            for phase in ("forward", "optimizer"):
                ev = timer.begin()
                for _ in range(4):
                    x = torch.tanh(x @ x)
                timer.end(phase, ev)
    finally:
        stop.set()
        t.join()
    torch.cuda.synchronize()
    timer.resolve()
    assert len(out) == 1000 and timer.dropped == 0
    assert timer.created < 1000          # recycled, not two new events per phase
    for phase in ("gpu:forward", "gpu:optimizer"):
        spans = [(s, e) for p, s, e in out if p == phase]
        assert all(e >= s for s, e in spans)
        assert [s for s, _ in spans] == sorted(s for s, _ in spans)   # issue order per phase


def test_host_bound_gpu_steps_after_the_window_are_not_slower(tmp_path):
    """The after-effect on a GPU: launch-bound steps after the window vs before it (CUPTI detached)."""
    import json
    import statistics
    out = tmp_path / "r"
    # the window at step 20 (the default one, at step 2, leaves no steps before it to compare with)
    r = run_haiprof("run", "--quiet", "--trace-steps", "0", "--trace-at", "20", "--out", out,
                    SCRIPTS / "gpu_launch_steps.py")
    assert r.returncode == 0, r.stderr
    marks = phase_records(out)
    steps = sorted(m[1] for m in marks if m[0] == "@step")
    begin = next(m[1] for m in marks if m[0] == "@trace-begin")
    end = next(m[1] for m in marks if m[0] == "@trace-end")
    durs = [(a, b - a) for a, b in zip(steps, steps[1:])]
    before = [d for a, d in durs[2:] if a + d < begin]
    after = [d for a, d in durs if a > end][3:]
    assert len(before) >= 5 and len(after) >= 20
    assert statistics.median(after) <= 1.15 * statistics.median(before), (before, after)
