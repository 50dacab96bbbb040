"""analyzers/timeline_owner.py against the window-by-window definitions it replaces: the reference attribute (tests/partition_reference.py) for every
window, the device partition (busy: the device spans' owner; idle: the host's owner in the gaps between device
spans) and the energy split per step (attribute over each power segment), on random intervals with nesting,
partial overlaps, ties, zero lengths, windows over interval edges and blocks cut between pieces."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from haiprof.analyzers import energy
from haiprof.analyzers import timeline_owner as O
from haiprof.analyzers.steps import ALL_PHASES, CODE, PHASES
from partition_reference import attribute
from step_rows import step_columns

intervals = st.lists(st.tuples(st.sampled_from(PHASES), st.integers(0, 80), st.integers(0, 40)), max_size=30) \
    .map(lambda raw: [(p, s, s + d) for p, s, d in raw])
edges = st.lists(st.integers(0, 130), min_size=2, max_size=14, unique=True).map(sorted)


def _iv(ivs) -> O.Intervals:
    return O.Intervals([CODE[p] for p, _, _ in ivs], [s for _, s, _ in ivs], [e for _, _, e in ivs])


def _row(d: dict) -> list:
    return [d[p] for p in ALL_PHASES]


def _reference_partition(gpu, host, a, b):
    """The device partition one window at a time (device_timeline before columns)."""
    g = [iv for iv in gpu if iv[2] > a and iv[1] < b]
    busy = attribute(g, a, b)
    idle = dict.fromkeys(ALL_PHASES, 0)
    cur = a
    for s, e in sorted((max(s, a), min(e, b)) for _, s, e in g) + [(b, b)]:
        if s > cur:
            for p, ns in attribute(host, cur, s).items():
                idle[p] += ns
        cur = max(cur, e)
    return busy, idle


@settings(max_examples=300, deadline=None)
@given(ivs=intervals, cuts=edges)
def test_owned_is_attribute_in_every_window(ivs, cuts):
    a, b = np.array(cuts[:-1]), np.array(cuts[1:])
    got = O.owned(_iv(ivs), a, b)
    assert got.tolist() == [_row(attribute(ivs, int(x), int(y))) for x, y in zip(a, b)]


@settings(max_examples=200, deadline=None)
@given(ivs=intervals, cuts=edges)
def test_owned_across_blocks(ivs, cuts):
    whole = O.owned(_iv(ivs), np.array(cuts[:-1]), np.array(cuts[1:]))
    old, O.BLOCK = O.BLOCK, 2
    try:
        small = O.owned(_iv(ivs), np.array(cuts[:-1]), np.array(cuts[1:]))
    finally:
        O.BLOCK = old
    assert small.tolist() == whole.tolist()


@settings(max_examples=300, deadline=None)
@given(host=intervals, gpu=intervals, cuts=edges)
def test_device_partition_is_the_window_by_window_one(host, gpu, cuts):
    a, b = np.array(cuts[:-1]), np.array(cuts[1:])
    busy, idle = O.device_partition(_iv(host), _iv(gpu), a, b)
    for i, (x, y) in enumerate(zip(cuts, cuts[1:])):
        want_busy, want_idle = _reference_partition(gpu, host, x, y)
        assert busy[i, :-1].tolist() == [want_busy[p] for p in PHASES]
        assert idle[i].tolist() == _row(want_idle)
        assert busy[i, :-1].sum() + idle[i].sum() == y - x     # every instant once


def _reference_energy(steps, ivs, segments):
    out = []
    for start, end in zip(steps.start_ns.tolist(), steps.end_ns.tolist()):
        phases = dict.fromkeys(ALL_PHASES, 0.0)
        for a, b, watts in segments:
            a, b = max(a, start), min(b, end)
            if b > a:
                for p, ns in attribute(ivs, a, b).items():
                    phases[p] += watts * ns / 1e9
        out.append(_row(phases))
    return out


@settings(max_examples=200, deadline=None)
@given(ivs=intervals, cuts=edges,
       segs=st.lists(st.tuples(st.integers(0, 130), st.integers(1, 60), st.floats(0, 500)), max_size=8))
def test_energy_per_step_and_phase_is_power_over_the_owner_rule(ivs, cuts, segs):
    segments = [(s, s + d, w) for s, d, w in segs]
    steps = step_columns([(i, x, y) for i, (x, y) in enumerate(zip(cuts, cuts[1:]))])
    got = energy.integrate(steps, (_iv(ivs), None), segments)
    assert got["phases"] == pytest.approx(np.array(_reference_energy(steps, ivs, segments)).reshape(-1, 7), abs=1e-9)
    covered = [sum(max(0, min(b, e) - max(a, s)) for a, b, _ in segments)
               for s, e in zip(steps.start_ns.tolist(), steps.end_ns.tolist())]
    assert got["covered_ns"].tolist() == covered


def test_deep_nesting_climbs_to_the_covering_interval():
    """A stack 200 deep (each interval inside the previous): after the innermost ends, each instant belongs to
    the next one out; the climb resolves all of them in a few vectorised rounds."""
    depth = 200
    ivs = [(PHASES[k % 6], k, 1000 - k) for k in range(depth)]
    t = np.arange(0, 1000)
    got = O.owner_at(_iv(ivs), t)
    want = [CODE[PHASES[min(x, 999 - x, depth - 1) % 6]] for x in t.tolist()]
    assert got.tolist() == want


def test_the_owner_of_an_instant_does_not_depend_on_the_window():
    """backward [0, 100) with a forward re-run inside it [10, 50): the forward owns 10-50 whichever window asks
    (a window starting at 20 once gave it to backward, which had the higher priority once both were clipped)."""
    ivs = [("backward", 0, 100), ("forward", 10, 50)]
    assert attribute(ivs, 20, 60)["forward"] == 30 and attribute(ivs, 0, 60)["forward"] == 40
    got = O.owned(_iv(ivs), np.array([0, 20]), np.array([20, 60]))
    assert got[:, CODE["forward"]].tolist() == [10, 30]
