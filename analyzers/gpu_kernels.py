"""What the GPU ran in the tracing window: top kernels by GPU time, copies by kind (pageable / pinned) with their
bandwidth, and device memory per step against capacity. Pure functions over the trace's columns (the one parse of
the trace, analyzers/kineto_reader.py) and the phase records.

Kernel names are shortened for tables (template arguments and parameter lists dropped; the full name is kept).
Copies are grouped by Kineto's name, e.g. "Memcpy HtoD (Pageable -> Device)": a pageable host-to-device copy is
staged through a driver buffer and blocks the host, a pinned one runs at the link's rate asynchronously, which is
why pin_memory=True is the fix for slow pageable copies (PyTorch's pin-memory guide).
"""
from __future__ import annotations

import re

import numpy as np

from .findings import Finding

TOP_KERNELS = 10
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")   # the reader's names (legacy "Kernel", "Memcpy"... mapped)
# Above this share of device memory, activations or optimizer state are close to the limit (TensorBoard's
# PyTorch profiler plugin recommends AMP or activation checkpointing beyond 90%).
MEMORY_NEAR_CAPACITY = 0.90


def _demangle_head(name: str) -> str:
    """Itanium-mangled `_ZN17cutlass__5x_cudnn6KernelI...` -> `cutlass__5x_cudnn::Kernel` (the nested name only)."""
    s = name[3:] if name.startswith("_ZN") else name[2:]
    parts, i = [], 0
    while i < len(s) and s[i].isdigit():
        j = i
        while j < len(s) and s[j].isdigit():
            j += 1
        n = int(s[i:j])
        parts.append(s[j:j + n])
        i = j + n
    return "::".join(parts) if parts else name


def short_name(name: str, limit: int = 80) -> str:
    """`void at::native::vectorized_elementwise_kernel<4, at::...>(int, ...)` -> `vectorized_elementwise_kernel`."""
    if name.startswith("_Z"):
        s = _demangle_head(name)
        return s if len(s) <= limit else s[:limit - 1] + "…"
    s = re.sub(r"^void ", "", name.strip()).replace("(anonymous namespace)::", "")
    depth, out = 0, []
    for ch in s:                       # drop template arguments <...>
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    s = "".join(out).split("(")[0].strip() or name
    s = (s.rsplit("::", 1)[-1] if "::" in s else s) or name
    if s in ("Kernel", "Kernel2", "device_kernel"):   # CUTLASS's generic launchers: the template names the kernel
        m = re.search(r"<\s*([\w:]+)", name)
        s = m.group(1).rsplit("::", 1)[-1] if m else s
    return s if len(s) <= limit else s[:limit - 1] + "…"


def copy_kind(name: str) -> str:
    """'Memcpy HtoD (Pageable -> Device)' -> 'HtoD pageable'; 'Memset (Device)' -> 'memset'."""
    if name.startswith("Memset"):
        return "memset"
    m = re.match(r"Memcpy (\w+) \((\w+) -> (\w+)\)", name)
    if not m:
        return name
    direction, src, dst = m.groups()
    host = src if direction.startswith("HtoD") else dst if direction.startswith("DtoH") else ""
    return f"{direction} {host.lower()}".strip()


# Tensor cores, read from the kernel's name (cuBLAS/cuDNN/CUTLASS name their math: `ffma`/`simt` kernels run on
# the CUDA cores, `tf32`, `bf16`, `f16`, `hmma`, `16816`... on tensor cores). A naming rule, not a counter: an
# fp32 matmul without TF32 (`sm80_xmma_gemm_f32f32_..._ffma`) is exactly what mixed precision moves.
_CUDA_CORES = re.compile(r"ffma|simt", re.I)
_TENSOR_CORES = re.compile(r"tf32|bf16|f16|fp16|hmma|imma|wgmma|gmma|tensorop|16816|1688|884|flash_fwd|flash_bwd|"
                           r"fmha|nvjet", re.I)
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
MAX_WALK = 64   # ops looked at backwards from a launch to find the one that encloses it


