"""The device-first partition (analyzers/device_timeline.py) on hand-built records: steps whose closing CUDA
event never resolved (the run ended first) still count in the step time, with an estimated end, not in shares."""
import pytest

from haiprof.analyzers import device_timeline as D

US = 1_000          # ns
MS = 1_000_000


def _step(k, t, wait_ms=4.0, gpu=("forward", "backward", "optimizer")):
    """One training step starting at host time t (ns): DataLoader wait, forward, backward, optimizer; the GPU
    runs each phase's span shortly after the host enqueued it. Returns (records, host end)."""
    r, h = [], t
    for phase, ms in (("dataloader", wait_ms), ("forward", 2.0), ("backward", 2.0), ("optimizer", 2.0)):
        r.append((phase, h, h + int(ms * MS)))
        h += int(ms * MS)
    dev = {"forward": (t + int(wait_ms * MS) + 100 * US, 2_900 * US), "backward": (None, 2_500 * US),
           "optimizer": (None, 1_000 * US)}
    cur = None
    for phase in ("forward", "backward", "optimizer"):
        start, dur = dev[phase]
        start = start if start is not None else cur
        if phase in gpu:
            r.append(("gpu:" + phase, start, start + dur))
        cur = start + dur
    r.append(("@step", h, h))
    return r, h


def _run(last_wait_ms=34.0, last_gpu=("forward",)):
    records, t = [], 0
    for k in range(6):
        rec, t = _step(k, t)
        records += rec
    rec, t = _step(6, t, wait_ms=last_wait_ms, gpu=last_gpu)   # its backward/optimizer spans never resolved
    return records + rec


def test_resolved_steps_tile_the_device_timeline():
    steps = D.device_steps(_run(last_gpu=("forward", "backward", "optimizer")))
    assert steps.index.tolist() == [1, 2, 3, 4, 5, 6] and not steps.estimated.any()
    assert (steps.end_ns[:-1] == steps.start_ns[1:]).all()
    assert steps.duration_ns[0] == 10 * MS
    assert steps.duration_ns[-1] == pytest.approx(40 * MS, abs=0.5 * MS)


def test_a_last_step_whose_events_never_resolved_is_estimated_not_dropped():
    steps = D.device_steps(_run())
    assert steps.index.tolist() == [1, 2, 3, 4, 5, 6]
    assert steps.estimated.tolist() == [False] * 5 + [True]
    # no earlier than the host's end of the step (it waited 34 ms for its batch), plus the usual device work
    # that was not recorded (backward + optimizer: 3.5 ms)
    host_end = max(t for name, t, _ in _run() if name == "@step")
    assert steps.end_ns[-1] == host_end + 3_500 * US
    assert steps.idle[-1, D.ALL_PHASES.index("dataloader")] >= 33 * MS
    steady = D.steady(steps, warmup=1)
    # in the step time, not in the shares
    assert 6 in steady.index.tolist() and 6 not in D.measured(steady).index.tolist()
    assert D.seconds_per_step(steady) == pytest.approx((4 * 10 * MS + int(steps.duration_ns[-1])) / 5 / 1e9)
    sh = D.shares(D.measured(steady), None)
    # each resolved step: the GPU idles 3.5 of its 10 ms while the host waits for the batch (the rest of the 4 ms
    # wait overlaps the previous step's optimizer span on the device)
    assert sh["steps"] == 4 and sh["phase_share"]["dataloader"] == pytest.approx(0.35)


def test_host_and_device_steady_steps_are_one_rule():
    """The same steps on the two clocks keep the same steady steps (step_columns.steady_rows): the device's rule
    was its own (steps after host step `warmup` by number, two untraced ones enough), so a run whose first step
    had device time lost its second one too, and two untraced steps made a statistic on the device only."""
    import numpy as np
    from haiprof.analyzers.step_columns import StepColumns
    from haiprof.analyzers.steps import steady_steps

    def both(durations, traced):
        n = len(durations)
        idx = np.arange(n)
        start = np.concatenate([[0], np.cumsum(durations)[:-1]]).astype(np.int64)
        end = start + np.asarray(durations, dtype=np.int64)
        host = StepColumns(idx, start, end, np.zeros((n, 7), np.int64), np.asarray(traced, bool))
        dev = D.DeviceSteps(idx, start, end, np.zeros((n, len(D.BUSY))), np.zeros((n, 7)), np.asarray(traced, bool),
                            np.zeros(n, bool))
        return steady_steps(host, 1).index.tolist(), D.steady(dev, 1).index.tolist()

    ms = 10**6
    h, d = both([30 * ms] + [10 * ms] * 7, [False] * 8)             # device time from step 0 on
    assert h == d == [1, 2, 3, 4, 5, 6, 7]
    h, d = both([10 * ms] * 6, [False, False, True, True, True, False])   # two untraced after warm-up
    assert h == d == [1, 2, 3, 4, 5]                                   # too few: the traced ones join them
    h, d = both([10 * ms] + [90 * ms] * 2 + [10 * ms] * 6, [False] * 9)   # a slow start after warm-up
    assert h == d == [3, 4, 5, 6, 7, 8]
