"""Compute efficiency of traced steps: the FLOPs their matmuls, convolutions and attention did, from the shapes a
trace recorded (torch.profiler `record_shapes`: "Input Dims" and "Input type" on each op), achieved FLOP/s and
the model FLOPs utilisation (MFU) against a peak.

Counted per op, once (an op inside a counted op, such as aten::mm inside aten::linear's aten::addmm, is not
counted again; the outer one is only counted when it is one of the ops below):
    aten::mm [m,k]x[k,n], aten::addmm (bias, [m,k], [k,n])   2 m k n
    aten::bmm [b,m,k]x[b,k,n], aten::baddbmm                  2 b m k n
    aten::convolution (input [N,C,...], weight [O,C/g,k...], stride, padding, dilation from "Concrete Inputs")
                                                             2 N O prod(out spatial) (C/g) prod(k)
    aten::convolution_backward: that for each of grad input and grad weight it computes (its output mask)
    aten::_scaled_dot_product_*_attention q [b,h,s,d], k [b,h,t,d]   4 b h s t d (forward; backward ops not
                                                             counted: their names vary by kernel)
The backward of a linear layer is aten::mm calls in the trace, so it is counted as it ran. Element-wise ops are
left out (matmul FLOPs are what MFU means). A trace without shapes counts nothing and says so (`shapes: false`).

Peaks: on a CPU, a measured matmul peak (collectors/matmul_peak.py) for the dtype and threads the run used; on
CUDA, PEAKS_TFLOPS by GPU model and dtype (dense, no sparsity: the vendors' data sheets).
"""
from __future__ import annotations

import math

MATMUL = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}
CONV = "aten::convolution"
CONV_BACKWARD = "aten::convolution_backward"
ATTENTION_PREFIX = "aten::_scaled_dot_product_"
STEP_PREFIX = "ProfilerStep#"
DTYPES = {"float": "fp32", "c10::BFloat16": "bf16", "c10::Half": "fp16", "double": "fp64"}
# dense TFLOP/s by GPU model (a substring of the name torch/NVML gives) and dtype; fp32 matmuls run as TF32 on
# tensor cores only where the script allows it, so fp32 is the CUDA-core figure
PEAKS_TFLOPS = {
    "H200": {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
    "H100 80GB HBM3": {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},   # SXM
    "H100 PCIe": {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0, "fp8": 1513.0},
    "A100": {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
    "L40S": {"fp32": 91.6, "tf32": 183.0, "bf16": 362.0, "fp16": 362.0, "fp8": 733.0},
    "L4": {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0, "fp8": 242.5},
    "A10G": {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0},
    "V100": {"fp32": 15.7, "fp16": 125.0},
}


def _prod(xs) -> int:
    return math.prod(int(x) for x in xs)


def _ints(text) -> list[int]:
    return [int(x) for x in str(text).strip("[]").split(",") if x.strip()]


def _conv(x: list, w: list, out_spatial: list) -> int:
    return 2 * x[0] * w[0] * _prod(out_spatial) * w[1] * _prod(w[2:])


def op_flops(name: str, dims: list, concrete: list | None = None) -> int | None:
    """FLOPs of one op from its input dims (and concrete scalar inputs); None for an op not counted (or inputs
    that do not fit it)."""
    concrete = concrete or []
    try:
        if name == "aten::mm":
            (m, k), (_, n) = dims[0], dims[1]
            return 2 * m * k * n
        if name == "aten::addmm":
            (m, k), (_, n) = dims[1], dims[2]
            return 2 * m * k * n
        if name in ("aten::bmm", "aten::baddbmm"):
            a, b = (dims[0], dims[1]) if name == "aten::bmm" else (dims[1], dims[2])
            return 2 * a[0] * a[1] * a[2] * b[2]
        if name == CONV:
            x, w = dims[0], dims[1]
            stride, pad, dil = _ints(concrete[3]), _ints(concrete[4]), _ints(concrete[5])
            out = [(i + 2 * p - d * (k - 1) - 1) // s + 1
                   for i, k, s, p, d in zip(x[2:], w[2:], stride, pad, dil)]
            return _conv(x, w, out) if len(out) == len(x) - 2 else None
        if name == CONV_BACKWARD:
            grad_out, x, w = dims[0], dims[1], dims[2]
            mask = [m.strip() == "True" for m in str(concrete[10]).strip("[]").split(",")]
            return _conv(x, w, grad_out[2:]) * sum(mask[:2])
        if name.startswith(ATTENTION_PREFIX) and "backward" not in name:
            q, k = dims[0], dims[1]
            b, h, s, d = q
            return 4 * b * h * s * k[-2] * d
    except (TypeError, ValueError, IndexError):
        return None
    return None


def count(events: list) -> dict:
    """{"shapes", "steps", "flops_per_step", "by_op", "by_dtype"} over the trace's whole ProfilerSteps."""
    steps = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), e.get("tid"))
                   for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith(STEP_PREFIX))
    ops = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"),
                 key=lambda e: (float(e["ts"]), -float(e.get("dur", 0))))
    shapes = any("Input Dims" in (e.get("args") or {}) for e in ops)
    out = {"shapes": shapes, "steps": len(steps), "flops_per_step": None, "by_op": {}, "by_dtype": {}}
    if not shapes or not steps:
        return out
    total = 0
    counted_until: dict = {}   # tid -> end of the last counted op: ops inside it are its own
    for e in ops:
        ts, end, tid = float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), e.get("tid")
        if ts < counted_until.get(tid, -1.0):
            continue
        if not any(a <= ts < b for a, b, _ in steps):
            continue
        args = e.get("args") or {}
        f = op_flops(str(e["name"]), args.get("Input Dims") or [], args.get("Concrete Inputs"))
        if not f:
            continue
        counted_until[tid] = end
        total += f
        dtype = DTYPES.get(((args.get("Input type") or ["?"])[0]), str((args.get("Input type") or ["?"])[0]))
        if e["name"] == "aten::addmm" and len(args.get("Input type") or []) > 1:
            dtype = DTYPES.get(args["Input type"][1], args["Input type"][1])
        out["by_op"][e["name"]] = out["by_op"].get(e["name"], 0) + f
        out["by_dtype"][dtype] = out["by_dtype"].get(dtype, 0) + f
    n = len(steps)
    out["flops_per_step"] = total / n
    out["by_op"] = {k: v / n for k, v in out["by_op"].items()}
    out["by_dtype"] = {k: v / n for k, v in out["by_dtype"].items()}
    return out


def gpu_peak(gpu_name: str, dtype: str) -> float | None:
    """FLOP/s of the peak table for a GPU name and dtype; None when the model or dtype is not in it."""
    for model, peaks in PEAKS_TFLOPS.items():
        if model in (gpu_name or ""):
            tf = peaks.get(dtype)
            return tf * 1e12 if tf else None
    return None


def efficiency(flops_per_step: float | None, step_s: float | None, peak_flops: float | None) -> dict:
    """Achieved FLOP/s over `step_s` and MFU against `peak_flops` (None where a figure is missing)."""
    achieved = flops_per_step / step_s if flops_per_step and step_s else None
    return {"achieved_flops": achieved,
            "mfu": achieved / peak_flops if achieved and peak_flops else None}
