"""Wiring for analyzers/thread_waits.py: on a CPU run, the traced window with the most matmul FLOPs (its events
already read for the FLOP count), the torch threads the script left set and the measured matmul peak
(efficiency.py) in; the advice finding out."""
from __future__ import annotations

from haiprof.analyzers import thread_waits
from haiprof.analyzers import thresholds as T


def findings(run_path, meta: dict, summary: dict, read_events) -> list[dict]:
    eff = summary.get("efficiency") or {}
    if summary.get("device") is not None or not eff.get("peak_flops") or \
            (summary.get("steps_measured") or 0) < T.MIN_STEPS:   # as the share findings: too few steps judge nothing
        return []
    best = max((w for w in eff.get("windows") or [] if w.get("flops_per_step")),
               key=lambda w: w["flops_per_step"], default=None)
    events = read_events(run_path / best["file"]) if best else None
    if not events:
        return []
    steady = (summary.get("step_time_s") or {}).get("steady")
    f = thread_waits.analyze(events, meta.get("torch_threads"), eff["peak_flops"], steady)
    return [f] if f else []
