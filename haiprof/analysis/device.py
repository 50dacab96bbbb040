"""Wiring for CUDA runs: the device-first partition (analyzers/device_timeline.py) replaces the host phase
shares, step time and verdict findings when the run has device spans; CPU-only runs are left as they are."""
from __future__ import annotations

from haiprof.analyzers import device_timeline as D
from haiprof.analyzers import thresholds as T
from haiprof.analyzers import verdict
from haiprof.analyzers.steps import Step


def analyze(records, op_trace: dict | None, split: tuple | None = None) -> dict | None:
    """{"phase_share", "steady_s", "findings", "summary"} on the device timeline; None without device spans."""
    if split is not None and not (split.has_gpu if hasattr(split, "has_gpu") else split[1]):
        return None   # no device spans: a CPU run
    steps = D.device_steps(records, split)
    if not steps:
        return None
    steady = D.steady(steps, T.WARMUP_STEPS)
    if any(r[0] == D.GPU_STEP_MARK for r in records):
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
    traced = sorted(st.duration_ns for st in steps if st.traced)
    traced_s = traced[len(traced) // 2] / 1e9 if traced else None   # median: the export step is no regime
    # The tracing window samples a few steps. The profiler only ever slows a step, so traced steps much *faster*
    # than the steady ones (batches prefetched before the window, stalls outside it) mean the kernel-level view
    # describes another regime than the rest of the run.
    unrepresentative = bool(traced_s and steady_s and steady_s / traced_s >= T.TRACE_UNREPRESENTATIVE)
    if unrepresentative:
        findings.append({
            "kind": "trace-window", "severity": "info", "share": 0.0,
            "message": f"the traced steps took {traced_s * 1e3:.1f} ms on the device against {steady_s * 1e3:.1f} ms "
                       f"for the steady steps: the op-level trace (trace.json.gz) shows a different regime from the "
                       f"rest of the run; the verdict follows the steady steps",
            "evidence": {"traced_step_s": traced_s, "steady_step_s": steady_s,
                         "threshold": T.TRACE_UNREPRESENTATIVE}, "fixes": []})
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
        "per_step": [{"index": st.index, "start_ns": st.start_ns, "duration_s": st.duration_ns / 1e9,
                      "busy_s": D.kernel_busy(st.busy, density) / 1e9, "traced": st.traced,
                      **({"estimated_end": True} if st.estimated else {})} for st in steps],
        "steps_estimated": sum(st.estimated for st in steps),
    }
    return {"phase_share": sh["phase_share"], "steady_s": steady_s, "findings": findings, "summary": summary,
            "chart_steps": [_chart_step(st, dens) for st in steps]}


def _chart_step(st: D.DeviceStep, dens: float) -> Step:
    """A device step as the step chart draws it, on the device clock: busy by phase (kernels and copies), idle
    by what the host was doing ("idle:<cause>"), the gaps inside the compute spans as "idle:inside_spans"."""
    ph: dict = {}
    for p, v in st.busy.items():
        if p in D.COMPUTE:
            ph[p] = v * dens
            ph["idle:inside_spans"] = ph.get("idle:inside_spans", 0) + v * (1.0 - dens)
        else:
            ph["busy:estimated" if p == "unrecorded" else p] = v
    for cause, v in st.idle.items():
        if v:
            ph[f"idle:{cause}"] = ph.get(f"idle:{cause}", 0) + v
    return Step(index=st.index, start_ns=st.start_ns, end_ns=st.end_ns, phases_ns=ph, traced=st.traced)
