"""Who owns each instant of a timeline, over numpy columns, and how much of it each phase owns in many pieces at
once: step windows, the gaps in the device's work, power segments.

The owner of an instant is the partition's rule (analyzers/steps.py): the innermost interval covering it (the latest start),
ties broken by PRIORITY; no interval, "other". It does not depend on the window asked about, so one pass over
the sorted intervals serves every window: each instant finds the latest-started interval before it, and when
that one has already ended, climbs `up` pointers (each interval's nearest earlier interval that outlasts it)
until one still runs. Nesting is shallow in training loops (h2d inside forward, forward re-run inside
backward), so the climb takes a few vectorised rounds, whatever the run's length.

Pieces are taken BLOCK at a time: the temporaries are a block's, a million-step run is never a million-row
Python list. Pure functions: arrays in, arrays out.
"""
from __future__ import annotations

import numpy as np

from haiprof.rundir.vocabulary import ALL_PHASES, PHASES

# The phases' priority (the owner rule's tie-break), for every module that partitions time
PRIORITY = {"allreduce": 6, "h2d": 5, "dataloader": 4, "optimizer": 3, "backward": 2, "forward": 1}
K = len(PHASES)           # phase codes 0..K-1 (step_columns.CODE); column K is "other" (nothing ran)
RANK = np.array([PRIORITY[p] for p in PHASES], dtype=np.int8)   # a phase code's priority
BLOCK = 1 << 16           # pieces a block
_I64_MIN = np.iinfo(np.int64).min


def sort_intervals(phase, start, end) -> tuple:
    """(phase, start, end) ordered by start, then priority (the owner rule's order: Intervals takes them as
    they are, no copy). Records are written as intervals end, so a run's are nearly in order:
    the sort is skipped when they already are."""
    if is_sorted(phase, start):
        return phase, start, end
    # a stable sort by start merges sorted runs (a host and a device list put together) in linear time; the
    # priorities of equal starts are sorted by lexsort only where that left them out of order
    order = np.argsort(start, kind="stable")
    if not is_sorted(phase[order], start[order]):
        order = np.lexsort((RANK[phase], start))
    return phase[order], start[order], end[order]


def is_sorted(phase, start) -> bool:
    if len(start) < 2:
        return True
    if (start[1:] < start[:-1]).any():   # comparisons, not np.diff: no int64 copy of a long run's starts
        return False
    tie = np.flatnonzero(start[1:] == start[:-1])
    return not len(tie) or bool((RANK[phase[tie]] <= RANK[phase[tie + 1]]).all())


def sorted_unique(x: np.ndarray) -> np.ndarray:
    """np.unique by sorting: numpy 2's hash-based unique is ~25x slower on a few hundred thousand int64."""
    x = np.sort(x)
    return x[np.r_[True, x[1:] != x[:-1]]] if len(x) else x


class Intervals:
    """Phase intervals sorted by (start, priority), with the running maximum of their ends and `up`. Arrays
    already in that order (a step_columns.Split's) are taken as they are, not copied."""

    def __init__(self, phase, start, end):
        phase = np.asarray(phase, dtype=np.int8)
        start, end = np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
        keep = end >= start
        if not keep.all():
            phase, start, end = phase[keep], start[keep], end[keep]
        del keep
        self.phase, self.start, self.end = sort_intervals(phase, start, end)
        self.max_end = np.maximum.accumulate(self.end) if len(self.end) else self.end
        self.up = _outlasting(self.end, self.max_end)

    def __len__(self) -> int:
        return len(self.start)

    def union_gaps(self, after: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) of the gaps between the union of the intervals, with an open gap before the first and
        after the last (int64 extremes): where none of them runs. `after`: only the instants from then on
        matter (the open gap ends at the last interval starting by then): a run's end, not its millions of gaps."""
        big = np.iinfo(np.int64).max
        if not len(self):
            return np.array([_I64_MIN]), np.array([big])
        j = 0 if after is None else max(0, int(np.searchsorted(self.start, after, side="right")) - 1)
        starts = self.start[j + 1:]
        before = self.max_end[j:-1]     # the running maximum: intervals before j that outlast it count
        gap = starts > before
        return (np.concatenate([[_I64_MIN], before[gap], self.max_end[-1:]]),
                np.concatenate([self.start[j:j + 1], starts[gap], [big]]))


