"""Every op-level tracing window of a run, beside the steady steps around it (summary.json `trace_windows`).

Wiring only: the windows are the "@trace-begin"/"@trace-end" marks; which file each one wrote is the
"@trace-window" mark taken just before a window asked for later (--trace-at, --trace-every, `haiprof trace`);
the first window, after warm-up, is trace.json.gz. The steps inside a window are the traced ones (kept out of the
statistics); around it: up to AROUND untraced steps on each side.
"""
from __future__ import annotations

import statistics

from haiprof.analyzers.steps import TRACE_BEGIN, TRACE_END, trace_windows

WINDOW_MARK = "@trace-window"   # collectors/trace_requests.py
AROUND = 20


def analyze(records: list, steps: list, run_path) -> list[dict]:
    marks = [(r[0], r[1]) for r in records if r[0] in (TRACE_BEGIN, TRACE_END)]
    asked = sorted((r[1], r[3]) for r in records if r[0] == WINDOW_MARK and len(r) >= 4)
    out = []
    for begin, end in trace_windows(marks):
        before = [step for t, step in asked if t <= begin]
        name = f"trace-step{before[-1]}.json.gz" if before and (not out or before[-1] != out[-1]["asked_step"]) \
            else "trace.json.gz"
        inside = [s for s in steps if s.traced and s.end_ns > begin and s.start_ns < end]
        if not inside:
            continue
        first, last = inside[0].index, inside[-1].index
        near = [s for s in steps if not s.traced and (first - AROUND <= s.index < first or
                                                       last < s.index <= last + AROUND)]
        in_ms = statistics.fmean(s.duration_ns for s in inside) / 1e6
        around_ms = statistics.fmean(s.duration_ns for s in near) / 1e6 if near else None
        out.append({"file": name if (run_path / name).is_file() else None, "asked_step": before[-1] if before and
                    name != "trace.json.gz" else None, "first_step": first, "last_step": last,
                    "steps": len(inside), "step_ms": round(in_ms, 4),
                    "around_ms": round(around_ms, 4) if around_ms is not None else None,
                    "slowdown": round(in_ms / around_ms, 3) if around_ms else None})
    return out
