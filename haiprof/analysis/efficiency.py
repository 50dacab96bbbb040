"""Compute efficiency of the traced windows (summary.json `efficiency`): FLOPs per step from each trace's op shapes
(analyzers/flops.py), achieved FLOP/s on the steady step, and MFU against a peak.

Wiring only. The peak: on a CUDA run the peak table for the GPU model and the dtype the matmuls used; on a CPU run a
matmul peak measured on this machine (collectors/matmul_peak.py) with the torch threads the run used, kept in the
run directory (MATMUL_PEAK) so a later `haiprof report` quotes the same one, and measured only on the machine that
ran it (same host and CPU model): elsewhere the peak is not known, and said so. A trace recorded without shapes
(the default window before this release, the recorded H100 runs) counts no FLOPs: said so, never guessed.
"""
from __future__ import annotations

import platform

from haiprof.analyzers import flops

from ..rundir.units import format_flops
from . import run_probes
from .gpu import NVML_PEAK, nvml_memory_peaks

MATMUL_PEAK = "matmul_peak.json"
MAX_WINDOWS = 8   # traces read for their FLOPs: the first ones (a run of days traces a window every few minutes)


def cpu_peak(run_path, meta: dict, dtype: str) -> dict | None:
    """The CPU's matmul peak for the run, measured once and kept in the run directory: by the script's own python
    at its end (runtime/child_boot.py: torch is loaded there, with the run's threads), else by the report."""
    return _cpu_peak(run_path, meta, dtype)


def _cpu_peak(run_path, meta: dict, dtype: str) -> dict | None:
    path = run_path / MATMUL_PEAK
    peak = run_probes.kept(path, lambda k: k.get("dtype") == dtype)
    if peak is not None or run_probes.why_not_here(run_path, meta):
        return peak
    from haiprof.collectors.matmul_peak import measure
    peak = measure(dtype, meta.get("torch_threads"))
    if peak is not None:
        peak["machine"] = platform.node()
        run_probes.keep(path, peak)
    return peak


def quote_mfu(findings: list[dict], eff: dict | None) -> None:
    """The compute finding quotes the MFU (in place: findings not yet checked)."""
    from haiprof.analyzers.findings import edited
    if not eff or not eff.get("mfu"):
        return
    for i, f in enumerate(findings):
        if f.get("kind") == "compute":
            rate = f"{format_flops(eff['achieved_flops'])}/s of {format_flops(eff['peak_flops'])}/s"
            findings[i] = edited(f, message=f"{f['message']}; MFU {eff['mfu']:.0%} ({rate}, {eff['peak_source']})",
                                 evidence={**(f.get("evidence") or {}), "mfu": eff["mfu"],
                                           "achieved_flops": eff["achieved_flops"], "peak_flops": eff["peak_flops"]})


def add_device_use(eff: dict | None, gpu: dict | None, memory: dict | None, hardware: dict | None) -> None:
    """CUDA runs: beside the MFU, the share of the traced kernel time on tensor cores (by kernel name,
    analyzers/gpu_kernels.py) and the memory headroom at the run's peak (allocator counters against the device's
    capacity; without those counters NVML's device-wide peak): whether "compute-bound" has room in precision and
    in batch size. Quoted from the GPU section's figures, not computed again. In place; nothing without a traced
    window or without those figures."""
    if eff is None:
        return
    tc = (gpu or {}).get("tensor_core_share")
    if tc is not None:
        eff["tensor_core_share"] = tc
    m = memory or {}
    peak, cap, source = m.get("peak_reserved_bytes") or m.get("peak_allocated_bytes"), m.get("capacity_bytes"), \
        "peak reserved by PyTorch's allocator"
    if not (peak and cap):
        peak, cap = next(iter(nvml_memory_peaks(hardware)), (None, None))
        source = NVML_PEAK
    if peak and cap:
        eff["memory_headroom"] = {"peak_bytes": peak, "capacity_bytes": cap, "headroom_bytes": max(0, cap - peak),
                                  "source": source}


def analyze(run_path, meta: dict, windows: list, read_events, steady_s: float | None, cuda: bool) -> dict | None:
    """{"windows": [...], "flops_per_step", "dtype", "achieved_flops", "peak_flops", "peak_source", "mfu",
    "note"}; None when the run traced no window."""
    rows = []
    for w in windows[:MAX_WINDOWS]:
        if not w.get("file"):
            continue
        events = read_events(run_path / w["file"])
        if not events:
            continue
        c = flops.count(events)
        row = {"file": w["file"], "shapes": c["shapes"], "flops_per_step": c["flops_per_step"],
               "by_dtype": c["by_dtype"], "by_op": c["by_op"], "step_ms": w.get("step_ms")}
        row.update(flops.efficiency(c["flops_per_step"], (w.get("step_ms") or 0) / 1e3 or None, None))
        rows.append(row)
    if not rows:
        return None
    counted = [r for r in rows if r["flops_per_step"]]
    out = {"windows": rows, "flops_per_step": None, "dtype": None, "achieved_flops": None, "peak_flops": None,
           "peak_source": None, "mfu": None, "note": None}
    if not counted:
        out["note"] = ("the traces carry no op shapes (recorded without record_shapes): no FLOPs counted"
                       if not any(r["shapes"] for r in rows) else "no matmul, convolution or attention in the traces")
        return out
    best = max(counted, key=lambda r: r["flops_per_step"])   # the window of whole training steps
    dtype = max(best["by_dtype"], key=best["by_dtype"].get)
    out.update(flops_per_step=best["flops_per_step"], dtype=dtype)
    if cuda:
        gpu = ((meta.get("gpus") or [""])[0]) or ""
        if dtype == "fp32" and meta.get("float32_matmul_precision") in ("high", "medium"):
            dtype = "tf32"   # fp32 matmuls the script let run on tensor cores
        peak = flops.gpu_peak(gpu, dtype)
        out.update(peak_flops=peak, peak_source=f"peak table: {gpu} {dtype} dense" if peak else None)
        if peak is None:
            out["note"] = f"no peak in the table for {gpu or 'this GPU'} in {dtype}"
    else:
        peak = _cpu_peak(run_path, meta, dtype)
        if peak:
            out.update(peak_flops=peak["flops"], peak_source=f"measured {peak['size']}x{peak['size']} {dtype} "
                       f"matmul on this CPU, {peak['threads']} thread(s)")
        else:
            out["note"] = "the CPU's matmul peak is measured on the machine that ran it: not this one"
    out.update(flops.efficiency(out["flops_per_step"], steady_s, out["peak_flops"]))
    for r in rows:
        if r["achieved_flops"] and out["peak_flops"]:
            r["mfu"] = r["achieved_flops"] / out["peak_flops"]
    return out
