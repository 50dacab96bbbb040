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

import math

import numpy as np

# the partition's definitions and its columns (step_columns.py); imported here for the callers of this module
from .step_columns import (ALL_PHASES, BACKWARD_MARK, CODE, EVAL, EVAL_MIN_FORWARDS, GPU_PREFIX,  # noqa: F401
                           LEADING_SLOW, MIN_UNTRACED, PHASES, PRIORITY, STEP_MARK, TRACE_BEGIN, TRACE_END, Split,
                           StepColumns, attribute_columns, build_step_columns, leading_slow,
                           split_of_records, steady_rows, trace_windows, traced_mask)


def build_steps(records, split=None):
    """(steps, info): the steps as analyzers.step_columns.StepColumns (index, start, end, ns per phase, traced)
    and facts about how they were found. `split`: a step_columns.Split of
    the records when the caller has it (one pass over a long run's records, not one per analysis)."""
    if not isinstance(split, Split):
        split = split_of_records(records)
    return build_step_columns(split)


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