def uses_tensor_cores(name: str) -> bool:
    return not _CUDA_CORES.search(name) and bool(_TENSOR_CORES.search(name))


def _column(cols, name: str, mask) -> list:
    """A column's values on the rows `mask` selects, as Python values (category strings for name/cat/ph)."""
    values = cols.arrays[name][mask]
    if name in cols.categories:
        cats = cols.categories[name]
        return [cats[i] for i in values.tolist()]
    return values.tolist()


def _where(cols, cats) -> np.ndarray:
    """Duration ("X") rows of the given categories, in the trace's order."""
    a = cols.arrays
    return (np.isin(a["cat"], cols.codes_of("cat", cats)) & np.isin(a["ph"], cols.codes_of("ph", ["X"]))
            & ~np.isnan(a["ts_us"]))


def _durations(cols, mask) -> list:
    return np.nan_to_num(cols.arrays["dur_us"][mask], nan=0.0).tolist()


def launching_ops(cols) -> dict:
    """correlation id -> name of the innermost CPU op around the runtime call that launched it (same thread).
    `cols`: the trace's columns (analyzers/trace_columns.EventColumns)."""
    import bisect
    ops: dict = {}
    op = _where(cols, ["cpu_op"])
    for pid, tid, ts, dur, name in zip(_column(cols, "pid", op), _column(cols, "tid", op), _column(cols, "ts_us", op),
                                       _durations(cols, op), _column(cols, "name", op)):
        ops.setdefault((pid, tid), []).append((ts, ts + dur, name))
    run = _where(cols, LAUNCH_CATS)
    launches = [x for x in zip(_column(cols, "pid", run), _column(cols, "tid", run), _column(cols, "ts_us", run),
                               _column(cols, "correlation", run)) if x[3] != -1]
    starts = {}
    for key, lst in ops.items():
        lst.sort()
        starts[key] = [x[0] for x in lst]
    out = {}
    for pid, tid, ts, corr in launches:
        lst = ops.get((pid, tid))
        if not lst:
            continue
        i = bisect.bisect_right(starts[(pid, tid)], ts) - 1
        for j in range(i, max(-1, i - MAX_WALK), -1):   # the latest op started before the launch that still runs
            if lst[j][1] >= ts:
                out[corr] = lst[j][2]
                break
    return out


