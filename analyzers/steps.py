"""Per-step phase breakdown from the raw phase intervals.

Each step is the wall-clock span between two step boundaries (optimizer steps; the end of each backward when a
script has no optimizer). Inside a step, every nanosecond goes to exactly one phase: the innermost interval that
covers it (h2d inside forward is h2d; a forward replayed inside backward is forward; an LBFGS closure's
forward/backward inside optimizer.step is forward/backward), ties broken by PRIORITY; the rest is "other".
This is the interval arithmetic of the PyTorch TensorBoard plugin's overall parser, with nesting respected.
"""
from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass, field

PHASES = ("dataloader", "h2d", "forward", "backward", "optimizer", "allreduce")
ALL_PHASES = PHASES + ("other",)
PRIORITY = {"allreduce": 6, "h2d": 5, "dataloader": 4, "optimizer": 3, "backward": 2, "forward": 1}
STEP_MARK = "@step"
BACKWARD_MARK = "@backward"
TRACE_BEGIN, TRACE_END = "@trace-begin", "@trace-end"   # op-level tracing window (profiler on)
GPU_PREFIX = "gpu:"
# Forwards without autograd / in eval() mode (collectors/phases.py). EVAL_MIN_FORWARDS or more of them before a
# step's first training forward/backward are an evaluation pass between steps: that stretch, from the previous
# step's end (its DataLoader waits included) to the last of them, is "eval", outside every step. Fewer (a
# frozen teacher's forward in each step) are part of training and count as forward.
EVAL = "eval"
EVAL_MIN_FORWARDS = 2


@dataclass
class Step:
    index: int
    start_ns: int
    end_ns: int
    phases_ns: dict = field(default_factory=dict)
    traced: bool = False      # overlaps the op-level tracing window: profiler overhead, kept out of statistics

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


def split_records(records) -> tuple[list, list, list]:
    """(host intervals, gpu intervals, marks) from raw (name, start, end) records."""
    host, gpu, marks = [], [], []
    prio = PRIORITY
    for name, s, e in records:
        if name in prio:      # most records: one dict lookup
            if e >= s:
                host.append((name, s, e))
            continue
        if name == EVAL or name == GPU_PREFIX + EVAL:   # eval between steps is cut out of the steps, the rest is
            name = name[:-len(EVAL)] + "forward"        # training forward (eval_blocks)
        if name.startswith("@"):
            marks.append((name, s))
        elif name.startswith(GPU_PREFIX):
            phase = name[len(GPU_PREFIX):]
            if phase in prio and e >= s:
                gpu.append((phase, s, e))
        elif name in prio and e >= s:
            host.append((name, s, e))
    return host, gpu, marks


def step_boundaries(marks: list) -> tuple[list[int], str]:
    steps = sorted(t for name, t in marks if name == STEP_MARK)
    if steps:
        return steps, "optimizer.step"
    backs = sorted(t for name, t in marks if name == BACKWARD_MARK)
    if backs:
        return backs, "backward"
    return [], "none"


def attribute(intervals: list, start: int, end: int) -> dict:
    """Nanoseconds per phase in [start, end): innermost covering interval wins, then PRIORITY; rest 'other'."""
    out = dict.fromkeys(ALL_PHASES, 0)
    clipped = [(p, max(s, start), min(e, end)) for p, s, e in intervals if e > start and s < end]
    if not clipped:
        out["other"] = end - start
        return out
    cuts = sorted({start, end, *(s for _, s, _ in clipped), *(e for _, _, e in clipped)})
    # Sweep the elementary segments; intervals per step are few, so the linear scan is cheap.
    clipped.sort(key=lambda iv: iv[1])
    active: list = []
    nxt = 0
    for a, b in zip(cuts, cuts[1:]):
        while nxt < len(clipped) and clipped[nxt][1] <= a:
            active.append(clipped[nxt])
            nxt += 1
        active = [iv for iv in active if iv[2] > a]
        if not active:
            out["other"] += b - a
            continue
        best = max(active, key=lambda iv: (iv[1], PRIORITY[iv[0]]))
        out[best[0]] += b - a
    return out


class IntervalIndex:
    """Intervals sorted by start, for attribute() over many windows: each window looks only at the intervals that
    can overlap it (start before its end; end after its start, found through the running maximum of the ends), so
    a run of N steps costs N log N, not N x (all intervals)."""

    def __init__(self, intervals: list):
        self._iv = sorted(intervals, key=lambda iv: iv[1])
        self._starts = [iv[1] for iv in self._iv]
        self._max_end, m = [], float("-inf")
        for iv in self._iv:
            m = max(m, iv[2])
            self._max_end.append(m)

    def overlapping(self, start: int, end: int) -> list:
        lo = bisect.bisect_right(self._max_end, start)     # before lo every interval ended by `start`
        hi = bisect.bisect_left(self._starts, end)          # from hi on every interval starts at or after `end`
        return [iv for iv in self._iv[lo:hi] if iv[2] > start]

    def attribute(self, start: int, end: int) -> dict:
        return attribute(self.overlapping(start, end), start, end)


