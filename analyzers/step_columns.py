"""The step partition of analyzers/steps.py over numpy columns: a million-step run is a few arrays, not millions
of tuples, dicts and objects.

Split: the records split into host and device intervals (phase code into PHASES, start, end), the marks (name ->
sorted times) and what the evaluation blocks need. StepColumns: the steps as arrays (index, start, end, ns per
phase, traced), the one form of steps every consumer takes.
"""
from __future__ import annotations

import bisect
import numpy as np

# the phases, their priority and the owner rule's sorting live with the rule (timeline_owner.py)
from .timeline_owner import (ALL_PHASES, PHASES, PRIORITY, Intervals, owned,  # noqa: F401
                             sort_intervals, sorted_unique)
from haiprof.rundir.vocabulary import (BACKWARD_MARK, EVAL, GPU_PREFIX, OPT_STEP_MARK, STEP_MARK,  # noqa: F401
                                       TRACE_BEGIN, TRACE_END)
# Forwards without autograd / in eval() mode (collectors/phases.py). EVAL_MIN_FORWARDS or more of them before a
# step's first training forward/backward are an evaluation pass between steps: that stretch, from the previous
# step's end (its DataLoader waits included) to the last of them, is "eval", outside every step. Fewer (a
# frozen teacher's forward in each step) are part of training and count as forward.
EVAL_MIN_FORWARDS = 2


# The steady steps: one definition for every clock (host steps, device steps) and every consumer
LEADING_SLOW = 3.0   # a leading step this many times the median is a slow start (compilation, CUDA-graph capture)
MIN_UNTRACED = 3     # the verdict's minimum (thresholds.MIN_STEPS): fewer untraced steps are no statistic


def steady_rows(duration_ns: np.ndarray, traced: np.ndarray, warmup: int) -> np.ndarray:
    """Row numbers of a run's steady steps, on any clock (the rows: the steps that clock measured, in order):
    after the first `warmup` of them (all when no more than one would remain), outside the tracing window
    (the traced ones too when fewer than MIN_UNTRACED others remain, which the summary flags), without the slow
    start of a torch.compile or CUDA-graph run (leading_slow)."""
    n = len(duration_ns)
    rows = np.arange(warmup, n) if n > warmup + 1 else np.arange(n)
    untraced = rows[~np.asarray(traced, dtype=bool)[rows]]
    rows = untraced if len(untraced) >= MIN_UNTRACED else rows
    return rows[leading_slow(np.asarray(duration_ns)[rows]):]