def summarize(cols, steps: int | None = None) -> dict | None:
    """cols: the trace's columns (analyzers/trace_columns.EventColumns: name, cat, dur in µs, bytes of copies),
    read once for every analysis of the trace. None when the trace has no device events. Kernels are grouped by
    their short name (template instances of one kernel are one row), each with the CPU op that launched most of
    them and whether it runs on tensor cores."""
    by_corr = launching_ops(cols)
    kernels: dict = {}
    copies: dict = {}
    tc_us = 0.0
    # (short name, tensor cores) once per distinct kernel name: a step launches the same few kernels over and over,
    # and reading a templated name (thousands of characters) took ~0.2 ms a kernel
    read: dict = {}
    dev = _where(cols, DEVICE_CATS)
    for cat, name, dur, corr, nbytes in zip(_column(cols, "cat", dev), _column(cols, "name", dev),
                                            _durations(cols, dev), _column(cols, "correlation", dev),
                                            _column(cols, "bytes", dev)):
        if cat == "kernel":
            short, tensor_cores = read.get(name) or read.setdefault(name, (short_name(name), uses_tensor_cores(name)))
            k = kernels.setdefault(short, {"count": 0, "us": 0.0, "names": {}, "ops": {}, "tc_us": 0.0})
            k["count"] += 1
            k["us"] += dur
            k["names"][name] = k["names"].get(name, 0.0) + dur
            op = by_corr.get(corr) if corr != -1 else None
            if op is not None:
                k["ops"][op] = k["ops"].get(op, 0) + 1
            if tensor_cores:
                k["tc_us"] += dur
                tc_us += dur
        else:
            c = copies.setdefault(copy_kind(name), [0, 0.0, 0])
            c[0] += 1
            c[1] += dur
            c[2] += max(0, nbytes)
    kernel_us = sum(v["us"] for v in kernels.values())
    copy_us = sum(v[1] for v in copies.values())
    device_us = kernel_us + copy_us
    if device_us <= 0:
        return None
    per = steps if steps else None
    top = sorted(kernels.items(), key=lambda kv: kv[1]["us"], reverse=True)[:TOP_KERNELS]

    def row(short: str, k: dict) -> dict:
        full = max(k["names"], key=k["names"].get)
        op = max(k["ops"], key=k["ops"].get) if k["ops"] else None
        return {"name": short, "full_name": full[:400], "variants": len(k["names"]), "count": k["count"],
                "total_us": k["us"], "share": k["us"] / device_us, "mean_us": k["us"] / k["count"],
                "tensor_cores": k["tc_us"] >= 0.5 * k["us"], "launched_by": op,
                "launched_by_count": k["ops"].get(op, 0) if op else 0}
    return {
        "steps": per,
        "device_us": device_us, "kernel_us": kernel_us, "copy_us": copy_us,
        "kernel_count": sum(v["count"] for v in kernels.values()), "distinct_kernels": len(kernels),
        "tensor_core_share": tc_us / kernel_us if kernel_us > 0 else None,   # of kernel time, by kernel name
        "top_kernels": [row(n, k) for n, k in top],
        "copies": [{"kind": k, "count": c, "total_us": us, "bytes": b, "share": us / device_us,
                    "gb_per_s": (b / (us * 1e-6) / 1e9) if us > 0 and b else None}
                   for k, (c, us, b) in sorted(copies.items(), key=lambda kv: kv[1][1], reverse=True)],
        "pageable_h2d_share": sum(us for k, (_, us, _) in copies.items() if k == "HtoD pageable") / device_us,
    }


from haiprof.rundir.vocabulary import MEM_MARK


def memory_per_step(records, step_ends: list, capacity: int | None) -> dict | None:
    """Device memory at each step from `@mem` records [name, t, t, allocated, peak_allocated, reserved,
    peak_reserved] (host-side allocator counters, read without a synchronize), matched to the step that ended at
    or after the sample. None when the run recorded none (CPU runs, older runs)."""
    marks = sorted((r[1], r[3:7]) for r in records
                   if isinstance(r, (list, tuple)) and len(r) >= 7 and r[0] == MEM_MARK)
    if not marks:
        return None
    per_step, j = [], 0
    for i, end in enumerate(step_ends):
        last = None
        while j < len(marks) and marks[j][0] <= end:
            last = marks[j][1]
            j += 1
        if last is not None:
            per_step.append({"index": i, "allocated": int(last[0]), "peak_allocated": int(last[1]),
                             "reserved": int(last[2]), "peak_reserved": int(last[3])})
    peak_alloc = max(int(m[1][1]) for m in marks)
    peak_res = max(int(m[1][3]) for m in marks)
    share = peak_res / capacity if capacity else None
    return {"per_step": per_step, "peak_allocated_bytes": peak_alloc, "peak_reserved_bytes": peak_res,
            "capacity_bytes": capacity, "peak_share_of_capacity": share, "source": "allocator counters"}


def memory_finding(peak_bytes: int | None, capacity: int | None, source: str) -> dict | None:
    if not peak_bytes or not capacity or peak_bytes / capacity < MEMORY_NEAR_CAPACITY:
        return None
    share = peak_bytes / capacity
    return Finding(kind="memory", severity="moderate", share=0.0,
                   message=f"device memory peaked at {peak_bytes / 2**30:.1f} GiB of {capacity / 2**30:.1f} GiB "
                           f"({100 * share:.0f}%, {source}): little room for a larger batch or model; mixed precision "
                           f"or activation checkpointing frees memory",
                   evidence={"peak_bytes": peak_bytes, "capacity_bytes": capacity, "share": share,
                             "threshold": MEMORY_NEAR_CAPACITY, "source": source},
                   fixes=["amp"]).as_dict()