def _outlasting(end: np.ndarray, max_end: np.ndarray) -> np.ndarray:
    """up[j]: the latest interval before j (in sort order) that ends after j does, -1 if none: the one that
    covers the instants right after j ends. Pointer jumping: ptr[j] skips only intervals ending no later than
    j, so following a candidate's ptr never skips the answer."""
    n = len(end)
    index = np.int32 if n < 2 ** 31 else np.int64    # 4 bytes an interval: a long run has tens of millions
    up = np.full(n, -1, dtype=index)
    if n < 2:
        return up
    todo = np.flatnonzero(max_end[:-1] > end[1:]) + 1   # something earlier outlasts j: find the latest such
    ptr = np.full(n, -1, dtype=index)
    ptr[todo] = todo - 1
    while len(todo):
        cand = ptr[todo]
        hit = end[cand] > end[todo]
        up[todo[hit]] = cand[hit]
        ptr[todo[hit]] = cand[hit]
        rest, cand = todo[~hit], cand[~hit]
        ptr[rest] = ptr[cand]                    # everything in (ptr[cand], cand] ends by end[cand] <= end[rest]
        todo = rest
    return up


def owner_at(iv: Intervals, t: np.ndarray) -> np.ndarray:
    """The phase code owning each instant t (K: no interval runs)."""
    return _climb(iv, np.searchsorted(iv.start, t, side="right") - 1, t)


def _climb(iv: Intervals, j: np.ndarray, t: np.ndarray) -> np.ndarray:
    """owner_at from j[i], the latest interval started at or before t[i] (-1: none; j is overwritten): where that
    one has already ended, climb its `up` pointers until one still runs."""
    if not len(iv):
        return np.full(len(t), K, dtype=np.int64)
    todo = np.flatnonzero((iv.end[np.maximum(j, 0)] <= t) & (j >= 0))
    while len(todo):
        j[todo] = iv.up[j[todo]]
        todo = todo[j[todo] >= 0]
        todo = todo[iv.end[j[todo]] <= t[todo]]
    return np.where(j >= 0, iv.phase[np.maximum(j, 0)], K)


