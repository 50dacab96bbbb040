"""The device steps' alignment offset and their unresolved tail, vectorised (issue 28: a 10^6-step run whose spans
stopped matching the host's tens of thousands of steps before its end took minutes), against the per-offset scan
and the step-by-step partition they replace, on random runs with missing spans and long unresolved tails."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from haiprof.analyzers import device_timeline as D
from haiprof.analyzers.timeline_owner import K, device_partition

US, MS = 1_000, 1_000_000
PHASES = ("forward", "backward", "optimizer")


def _offset_scan(hs, gs):
    """The offset as it was found: every candidate from the largest down."""
    n_host, n_gpu = len(hs), len(gs)
    for o in range(max(0, n_host - n_gpu), -1, -1):
        m = min(n_gpu, n_host - o)
        if (gs[:m] >= hs[o:o + m] - D.ENQUEUE_SLACK_NS).all():
            return o
    return 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2_000_000), min_size=1, max_size=40),
       st.lists(st.integers(-100_000, 2_000_000), min_size=1, max_size=40))
def test_offset_is_the_scans(hs, gs):
    hs, gs = np.sort(np.array(hs, dtype=np.int64)), np.sort(np.array(gs, dtype=np.int64))
    assert D._offset(hs, gs) == _offset_scan(hs, gs)


def _tail_per_step(steps, ends, known, step_marks, host, gpu):
    """The unresolved tail one device_partition call per step (the code it replaces), as row tuples."""
    last = np.flatnonzero(known)
    resolved = steps.busy[~steps.traced, :K].sum(axis=1)
    if not len(last) or not len(resolved) or last[-1] == len(ends) - 1:
        return []
    usual = int(np.sort(resolved)[len(resolved) // 2])
    rows, a = [], int(ends[last[-1]])
    for k in range(int(last[-1]) + 1, len(step_marks)):
        mark = int(step_marks[k])
        i0, i1 = np.searchsorted(gpu.start, [a, mark], side="left")
        lower = max(a, mark, int(gpu.end[i0:i1].max()) if i1 > i0 else a)
        busy, idle = device_partition(host, gpu, np.array([a]), np.array([lower]))
        busy[0, K] = max(0, usual - int(busy[0, :K].sum()))
        rows.append((k, a, lower + int(busy[0, K]), busy[0].tolist(), idle[0].tolist()))
        a = lower + int(busy[0, K])
    return rows


@st.composite
def runs(draw):
    """Host steps with their gpu spans; some optimizer spans missing mid-run, the last steps' spans unresolved."""
    n = draw(st.integers(3, 30))
    unresolved = draw(st.integers(0, n - 1))
    missing = draw(st.sets(st.integers(0, n - 1), max_size=6))
    records, host_t, dev_t = [], 0, 0
    for k in range(n):
        wait = draw(st.integers(0, 20 * MS))
        records.append(("dataloader", host_t, host_t + wait))
        host_t += wait
        kept = draw(st.integers(0, 3)) if k >= n - unresolved else 3
        for j, phase in enumerate(PHASES):
            dispatch = draw(st.integers(50 * US, 3 * MS))
            records.append((phase, host_t, host_t + dispatch))
            start = max(host_t + draw(st.integers(0, 200 * US)), dev_t)
            dev_t = start + draw(st.integers(200 * US, 30 * MS))
            if j < kept and not (phase == "optimizer" and k in missing):
                records.append(("gpu:" + phase, start, dev_t))
            host_t += dispatch
        records.append(("@step", host_t, host_t))
        host_t += draw(st.integers(0, 2 * MS))
    return records


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_unresolved_tail_is_the_per_step_partition(run):
    seen = []
    tail = D._unresolved_tail

    def both(*args):
        out = tail(*args)
        seen.append(_tail_per_step(*args) == _rows(out))
        return out

    D._unresolved_tail = both
    try:
        D.device_steps(run)
    finally:
        D._unresolved_tail = tail
    assert all(seen)


def _rows(steps):
    """(index, start, end, busy by BUSY, idle by ALL_PHASES) of each step, from the columns (the estimated flag
    shows "unrecorded")."""
    return [(int(steps.index[i]), int(steps.start_ns[i]), int(steps.end_ns[i]), steps.busy[i].tolist(),
             steps.idle[i].tolist()) for i in range(len(steps))]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 300)), min_size=1, max_size=30), st.integers(-10, 1400))
def test_union_gaps_after_an_instant_are_the_runs_from_then_on(spans, after):
    from haiprof.analyzers.timeline_owner import Intervals
    iv = Intervals(np.zeros(len(spans)), [s for s, _ in spans], [s + d for s, d in spans])

    def from_after(gaps):
        return [(max(a, after), b) for a, b in zip(*(g.tolist() for g in gaps)) if b > after and b > a]
    assert from_after(iv.union_gaps(after=after)) == from_after(iv.union_gaps())
