"""collectors/cuda_phases.py's bookkeeping on CPU: a fake event with torch.cuda.Event's interface (record, query,
elapsed_time, synchronize) on a fake device clock. The real thing runs in tests/test_gpu_phases.py on CUDA."""
import os
import threading

import pytest
import torch

from haiprof.collectors.cuda_phases import CudaPhaseTimer
from haiprof.collectors.phases import PhaseRecorder


class FakeDevice:
    """Work is 'done' up to `reached` ms; an event recorded at device time t completes once reached >= t."""

    def __init__(self):
        self.now_ms = 0.0      # device time of the next record
        self.reached = 0.0
        self.created = 0


class FakeEvent:
    def __init__(self, dev: FakeDevice):
        self.dev = dev
        self.t = None
        self.records = 0
        dev.created += 1

    def record(self):
        self.dev.now_ms += 1.0
        self.t = self.dev.now_ms
        self.records += 1

    def synchronize(self):
        self.dev.reached = max(self.dev.reached, self.t)

    def query(self):
        return self.t is not None and self.dev.reached >= self.t

    def elapsed_time(self, end):
        if not (self.query() and end.query()):
            raise RuntimeError("cudaErrorNotReady")
        return end.t - self.t


def _timer(dev, out):
    return CudaPhaseTimer(torch, out.append, clock=lambda: 1_000_000_000,
                          new_event=lambda: FakeEvent(dev), record=lambda ev: ev.record())


def test_pairs_resolve_in_issue_order_and_events_are_reused():
    dev, out = FakeDevice(), []
    timer = _timer(dev, out)
    created_at_install = dev.created
    for step in range(50):
        for phase in ("h2d", "forward", "backward", "optimizer"):
            timer.end(phase, timer.begin())
        if step % 10 == 9:              # the flush thread's rhythm: a batch at a time
            dev.reached = dev.now_ms
            timer.resolve()
    assert [r[0] for r in out[:4]] == ["gpu:h2d", "gpu:forward", "gpu:backward", "gpu:optimizer"]
    assert len(out) == 200
    starts = [r[1] for r in out]
    assert starts == sorted(starts) and all(e > s for _, s, e in out)
    assert out[0][1] == 1_000_000_000 + 1_000_000      # 1 ms after the reference event, on the host clock
    # 10 steps x 4 pairs x 2 events in flight at most: created once, then recycled.
    assert dev.created - created_at_install == 80 == timer.created


def test_resolve_stops_at_the_first_unfinished_pair_and_never_waits():
    dev, out = FakeDevice(), []
    timer = _timer(dev, out)
    for _ in range(3):
        timer.end("forward", timer.begin())
    dev.reached = dev.now_ms - 2      # the GPU is inside the third pair
    timer.resolve()
    assert len(out) == 2
    dev.reached = dev.now_ms
    timer.resolve()
    assert len(out) == 3


def test_a_gpu_far_behind_drops_the_oldest_pairs():
    dev, out = FakeDevice(), []
    timer = _timer(dev, out)
    timer.MAX_PENDING = 5
    for _ in range(8):
        timer.end("forward", timer.begin())
    dev.reached = dev.now_ms
    timer.resolve()
    assert len(out) == 5 and timer.dropped == 3


def test_resolving_from_another_thread_while_the_hooks_record():
    dev, out = FakeDevice(), []
    timer = _timer(dev, out)
    stop = threading.Event()

    def flusher():
        while not stop.is_set():
            dev.reached = dev.now_ms - 1
            timer.resolve()

    t = threading.Thread(target=flusher, name="haiprof-test-flush")
    t.start()
    try:
        for _ in range(3000):
            timer.end("forward", timer.begin())
    finally:
        stop.set()
        t.join()
    dev.reached = dev.now_ms
    timer.resolve()
    assert len(out) == 3000 and timer.dropped == 0
    starts = [r[1] for r in out]
    assert starts == sorted(starts)


class _CountingTimer:
    """A CudaEventTimer stand-in that records each resolve() as on_resolve() (what the recorder must not do on
    the training thread)."""
    def __init__(self, on_resolve):
        self.on_resolve = on_resolve

    def begin(self):
        return None

    def resolve(self):
        self.on_resolve()


