"""Wiring for the report's GPU section: top kernels and copies from the run's trace (analyzers/gpu_kernels.py),
device memory per step from the `@mem` records and its capacity finding; the ranked "do this next" list
(analyzers/actions.py). CPU runs get None for both GPU blocks."""
from __future__ import annotations

from haiprof.analyzers import actions
from haiprof.analyzers import gpu_kernels as G
from haiprof.analyzers.step_columns import StepColumns


NVML_PEAK = "NVML, device-wide"   # the source named beside a peak read from the hardware summary


def nvml_memory_peaks(hardware: dict | None) -> list[tuple[int, int]]:
    """(peak memory used, capacity) in bytes of each device NVML sampled (hardware summary), where it has both:
    the device-wide peak, every process's memory on it, for runs without the allocator's counters."""
    devs = ((hardware or {}).get("gpu") or {}).get("devices") or {}
    return [(d["mem_used_bytes_max"], d["mem_total_bytes"]) for d in devs.values()
            if d.get("mem_used_bytes_max") and d.get("mem_total_bytes")]


def _capacity(trace: dict, hardware: dict | None) -> int | None:
    props = trace.get("deviceProperties") or []
    if props and isinstance(props[0], dict) and props[0].get("totalGlobalMem"):
        return int(props[0]["totalGlobalMem"])
    devs = ((hardware or {}).get("gpu") or {}).get("devices") or {}
    return next((int(d["mem_total_bytes"]) for d in devs.values() if d.get("mem_total_bytes")), None)


def _parsed(trace) -> bool:
    from haiprof.analyzers.kineto_reader import TraceData   # the reader's imports only where there is a trace
    return isinstance(trace, TraceData)


def analyze(trace, records: list, steps: list, hardware: dict | None, op_trace: dict | None) -> dict:
    """{"gpu": top kernels and copies or None, "memory": per-step memory or None, "findings": [...]}. `trace`: the
    run's trace as parsed once (kineto_reader.TraceData; None or a TraceError without a usable one)."""
    usable = bool((op_trace or {}).get("gpu")) and trace is not None and _parsed(trace)
    traced_steps = ((op_trace or {}).get("gpu") or {}).get("steps")
    gpu = G.summarize(trace.columns, traced_steps) if usable else None
    capacity = _capacity(trace.metadata if usable else {}, hardware)
    memory = G.memory_per_step(records, StepColumns.of(steps).end_ns.tolist(), capacity)
    findings = []
    if memory:
        f = G.memory_finding(memory["peak_reserved_bytes"], capacity, "peak reserved by PyTorch's allocator")
    else:   # older runs and runs without CUDA allocator counters: NVML's peak memory used on the device
        f = next(filter(None, (G.memory_finding(peak, cap, NVML_PEAK) for peak, cap in nvml_memory_peaks(hardware))),
                 None)
    if f:
        findings.append(f)
    return {"gpu": gpu, "memory": memory, "findings": findings}


def next_steps(summary: dict) -> list[dict]:
    return actions.rank(summary)


def advice_left_out(summary: dict) -> dict:
    return actions.left_out(summary)
