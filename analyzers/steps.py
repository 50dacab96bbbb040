"""Per-step phase breakdown from the raw phase intervals.

Each step is the wall-clock span between two step boundaries (optimizer steps; the end of each backward when a
script has no optimizer). Inside a step, every nanosecond goes to exactly one phase: the innermost interval that
covers it (h2d inside forward is h2d; a forward replayed inside backward is forward; an LBFGS closure's
forward/backward inside optimizer.step is forward/backward), ties broken by PRIORITY; the rest is "other".
This is the interval arithmetic of the PyTorch TensorBoard plugin's overall parser, with nesting respected.

build_steps returns the steps as columns (step_columns.StepColumns: numpy arrays, a million steps in ~80 MB); the
statistics below take those.
"""
from __future__ import annotations

import bisect
import math

import numpy as np

# the partition's definitions and its columns (step_columns.py); imported here for the callers of this module
from .step_columns import (ALL_PHASES, BACKWARD_MARK, CODE, EVAL, EVAL_MIN_FORWARDS, GPU_PREFIX,  # noqa: F401
                           LEADING_SLOW, MIN_UNTRACED, PHASES, PRIORITY, STEP_MARK, TRACE_BEGIN, TRACE_END, Split,
                           StepColumns, attribute, attribute_columns, build_step_columns, leading_slow,
                           split_of_records, steady_rows, trace_windows, traced_mask)


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


def build_steps(records, split=None):
    """(steps, info): the steps as analyzers.step_columns.StepColumns (index, start, end, ns per phase, traced)
    and facts about how they were found. `split`: a step_columns.Split of
    the records when the caller has it (one pass over a long run's records, not one per analysis)."""
    if not isinstance(split, Split):
        split = split_of_records(records)
    return build_step_columns(split)


def attribute_all(intervals: list, windows: list) -> list[dict]:
    """attribute() for every window [a, b) (ordered, not overlapping); step_columns.attribute_columns does it
    over arrays (the sweep only for the windows with nesting or intervals over their edges)."""
    i64 = np.int64
    out = attribute_columns(np.array([CODE[p] for p, _, _ in intervals], dtype=i64),
                            np.array([s for _, s, _ in intervals], dtype=i64),
                            np.array([e for _, _, e in intervals], dtype=i64),
                            np.array([w[0] for w in windows], dtype=i64), np.array([w[1] for w in windows], dtype=i64))
    return [dict(zip(ALL_PHASES, row)) for row in out.tolist()]


def mark_traced(steps: StepColumns, windows: list) -> None:
    steps.traced[:] = traced_mask(steps.start_ns, steps.end_ns, windows)
    steps.derived.clear()


def _columns(steps):
    return StepColumns.of(steps)


def phase_share(steps) -> dict:
    cols = _columns(steps)
    total = int(cols.duration_ns.sum())
    if total <= 0:
        return {p: (1.0 if p == "other" else 0.0) for p in ALL_PHASES}
    share = {p: int(cols.phase(p).sum()) / total for p in ALL_PHASES}
    return share


def step_time_stats(steps) -> dict:
    if not len(steps):
        return {"median": None, "mean": None, "p10": None, "p90": None, "min": None, "max": None}
    d = np.sort(_columns(steps).duration_ns / 1e9)   # one array, no list of a million floats
    n = len(d)

    def pct(q):
        return float(d[min(n - 1, int(round(q * (n - 1))))])

    median = float(d[n // 2]) if n % 2 else (float(d[n // 2 - 1]) + float(d[n // 2])) / 2   # statistics.median's
    return {"median": median, "mean": math.fsum(d) / n, "p10": pct(0.1), "p90": pct(0.9),
            "min": float(d[0]), "max": float(d[-1])}


def seconds_per_step(steps: StepColumns) -> float | None:
    """Wall time over the steps / their count: what a clock around them reads (a median of bimodal step times
    is not; warm-up and traced steps are already out of `steps`)."""
    if not len(steps):
        return None
    return int(_columns(steps).duration_ns.sum()) / len(steps) / 1e9


def steady_steps(steps: StepColumns, warmup: int) -> StepColumns:
    """The host's steady steps (step_columns.steady_rows: after warm-up, outside the tracing window, without a
    slow start), as columns."""
    key = ("steady", warmup)   # asked for by several analyses: one copy of a long run's steps, not one each
    if key not in steps.derived:
        rows = steady_rows(steps.duration_ns, steps.traced, warmup)
        one_run = len(rows) and rows[-1] - rows[0] + 1 == len(rows)
        steps.derived[key] = steps.take(slice(int(rows[0]), int(rows[-1]) + 1)) if one_run else steps.take(rows)
    return steps.derived[key]