def leading_slow(durations, factor: float = LEADING_SLOW) -> int:
    """How many leading steps are a slow start (compilation, CUDA-graph capture): each longer than factor x the
    median step, at most half of the steps, none when fewer than 4 steps."""
    if len(durations) < 4:
        return 0
    d = np.asarray(durations)
    median = np.partition(d, len(d) // 2)[len(d) // 2]
    half = d[:len(d) // 2] > factor * median
    return int(half.argmin()) if not half.all() else len(half)


def trace_windows(marks: list) -> list[tuple[int, float]]:
    """(begin, end) of each tracing window; a window never closed (run killed inside it) runs to the end."""
    begins = sorted(t for name, t in marks if name == TRACE_BEGIN)
    ends = sorted(t for name, t in marks if name == TRACE_END)
    out = []
    for b in begins:   # the first end at or after the begin (a bisection: a run of days holds many windows)
        i = bisect.bisect_left(ends, b)
        out.append((b, ends[i] if i < len(ends) else float("inf")))
    return out


CODE = {p: i for i, p in enumerate(PHASES)}    # a phase's code: its column in StepColumns.phases
_EMPTY = np.zeros(0, dtype=np.int64)
_I64 = (-(2 ** 63), 2 ** 63 - 1)


class Split:
    """The phase records split into arrays. host/gpu: (phase code, start, end), each interval with end >= start; marks:
    name -> sorted times; evals/gpu_evals: (start, end) of the eval forwards sorted; train: sorted starts of the
    training forwards and backwards (eval_blocks)."""

    def __init__(self, host, gpu, marks, evals, gpu_evals, train):
        self.host, self.gpu, self.marks = host, gpu, marks
        self.evals, self.gpu_evals, self.train = evals, gpu_evals, train

    @property
    def has_gpu(self) -> bool:
        return len(self.gpu[0]) > 0

    def intervals(self, which: str):
        """timeline_owner.Intervals of "host" or "gpu", built once: several analyses ask (steps, device, energy)."""
        cache = self.__dict__.setdefault("_intervals", {})
        if which not in cache:
            cache[which] = Intervals(*(self.host if which == "host" else self.gpu))
        return cache[which]

    def mark_times(self, name: str) -> np.ndarray:
        return self.marks.get(name, _EMPTY)

    def eval_blocks(self, bounds) -> list[tuple[int, int]]:
        return eval_blocks_columns(self.evals, self.gpu_evals, self.train, np.asarray(bounds, dtype=np.int64))


def split_columns(names: list, code: np.ndarray, start: np.ndarray, end: np.ndarray, extra=()) -> Split:
    """Split from columns (names[code[i]], start[i], end[i]) and `extra` (name, start, end) tuples; the rules of
    the records split: eval forwards are training forwards for the partition (eval_blocks cuts the blocks
    out), marks are names starting with "@", "gpu:<phase>" is device time."""
    extra = [r for r in extra if _I64[0] <= r[1] <= _I64[1] and _I64[0] <= r[2] <= _I64[1]]
    if extra:
        names = list(names)
        index = {x: i for i, x in enumerate(names)}
        codes = [index.setdefault(n, len(index)) for n, _, _ in extra]
        names = list(index)
        code = np.concatenate([code.astype(np.int64), np.array(codes, dtype=np.int64)])
        start = np.concatenate([start, np.array([s for _, s, _ in extra], dtype=np.int64)])
        end = np.concatenate([end, np.array([e for _, _, e in extra], dtype=np.int64)])
    host_of = np.full(len(names) + 1, -1, dtype=np.int8)
    gpu_of = np.full(len(names) + 1, -1, dtype=np.int8)
    for i, n in enumerate(names):
        if n in PRIORITY or n == EVAL:
            host_of[i] = CODE["forward" if n == EVAL else n]
        elif n.startswith(GPU_PREFIX) and not n.startswith("@"):
            p = n[len(GPU_PREFIX):]
            if p in PRIORITY or p == EVAL:
                gpu_of[i] = CODE["forward" if p == EVAL else p]
    ok = end >= start

    def intervals(of):
        ph = of[code]
        keep = (ph >= 0) & ok
        return sort_intervals(ph[keep], start[keep], end[keep])

    marks = {}
    for i, n in enumerate(names):
        if n.startswith("@"):
            marks[n] = _sorted(start[code == i])

    def pairs(name):
        i = names.index(name) if name in names else -1
        m = code == i
        order = np.lexsort((end[m], start[m]))
        return start[m][order], end[m][order]

    is_train = np.array([n in ("forward", "backward") for n in names] + [False])
    train = is_train[code]
    return Split(intervals(host_of), intervals(gpu_of), marks, pairs(EVAL), pairs(GPU_PREFIX + EVAL),
                 _sorted(start[train]))


def _sorted(a: np.ndarray) -> np.ndarray:
    a.sort()   # a fresh copy (a mask's selection) sorted in place: no second copy of a million times
    return a


def split_of_records(records) -> Split:
    """Split from (name, start, end, ...) records (lists of a test, phases.jsonl of an older run)."""
    index: dict = {}
    codes, starts, ends = [], [], []
    for r in records:
        codes.append(index.setdefault(r[0], len(index)))
        starts.append(r[1])
        ends.append(r[2])
    return split_columns(list(index), np.array(codes, dtype=np.int64), np.array(starts, dtype=np.int64),
                         np.array(ends, dtype=np.int64))


def eval_blocks_columns(evals, gpu_evals, train, bounds) -> list[tuple[int, int]]:
    """The evaluation blocks between step boundaries (EVAL_MIN_FORWARDS or more eval forwards before the first
    training forward/backward); only the gaps between boundaries that hold an eval forward are looked at."""
    ev_s, ev_e = evals
    if len(ev_s) < EVAL_MIN_FORWARDS:
        return []
    g_s, g_e = gpu_evals
    nb = len(bounds)
    gaps = sorted_unique(np.concatenate([np.searchsorted(bounds, ev_s, "left"), np.searchsorted(bounds, ev_s, "right")]))
    out = []
    for g in gaps.tolist():   # gap g: (bounds[g-1], bounds[g]), open at either end of the run
        a = int(bounds[g - 1]) if g > 0 else None
        b = int(bounds[g]) if g < nb else None
        lo = a if a is not None else -np.inf
        hi = b if b is not None else np.inf
        i = np.searchsorted(train, lo, "left") if a is not None else 0
        first_train = int(train[i]) if i < len(train) and train[i] < hi else hi
        j = np.searchsorted(ev_s, lo, "left") if a is not None else 0
        k = np.searchsorted(ev_s, first_train, "right") if first_train != np.inf else len(ev_s)
        sel = ev_e[j:k] <= first_train
        if int(sel.sum()) < EVAL_MIN_FORWARDS:
            continue
        in_s, in_e = ev_s[j:k][sel], ev_e[j:k][sel]
        start, end = (a if a is not None else int(in_s[0])), int(in_e[-1])
        g0, g1 = np.searchsorted(g_s, start, "left"), np.searchsorted(g_s, end, "right")
        end = max([end] + g_e[g0:g1].tolist())   # the device finishes later
        out.append((start, int(min(end, hi))))
    return out


def attribute_columns(phase, start, end, a, b) -> np.ndarray:
    """The partition of every window [a[i], b[i]) (ordered, not overlapping): an (n, len(ALL_PHASES)) array of
    ns, by timeline_owner (each instant's owner found once, vectorised; no sweep per window with nesting)."""
    return owned(Intervals(phase, start, end), a, b)


def step_windows(bounds: np.ndarray, first: int, blocks: list) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) of every step: between consecutive boundaries (the first from `first`), an evaluation block inside
    one cut off its start (evaluation between steps is no step's time), empty ones dropped."""
    edges = np.concatenate([[first], bounds]).astype(np.int64)
    a, b = edges[:-1].copy(), edges[1:]
    for bs, be in blocks:   # the one window with a < be < b
        w = int(np.searchsorted(b, be, side="right"))
        if w < len(b) and bs < b[w] and a[w] < be < b[w]:
            a[w] = max(a[w], be)
    keep = b > a
    return a[keep], b[keep]


def traced_mask(start: np.ndarray, end: np.ndarray, windows: list) -> np.ndarray:
    """Per step: whether it overlaps one of the tracing windows (begin, end)."""
    n = len(start)
    if not windows or not n:
        return np.zeros(n, dtype=bool)
    if (np.diff(start) < 0).any() or (np.diff(end) < 0).any():   # steps out of order: window by window
        out = np.zeros(n, dtype=bool)
        for wb, we in windows:
            out |= (end > wb) & (start < we)
        return out
    # steps in order: each window covers an index range (end past its begin .. start before its end)
    big = np.iinfo(np.int64).max   # a window never closed ends at inf: int64 keeps the ns exact (no float)
    lo = np.searchsorted(end, np.array([min(wb, big) for wb, _ in windows], dtype=np.int64), side="right")
    hi = np.searchsorted(start, np.array([min(we, big) for _, we in windows], dtype=np.int64), side="left")
    hi = np.maximum(hi, lo)
    edges = np.zeros(n + 1, dtype=np.int64)
    np.add.at(edges, lo, 1)
    np.add.at(edges, hi, -1)
    return np.cumsum(edges[:-1]) > 0


def _optimizer_steps_per_step(split: Split, bounds) -> int:
    """The median number of optimizer steps in a whole step (1 with one optimizer; 2 for a GAN's D and G): the
    step's own and the ones before it that did not end it."""
    inner = split.mark_times(OPT_STEP_MARK)
    if len(bounds) < 2 or not len(inner):
        return 1
    per = np.bincount(np.searchsorted(bounds, inner, side="left"), minlength=len(bounds) + 1)[1:len(bounds)]
    return 1 + int(np.median(per))


def build_step_columns(split: Split) -> tuple["StepColumns", dict]:
    """steps.build_steps over a Split."""
    steps_t, backs_t = split.mark_times(STEP_MARK), split.mark_times(BACKWARD_MARK)
    bounds, source = (steps_t, "optimizer.step") if len(steps_t) else \
        (backs_t, "backward") if len(backs_t) else (_EMPTY, "none")
    blocks = split.eval_blocks(bounds)
    # With GPU timings, compute phases are taken from the device timeline; waiting for data stays host time.
    if split.has_gpu:
        keep = ~np.isin(split.host[0], np.flatnonzero(np.bincount(split.gpu[0], minlength=len(PHASES))))
        phase, start, end = (np.concatenate([h[keep], g]) for h, g in zip(split.host, split.gpu))
    else:
        phase, start, end = split.host
    info = {"boundary": source, "timing": "cuda-events" if split.has_gpu else "host", "intervals": len(start),
            "eval_s": sum(e - s for s, e in blocks) / 1e9, "eval_passes": len(blocks)}
    if not len(bounds):
        return StepColumns.empty(), info
    if source == "optimizer.step":   # several optimizers in one iteration: a step is their cycle (optimizer_cycle)
        info["optimizer_steps_per_step"] = _optimizer_steps_per_step(split, bounds)
    before = start[start < bounds[0]]
    first = int(min(bounds[0], before.min())) if len(before) else int(bounds[0])
    a, b = step_windows(bounds, first, blocks)
    if split.has_gpu:
        phases = attribute_columns(phase, start, end, a, b)
    else:   # the host intervals as they are (sorted in the Split: no copy), not kept after this
        phases = owned(Intervals(*split.host), a, b)
    del phase, start, end
    marks = [(TRACE_BEGIN, t) for t in split.mark_times(TRACE_BEGIN).tolist()]
    marks += [(TRACE_END, t) for t in split.mark_times(TRACE_END).tolist()]
    traced = traced_mask(a, b, trace_windows(marks))
    return StepColumns(np.arange(len(a), dtype=np.int64), a, b, phases, traced), info


class StepColumns:
    """Steps as columns: index, start_ns, end_ns, traced (arrays of n) and phases (n x len(names) ns)."""

    def __init__(self, index, start_ns, end_ns, phases, traced, names=ALL_PHASES):
        self.index, self.start_ns, self.end_ns = index, start_ns, end_ns
        self.phases, self.traced, self.names = phases, traced, tuple(names)
        self.derived: dict = {}   # results computed from these steps (steady_steps), kept for the next caller

    @classmethod
    def empty(cls, names=ALL_PHASES) -> "StepColumns":
        return cls(_EMPTY, _EMPTY, _EMPTY, np.zeros((0, len(names)), dtype=np.int64), np.zeros(0, dtype=bool), names)

    @classmethod
    def of(cls, steps) -> "StepColumns":
        """Steps as columns: a StepColumns as it is; no steps (an empty list: RunData without any) as empty ones."""
        if isinstance(steps, StepColumns):
            return steps
        if len(steps):
            raise TypeError(f"steps are StepColumns, not {type(steps).__name__}")
        return cls.empty()

    @classmethod
    def build(cls, index, start_ns, end_ns, phases: dict | None = None, traced=None) -> "StepColumns":
        """Columns from per-step sequences: step numbers, start and end (ns), ns by phase name (ALL_PHASES
        first, then any other name; a phase not given is 0), traced (default none)."""
        i64 = np.int64
        index, start_ns, end_ns = (np.asarray(x, dtype=i64).reshape(-1) for x in (index, start_ns, end_ns))
        phases = phases or {}
        names = list(ALL_PHASES) + [p for p in phases if p not in ALL_PHASES]
        n = len(index)
        table = np.zeros((n, len(names)), dtype=i64)
        for p, v in phases.items():
            table[:, names.index(p)] = np.asarray(v, dtype=i64)
        traced = np.zeros(n, dtype=bool) if traced is None else np.asarray(traced, dtype=bool)
        return cls(index, start_ns, end_ns, table, traced, names)

    @property
    def duration_ns(self) -> np.ndarray:
        return self.end_ns - self.start_ns

    def phase(self, name: str) -> np.ndarray:
        return self.phases[:, self.names.index(name)] if name in self.names else np.zeros(len(self), np.int64)

    def arrays(self) -> dict:
        """{"index", "start_ns", "end_ns", "duration_ns", "traced", "phases": {phase: ns}}: one entry per step."""
        return {"index": self.index, "start_ns": self.start_ns, "end_ns": self.end_ns,
                "duration_ns": self.duration_ns, "traced": self.traced,
                "phases": {p: self.phases[:, j] for j, p in enumerate(self.names)}}

    def take(self, which) -> "StepColumns":
        """The steps a mask, slice or index array selects, as columns."""
        return StepColumns(self.index[which], self.start_ns[which], self.end_ns[which], self.phases[which],
                           self.traced[which], self.names)

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: slice) -> "StepColumns":
        if not isinstance(i, slice):   # one step is a row of the columns, never an object of its own
            raise TypeError("StepColumns take a slice (or take() a mask); a step's fields are its row of each column")
        return self.take(i)

    def __repr__(self) -> str:
        return f"StepColumns({len(self)} steps)"
