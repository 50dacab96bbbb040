"""Every op-level tracing window of a run, beside the steady steps around it (summary.json `trace_windows`).

Wiring only: the windows are the "@trace-begin"/"@trace-end" marks; which file each one wrote is the
"@trace-window" mark taken just before a window asked for later (--trace-at, --trace-every, `haiprof trace`);
the first window, after warm-up, is trace.json.gz. The steps inside a window are the traced ones (kept out of the
statistics); around it: up to AROUND untraced steps on each side.
"""
from __future__ import annotations

import statistics

import numpy as np

from haiprof.analyzers.step_columns import StepColumns
from haiprof.analyzers.steps import trace_windows

from ..rundir.vocabulary import KINETO_TRACE, TRACE_BEGIN, TRACE_END, WINDOW_MARK, window_trace
AROUND = 20
LAST_NS = np.iinfo(np.int64).max   # a window never closed ends at inf: as int64, the ns stay exact


def analyze(records: list, steps, run_path) -> list[dict]:
    marks = [(r[0], r[1]) for r in records if r[0] in (TRACE_BEGIN, TRACE_END)]
    asked = sorted((r[1], r[3]) for r in records if r[0] == WINDOW_MARK and len(r) >= 4)
    cols = StepColumns.of(steps)
    duration = cols.duration_ns
    out = []
    for begin, end in trace_windows(marks):
        before = [step for t, step in asked if t <= begin]
        name = window_trace(before[-1]) if before and (not out or before[-1] != out[-1]["asked_step"]) \
            else KINETO_TRACE
        # the steps are in order: the ones overlapping the window and the AROUND on each side are index ranges
        lo = int(np.searchsorted(cols.end_ns, begin, side="right"))
        hi = int(np.searchsorted(cols.start_ns, min(end, LAST_NS), side="left"))   # never closed: to the end
        inside = lo + np.flatnonzero(cols.traced[lo:hi] & (cols.end_ns[lo:hi] > begin) & (cols.start_ns[lo:hi] < end))
        if not len(inside):
            continue
        first, last = int(cols.index[inside[0]]), int(cols.index[inside[-1]])
        idx = cols.index
        a, b = int(np.searchsorted(idx, first - AROUND)), int(np.searchsorted(idx, last + AROUND, side="right"))
        near = a + np.flatnonzero(~cols.traced[a:b] & (idx[a:b] != idx[a:b].clip(first, last)))
        in_ms = statistics.fmean(duration[inside].tolist()) / 1e6
        around_ms = statistics.fmean(duration[near].tolist()) / 1e6 if len(near) else None
        out.append({"file": name if (run_path / name).is_file() else None, "asked_step": before[-1] if before and
                    name != KINETO_TRACE else None, "first_step": first, "last_step": last,
                    "steps": len(inside), "step_ms": round(in_ms, 4),
                    "around_ms": round(around_ms, 4) if around_ms is not None else None,
                    "slowdown": round(in_ms / around_ms, 3) if around_ms else None})
    return out