def eval_blocks(records, bounds: list) -> list[tuple[int, int]]:
    """(start, end) of each evaluation pass: EVAL_MIN_FORWARDS or more eval forwards before the first training
    forward/backward after a step boundary (or before the first step, or after the last one). A block starts at
    the boundary (at its first eval forward before the first step) and ends with the device work of its last."""
    records = list(records)
    evals = sorted((s, e) for n, s, e in records if n == EVAL)
    if len(evals) < EVAL_MIN_FORWARDS:
        return []
    gpu_evals = sorted((s, e) for n, s, e in records if n == GPU_PREFIX + EVAL)
    gpu_starts = [s for s, _ in gpu_evals]
    train = sorted(s for n, s, e in records if n in ("forward", "backward"))
    eval_starts = [s for s, _ in evals]
    edges = [None, *bounds, None]
    out = []
    for a, b in zip(edges, edges[1:]):
        lo, hi = (a if a is not None else float("-inf")), (b if b is not None else float("inf"))
        i = bisect.bisect_left(train, lo)
        first_train = train[i] if i < len(train) and train[i] < hi else hi
        j, k = bisect.bisect_left(eval_starts, lo), bisect.bisect_right(eval_starts, first_train)
        inside = [(s, e) for s, e in evals[j:k] if e <= first_train]
        if len(inside) < EVAL_MIN_FORWARDS:
            continue
        start, end = (a if a is not None else inside[0][0]), inside[-1][1]
        g0, g1 = bisect.bisect_left(gpu_starts, start), bisect.bisect_right(gpu_starts, end)
        end = max([end] + [e for s, e in gpu_evals[g0:g1]])   # the device finishes later
        out.append((start, int(min(end, hi))))
    return out


def clip_eval(a: int, b: int, blocks: list) -> int:
    """The start of the window [a, b) once an evaluation block inside it is cut out."""
    for bs, be in blocks:
        if bs < b and a < be < b:
            a = max(a, be)
    return a


def build_steps(records, split: tuple | None = None) -> tuple[list[Step], dict]:
    """Steps with per-phase nanoseconds, and facts about how they were found; `split`: split_records(records)
    when the caller has it already (one pass over a long run's records, not one per analysis)."""
    records = records if isinstance(records, list) else list(records)
    host, gpu, marks = split if split is not None else split_records(records)
    bounds, source = step_boundaries(marks)
    blocks = eval_blocks(records, bounds)
    # With GPU timings, compute phases are taken from the device timeline; waiting for data stays host time.
    if gpu:
        gpu_phases = {p for p, _, _ in gpu}
        intervals = [iv for iv in host if iv[0] not in gpu_phases] + gpu
    else:
        intervals = host
    info = {"boundary": source, "timing": "cuda-events" if gpu else "host", "intervals": len(intervals),
            "eval_s": sum(e - s for s, e in blocks) / 1e9, "eval_passes": len(blocks)}
    if not bounds:
        return [], info
    first = min([bounds[0]] + [s for _, s, _ in intervals if s < bounds[0]])
    edges = [first] + bounds
    windows = []
    for a, b in zip(edges, edges[1:]):
        a = clip_eval(a, b, blocks)
        if b > a:
            windows.append((a, b))
    steps = [Step(i, a, b, phases) for i, ((a, b), phases) in enumerate(zip(windows, attribute_all(intervals,
                                                                                                    windows)))]
    mark_traced(steps, trace_windows(marks))
    return steps, info