class Weight:
    """A piecewise-constant function of time (e.g. watts summed over power sources): value[i] on
    [times[i], times[i + 1]), 0 outside. From (t0, t1, value) segments, overlapping ones added."""

    def __init__(self, t0, t1, value):
        t0, t1 = np.asarray(t0, dtype=np.int64), np.asarray(t1, dtype=np.int64)
        value = np.asarray(value, dtype=np.float64)
        ok = t1 > t0
        times = np.concatenate([t0[ok], t1[ok]])
        delta = np.concatenate([value[ok], -value[ok]])
        order = np.argsort(times, kind="stable")
        times, level = times[order], np.cumsum(delta[order])
        last = np.r_[times[1:] != times[:-1], True] if len(times) else np.zeros(0, dtype=bool)
        self.times, self.value = times[last], level[last]   # the level after every change at that time

    def at(self, t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(self.times, t, side="right") - 1
        return np.where(i >= 0, self.value[np.maximum(i, 0)], 0.0) if len(self.times) else np.zeros(len(t))


def owned(iv: Intervals, a, b, group=None, n_groups: int | None = None, weight: Weight | None = None) -> np.ndarray:
    """(n_groups, K + 1): per group, the time each phase owns in its pieces [a[i], b[i]) (sorted, not
    overlapping; piece i belongs to group[i], non-decreasing; default: each its own); the last column is time no
    interval covers. int64 ns; with a weight, float64 ns x weight."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    group = np.arange(len(a)) if group is None else np.asarray(group, dtype=np.int64)
    n_groups = len(a) if n_groups is None else n_groups
    out = np.zeros((n_groups, K + 1), dtype=np.int64 if weight is None else np.float64)
    for i0 in range(0, len(a), BLOCK):
        i1 = min(len(a), i0 + BLOCK)
        _owned_block(iv, a[i0:i1], b[i0:i1], group[i0:i1], weight, out)
    return out


def _owned_block(iv: Intervals, a, b, group, weight, out) -> None:
    t0, t1 = int(a[0]), int(b[-1])
    lo = int(np.searchsorted(iv.max_end, t0, side="right"))   # before lo every interval ended by t0
    hi = int(np.searchsorted(iv.start, t1, side="left"))      # from hi on every interval starts at or after t1
    n, ns = len(a), hi - lo
    cuts = [a, b, iv.start[lo:hi], iv.end[lo:hi]]
    if weight is not None:
        w0, w1 = np.searchsorted(weight.times, [t0, t1])
        cuts.append(weight.times[w0:w1])
    cuts = np.concatenate(cuts)
    np.clip(cuts, t0, t1, out=cuts)
    # One stable sort of the four sorted (the ends nearly sorted) runs says what every cut is; counting gives
    # each elementary segment's piece and the latest interval started by its start, no search. Equal cuts make
    # empty segments, all but the last of them, which counts every equal cut.
    order = np.argsort(cuts, kind="stable")
    cuts = cuts[order]
    seg = np.flatnonzero(cuts[1:] > cuts[:-1])
    ended = np.cumsum((order >= n) & (order < 2 * n), dtype=np.int64)[seg]   # pieces ended by the segment
    began = np.cumsum(order < n, dtype=np.int64)[seg]                       # pieces begun
    started = np.cumsum((order >= 2 * n) & (order < 2 * n + ns), dtype=np.int64)[seg]   # intervals started
    del order
    inside = began > ended                    # not in a gap between pieces
    seg, piece = seg[inside], ended[inside]
    s = cuts[seg]
    length = (cuts[seg + 1] - s).astype(np.float64)
    if weight is not None:
        length *= weight.at(s)
    g = group[piece] - group[0]
    span = int(group[-1] - group[0]) + 1
    sums = np.bincount(g * (K + 1) + _climb(iv, started[inside] + (lo - 1), s), weights=length,
                       minlength=span * (K + 1))
    if weight is None:   # whole ns summed in float64: exact below 2^53 ns (104 days) a group
        sums = np.rint(sums).astype(np.int64)
    out[group[0]:group[0] + span] += sums.reshape(span, K + 1)


def cut_pieces(a, b, gap_a, gap_b) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The parts of windows [a[i], b[i]) (sorted, not overlapping) inside gaps [gap_a, gap_b) (sorted, not
    overlapping): (start, end, window) of each non-empty part, in time order."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    lo = np.searchsorted(gap_b, a, side="right")              # the first gap ending after the window starts
    hi = np.searchsorted(gap_a, b, side="left")               # gaps from hi on start at or after its end
    count = np.maximum(hi - lo, 0)
    window = np.repeat(np.arange(len(a)), count)
    first = np.repeat(lo - np.concatenate([[0], np.cumsum(count)[:-1]]), count) if len(a) else window
    k = first + np.arange(len(window))
    ps, pe = np.maximum(gap_a[k], a[window]), np.minimum(gap_b[k], b[window])
    keep = pe > ps
    return ps[keep], pe[keep], window[keep]


def device_partition(host: Intervals, gpu: Intervals, a, b, weight: Weight | None = None, gaps=None):
    """(busy, idle) per window [a[i], b[i]) (sorted, not overlapping), each (n, K + 1): busy, the device's own
    phase spans by the owner rule (the last column: no span ran); idle, the instants no device span ran split
    by the host phase then running (the last column: none)."""
    n = len(a)
    busy = owned(gpu, a, b, weight=weight)
    idle = np.zeros((n, K + 1), dtype=busy.dtype)
    ga, gb = gaps if gaps is not None else gpu.union_gaps()   # a caller asking window by window passes them
    for i0 in range(0, n, BLOCK):   # the idle pieces of a block of windows at a time: a block's temporaries
        i1 = min(n, i0 + BLOCK)
        ps, pe, window = cut_pieces(a[i0:i1], b[i0:i1], ga, gb)
        if len(ps):
            idle[i0:i1] += owned(host, ps, pe, window, i1 - i0, weight)
    return busy, idle
