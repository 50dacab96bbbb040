"""Property tests of the device step partition over random runs: the host running ahead of the GPU by a random
queue, the last steps' CUDA events never resolved, spans missing in the middle. A device step starts where the
previous one ended (never earlier), no duration is negative, and the steps tile the device timeline."""
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from haiprof.analyzers import device_timeline as D

US = 1_000
MS = 1_000_000
PHASES = ("forward", "backward", "optimizer")


@st.composite
def runs(draw):
    n = draw(st.integers(3, 24))
    unresolved = draw(st.integers(0, min(4, n - 1)))
    # the middle steps whose closing (optimizer) span is missing: an event pool exhausted, a dropped record
    missing = draw(st.sets(st.integers(0, n - unresolved - 1), max_size=3)) if n - unresolved > 0 else set()
    records, host_t, dev_t = [], 0, 0
    for k in range(n):
        wait = draw(st.integers(0, 40 * MS))
        records.append(("dataloader", host_t, host_t + wait))
        host_t += wait
        kept_in_tail = draw(st.integers(0, 3)) if k >= n - unresolved else 3
        for j, phase in enumerate(PHASES):
            dispatch = draw(st.integers(50 * US, 3 * MS))
            records.append((phase, host_t, host_t + dispatch))
            # the GPU starts a span once it is enqueued and the previous span is done; it may lag far behind
            start = max(host_t + draw(st.integers(0, 200 * US)), dev_t)
            dev_t = start + draw(st.integers(200 * US, 30 * MS))
            resolved = j < kept_in_tail and not (phase == "optimizer" and k in missing)
            if resolved:
                records.append(("gpu:" + phase, start, dev_t))
            host_t += dispatch
        records.append(("@step", host_t, host_t))
        host_t += draw(st.integers(0, 2 * MS))   # Python between steps
    return records, bool(missing)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_device_steps_never_overlap_and_tile(run):
    records, has_gaps = run
    steps = D.device_steps(records)
    assert steps.index.tolist() == sorted(set(steps.index.tolist()))
    dur = steps.duration_ns
    assert (dur >= 0).all(), (steps.index[dur < 0], dur[dur < 0], steps.estimated[dur < 0])
    assert (steps.busy.sum(axis=1) + steps.idle.sum(axis=1) == dur).all()
    assert (steps.busy >= 0).all() and (steps.idle >= 0).all()
    assert (steps.start_ns[1:] >= steps.end_ns[:-1]).all()
    consecutive = steps.index[1:] == steps.index[:-1] + 1
    assert (steps.start_ns[1:][consecutive] == steps.end_ns[:-1][consecutive]).all()
    if steps and not has_gaps:
        assert int(dur.sum()) == steps.end_ns[-1] - steps.start_ns[0]
