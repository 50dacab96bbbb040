"""The partition's list-based reference definitions, as it was first written one window at a time: the column code
of analyzers/step_columns.py and analyzers/timeline_owner.py is tested against them (the product keeps only the
columns). The rule: every nanosecond of a window goes to the innermost interval covering it (the latest start),
ties broken by PRIORITY; the rest is "other"."""
from __future__ import annotations

import bisect

import numpy as np

from haiprof.analyzers.step_columns import (ALL_PHASES, BACKWARD_MARK, CODE, EVAL, EVAL_MIN_FORWARDS, GPU_PREFIX,
                                            PRIORITY, STEP_MARK, StepColumns, attribute_columns, traced_mask)


def attribute(intervals: list, start: int, end: int) -> dict:
    """Nanoseconds per phase in [start, end): innermost covering interval wins, then PRIORITY; rest 'other'."""
    out = dict.fromkeys(ALL_PHASES, 0)
    # (phase, clipped start, clipped end, start): innermost is the latest *start*, not the latest clipped one,
    # so the owner of an instant does not depend on the window asked about (timeline_owner.py relies on it)
    clipped = [(p, max(s, start), min(e, end), s) for p, s, e in intervals if e > start and s < end]
    if not clipped:
        out["other"] = end - start
        return out
    cuts = sorted({start, end, *(iv[1] for iv in clipped), *(iv[2] for iv in clipped)})
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
        best = max(active, key=lambda iv: (iv[3], PRIORITY[iv[0]]))
        out[best[0]] += b - a
    return out


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
