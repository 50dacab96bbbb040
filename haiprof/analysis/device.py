"""Wiring for CUDA runs: the device-first partition (analyzers/device_timeline.py) replaces the host phase
shares, step time and verdict findings when the run has device spans; CPU-only runs are left as they are."""
from __future__ import annotations

import numpy as np

from haiprof.analyzers import device_timeline as D
from haiprof.analyzers import thresholds as T
from haiprof.analyzers import verdict
from haiprof.analyzers.findings import Finding
from haiprof.analyzers.step_columns import StepColumns

# summary.json lists the device steps one by one up to this many; a longer run's are in RunData.device_steps
# (the report's charts and slowest-steps table read those): a JSON object per step of a week-long run is not
# a summary
PER_STEP_MAX = 20_000


def analyze(records, op_trace: dict | None, split=None) -> dict | None:
    """{"phase_share", "steady_s", "findings", "summary", "steps", "chart"} on the device timeline; None without
    device spans. `split`: the records' step_columns.Split."""
    if split is not None and not split.has_gpu:
        return None   # no device spans: a CPU run
    steps = D.device_steps(records, split)
    if not steps:
        return None
    steady = D.steady(steps, T.WARMUP_STEPS)
    if len(split.mark_times(D.GPU_STEP_MARK)) if split is not None else any(r[0] == D.GPU_STEP_MARK for r in records):
        density, source = 1.0, "kernels"   # `haiprof analyze`: the device intervals are the kernels themselves
    else:
        gpu = (op_trace or {}).get("gpu") or {}
        per_step_us = gpu.get("kernel_us_per_step")
        density = D.kernel_density(D.measured(steady), per_step_us * 1e3 if per_step_us is not None else None)
        source = "tracing window" if density is not None else None
    sh = D.shares(D.measured(steady), density)
    if sh is None:
        return None
    steady_s = D.seconds_per_step(steady)
    findings = verdict.device_findings(sh, steady_s, source)
    traced = np.sort(steps.duration_ns[steps.traced])
    traced_s = int(traced[len(traced) // 2]) / 1e9 if len(traced) else None   # median: the export step is no regime
    # The tracing window samples a few steps. The profiler only ever slows a step, so traced steps much *faster*
    # than the steady ones (batches prefetched before the window, stalls outside it) mean the kernel-level view
    # describes another regime than the rest of the run.
    unrepresentative = bool(traced_s and steady_s and steady_s / traced_s >= T.TRACE_UNREPRESENTATIVE)
    if unrepresentative:
        findings.append(Finding(
            kind="trace-window", severity="info", share=0.0,
            message=f"the traced steps took {traced_s * 1e3:.1f} ms on the device against {steady_s * 1e3:.1f} ms "
                    f"for the steady steps: the op-level trace (trace.json.gz) shows a different regime from the "
                    f"rest of the run; the verdict follows the steady steps",
            evidence={"traced_step_s": traced_s, "steady_step_s": steady_s,
                      "threshold": T.TRACE_UNREPRESENTATIVE}, fixes=[]).as_dict())
    # One meaning of busy on CUDA runs: kernels and copies (the compute spans scaled by the kernel density; copy
    # and collective spans in full), the same figure in the headline, the GPU section, its chart and the kernel
    # table. The gaps between kernels inside the spans are idle time with a cause of their own.
    dens = 1.0 if density is None else density
    busy_share = D.kernel_busy(sh["busy"], density)
    idle_by_host = dict(sh["idle"])
    if density is not None:
        idle_by_host["inside_spans"] = sum(sh["busy"][p] for p in D.COMPUTE) * (1.0 - dens)
    summary = {
        "timeline": "device", "steps": len(steady), "steps_with_device_time": len(steps),
        "steady_step_s": steady_s, "traced_step_s": traced_s, "trace_unrepresentative": unrepresentative,
        "busy_share": busy_share, "idle_share": 1.0 - busy_share, "span_share": sh["busy_share"],
        "busy": sh["busy"], "idle_by_host": idle_by_host, "bound": sh["bound"], "launch_parts": sh["launch_parts"], "kernel_density": density,
        "kernel_source": source,
        "steps_estimated": int(steps.estimated.sum()),
    }
    if len(steps) <= PER_STEP_MAX:
        busy_ns = D.kernel_busy_steps(steps, density)
        summary["per_step"] = [
            {"index": i, "start_ns": a, "duration_s": d / 1e9, "busy_s": b / 1e9, "traced": t,
             **({"estimated_end": True} if e else {})}
            for i, a, d, b, t, e in zip(steps.index.tolist(), steps.start_ns.tolist(), steps.duration_ns.tolist(),
                                        busy_ns.tolist(), steps.traced.tolist(), steps.estimated.tolist())]
    else:
        summary["per_step_omitted"] = (f"{len(steps)} steps: more than {PER_STEP_MAX} are not listed here; the "
                                       f"report charts them")
    return {"phase_share": sh["phase_share"], "steady_s": steady_s, "findings": findings, "summary": summary,
            "steps": steps, "density": dens, "steady_index": steady.index}


def chart_steps(steps: D.DeviceSteps, dens: float, host_index: np.ndarray, host_start: np.ndarray) -> StepColumns:
    """The device steps as the step chart draws them, on the device clock: busy by phase (kernels and copies),
    idle by what the host was doing ("idle:<cause>"), the gaps inside the compute spans as "idle:inside_spans",
    work assumed for an unresolved step as "busy:estimated". One row per host step (`host_index`, in order; a
    step without device time, e.g. the first, is an empty slot at its host start), so the chart lines up with
    every other chart of the report. Float ns: the kernel density scales the compute spans."""
    names = [*D.PHASES, "busy:estimated", *(f"idle:{c}" for c in D.ALL_PHASES), "idle:inside_spans"]
    n = len(host_index)
    row = np.searchsorted(host_index, steps.index)
    ok = (row < n) & (host_index[np.minimum(row, n - 1)] == steps.index) if n else np.zeros(len(steps), bool)
    row = row[ok]
    # written column by column (no second copy of a long run's matrix); float32: a chart's ns, 7 digits
    phases = np.zeros((n, len(names)), dtype=np.float32)
    for j, p in enumerate(D.PHASES):
        phases[row, j] = steps.busy_of(p)[ok] * (dens if p in D.COMPUTE else 1.0)
    phases[row, len(D.PHASES)] = steps.busy_of("unrecorded")[ok]
    for j in range(len(D.ALL_PHASES)):
        phases[row, len(D.PHASES) + 1 + j] = steps.idle[ok, j]
    compute = steps.busy[:, [D.BUSY.index(p) for p in D.COMPUTE]].sum(axis=1)
    phases[row, -1] = compute[ok] * (1.0 - dens)
    start, end = host_start.astype(np.int64).copy(), host_start.astype(np.int64).copy()
    start[row], end[row] = steps.start_ns[ok], steps.end_ns[ok]
    traced = np.zeros(n, dtype=bool)
    traced[row] = steps.traced[ok]
    return StepColumns(host_index, start, end, phases, traced, names)