def test_the_recorder_resolves_off_the_step_when_a_flush_thread_drives_it():
    recorded = []
    rec = PhaseRecorder(recorded.append)
    calls = []
    rec.cuda_timer = _CountingTimer(lambda: calls.append(threading.get_ident()))
    rec.steps = 0
    hooks = []
    rec.drain_from(hooks)
    assert rec.resolve_every == 0 and hooks == [rec.drain]
    opt = object()
    for _ in range(200):
        rec._opt_pre(opt, (), {})
        rec._opt_post(opt, (), {})
    assert calls == []                 # nothing on the training thread's steps
    hooks[0]()
    assert len(calls) == 1


def test_without_a_flush_thread_the_recorder_resolves_in_batches():
    rec = PhaseRecorder([].append)
    calls = []
    rec.cuda_timer = _CountingTimer(lambda: calls.append(rec.steps))
    opt = object()
    for _ in range(200):
        rec._opt_pre(opt, (), {})
        rec._opt_post(opt, (), {})
    assert calls == [64, 128, 192]


def test_a_forked_child_never_resolves():
    rec = PhaseRecorder([].append)
    calls = []
    rec.cuda_timer = _CountingTimer(lambda: calls.append(1))
    rec._owner_pid = os.getpid() + 1
    rec.drain()
    assert calls == []


@pytest.mark.parametrize("call", [
    lambda t: t.to(torch.float64), lambda t: t.to("cpu"), lambda t: t.to(dtype=torch.float16),
    lambda t: t.to(torch.zeros(1)), lambda t: t.to(device="cpu", dtype=torch.float64), lambda t: t.to(),
    lambda t: t.to(torch.device("cpu"), non_blocking=True),
])
def test_to_wrapper_passes_non_h2d_calls_through(call, monkeypatch):
    """The Tensor.to wrapper is installed only where CUDA exists; its fast path is exercised here on CPU."""
    records = []
    rec = PhaseRecorder(records.append)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    rec.install()
    try:
        x = torch.ones(2)
        y = call(x)
        assert torch.equal(y.double(), torch.ones(2, dtype=torch.float64))
        assert records == []
    finally:
        rec.uninstall()
    assert "install_h2d" not in getattr(torch.Tensor.to, "__qualname__", "")


@pytest.mark.parametrize("call", [
    lambda t: t.to("cuda"), lambda t: t.to(torch.device("cuda:0"), non_blocking=True),
    lambda t: t.to(device="cuda", dtype=torch.float16), lambda t: t.cuda(),
])
def test_to_wrapper_times_host_to_device_copies(call, monkeypatch):
    """On this CPU build the copy itself fails as it would without haiprof; the attempt is still an h2d span."""
    records = []
    rec = PhaseRecorder(records.append)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    rec.install()
    try:
        with pytest.raises((RuntimeError, AssertionError)):
            call(torch.ones(2))
    finally:
        rec.uninstall()
    assert [r[0] for r in records] == ["h2d"]


def test_at_the_end_the_last_pairs_are_waited_for_within_a_bound():
    import time
    dev, out = FakeDevice(), []
    timer = _timer(dev, out)
    for _ in range(3):
        timer.end("optimizer", timer.begin())
    # the GPU finishes the last step 50 ms after the script returned: recorded, not lost
    catch_up = threading.Timer(0.05, lambda: setattr(dev, "reached", dev.now_ms))
    catch_up.start()
    t0 = time.monotonic()
    timer.resolve_all(timeout_s=2.0)
    assert len(out) == 3 and time.monotonic() - t0 < 1.0
    # a wedged GPU: given up after the bound, nothing raised
    timer.end("optimizer", timer.begin())
    t0 = time.monotonic()
    timer.resolve_all(timeout_s=0.1)
    assert len(out) == 3 and 0.1 <= time.monotonic() - t0 < 1.0
    catch_up.join()


def test_uninstall_waits_for_the_gpu_but_a_fake_timer_without_resolve_all_is_resolved_once():
    rec = PhaseRecorder([].append)
    calls = []
    rec.cuda_timer = _CountingTimer(lambda: calls.append(1))
    rec.drain(wait_s=1.0)
    assert calls == [1]