def attribute_all(intervals: list, windows: list) -> list[dict]:
    """attribute() for every window [a, b) (ordered, not overlapping), vectorised for the common case: a window
    whose intervals neither overlap each other nor cross its edges gets each interval's length (the sweep could
    not decide otherwise); the rest (nesting, an interval over a boundary or an evaluation cut) go through the
    sweep. A run of a million steps is a few numpy passes, not a million sweeps."""
    import numpy as np

    n = len(windows)
    if n == 0:
        return []
    a = np.fromiter((w[0] for w in windows), dtype=np.int64, count=n)
    b = np.fromiter((w[1] for w in windows), dtype=np.int64, count=n)
    names = list(PRIORITY)
    code = {p: i for i, p in enumerate(names)}
    iv = sorted(intervals, key=lambda x: x[1])
    m = len(iv)
    start = np.fromiter((x[1] for x in iv), dtype=np.int64, count=m)
    end = np.fromiter((x[2] for x in iv), dtype=np.int64, count=m)
    phase = np.fromiter((code[x[0]] for x in iv), dtype=np.int64, count=m)
    complex_step = np.zeros(n, dtype=bool)
    if m:
        first = np.searchsorted(b, start, side="right")          # the window an interval starts in (or before)
        last = np.searchsorted(b, end, side="left")               # the window its end falls in
        inside = first < n
        inside[inside] &= a[first[inside]] <= start[inside]       # not in a gap before the window (eval cut)
        prev_end = np.concatenate([[np.iinfo(np.int64).min], np.maximum.accumulate(end)[:-1]])
        simple = inside & (first == last) & (start >= prev_end)
        # every window an unsimple interval touches takes the sweep
        lo = np.minimum(first[~simple], n - 1)
        hi = np.minimum(last[~simple], n - 1)
        marks = np.zeros(n + 1, dtype=np.int64)
        np.add.at(marks, lo, 1)
        np.add.at(marks, hi + 1, -1)
        complex_step = np.cumsum(marks[:-1]) > 0
        # an interval that overlaps an earlier one: the earlier one's window is its window too (first == last)
        take = simple & ~complex_step[np.minimum(first, n - 1)]
        sums = np.bincount(first[take] * len(names) + phase[take], weights=(end - start)[take],
                           minlength=n * len(names)).reshape(n, len(names))
    else:
        sums = np.zeros((n, len(names)))
    index = IntervalIndex(intervals) if complex_step.any() else None
    out = []
    for i in range(n):
        if complex_step[i]:
            out.append(index.attribute(int(a[i]), int(b[i])))
            continue
        row = {p: int(sums[i, j]) for j, p in enumerate(names)}
        got = dict.fromkeys(ALL_PHASES, 0)
        got.update(row)
        got["other"] = int(b[i] - a[i]) - sum(row.values())
        out.append(got)
    return out


def trace_windows(marks: list) -> list[tuple[int, float]]:
    """(begin, end) of each tracing window; a window never closed (run killed inside it) runs to the end."""
    begins = sorted(t for name, t in marks if name == TRACE_BEGIN)
    ends = sorted(t for name, t in marks if name == TRACE_END)
    out = []
    for b in begins:
        e = next((t for t in ends if t >= b), float("inf"))
        out.append((b, e))
    return out


def mark_traced(steps: list[Step], windows: list) -> None:
    for s in steps:
        s.traced = any(s.end_ns > b and s.start_ns < e for b, e in windows)


def phase_share(steps: list[Step]) -> dict:
    total = sum(s.duration_ns for s in steps)
    if total <= 0:
        return {p: (1.0 if p == "other" else 0.0) for p in ALL_PHASES}
    share = {p: sum(s.phases_ns.get(p, 0) for s in steps) / total for p in ALL_PHASES}
    return share


def step_time_stats(steps: list[Step]) -> dict:
    if not steps:
        return {"median": None, "mean": None, "p10": None, "p90": None, "min": None, "max": None}
    d = sorted(s.duration_ns / 1e9 for s in steps)

    def pct(q):
        return d[min(len(d) - 1, int(round(q * (len(d) - 1))))]

    return {"median": statistics.median(d), "mean": statistics.fmean(d), "p10": pct(0.1), "p90": pct(0.9),
            "min": d[0], "max": d[-1]}


def seconds_per_step(steps: list[Step]) -> float | None:
    """Wall time over the steps / their count: what a clock around them reads (a median of bimodal step times
    is not; warm-up and traced steps are already out of `steps`)."""
    if not steps:
        return None
    return sum(s.duration_ns for s in steps) / len(steps) / 1e9


def steady_steps(steps: list[Step], warmup: int) -> list[Step]:
    """Steps after warm-up and outside the tracing window (all of them when too few remain; traced steps too
    when fewer than MIN_UNTRACED are left, which the summary flags: statistics of one or two steps describe
    nothing), without the slow start of a torch.compile run (leading steps longer than LEADING_SLOW x the
    median, as on the device timeline)."""
    kept = steps[warmup:] if len(steps) > warmup + 1 else steps
    untraced = [s for s in kept if not s.traced]
    kept = untraced if len(untraced) >= MIN_UNTRACED else kept
    return kept[leading_slow([s.duration_ns for s in kept]):]


LEADING_SLOW = 3.0
MIN_UNTRACED = 3   # the verdict's minimum (analyzers/thresholds.MIN_STEPS): fewer untraced steps are no statistic


def leading_slow(durations: list, factor: float = LEADING_SLOW) -> int:
    """How many leading steps are a slow start (compilation, CUDA-graph capture): each longer than factor x the
    median step, at most half of the steps, none when fewer than 4 steps."""
    if len(durations) < 4:
        return 0
    median = sorted(durations)[len(durations) // 2]
    i = 0
    while i < len(durations) // 2 and durations[i] > factor * median:
        i += 1
    return i
