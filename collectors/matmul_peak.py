"""A measured matmul peak of this CPU, the denominator of MFU on a CPU run (analyzers/flops.py).

Square matmuls of SIZE in the dtype and with the torch threads the run used, REPS timed after a warm-up; the
best rate is the peak (a busy moment only lowers a rate, never raises one). Run once the script has ended (the
analysis after `haiprof run`, or `haiprof report` on the same host), never during training: about 0.1 s (more on a
loaded machine).
"""
from __future__ import annotations

import platform
import time

SIZE = 512      # 0.27 GFLOP a matmul: ~0.1 s for all of them on one core, a peak within the noise of larger ones
REPS = 10       # the best of these: a busy moment only lowers a rate
TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp64": "float64"}


def cpu_model() -> str:
    """The CPU's model name (meta.json's cpu_model): a peak measured later holds for the run only on this CPU."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def measure(dtype: str = "fp32", threads: int | None = None) -> dict | None:
    """{"flops", "dtype", "threads", "size"}: the best FLOP/s of REPS matmuls; None for an unknown dtype."""
    import torch
    name = TORCH_DTYPES.get(dtype)
    if name is None:
        return None
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        a = torch.randn(SIZE, SIZE).to(getattr(torch, name))
        b = torch.randn(SIZE, SIZE).to(getattr(torch, name))
        a @ b   # warm-up: the kernel choice and the pages
        best = float("inf")
        for _ in range(REPS):
            t0 = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t0)
        return {"flops": 2 * SIZE ** 3 / best, "dtype": dtype, "threads": torch.get_num_threads(), "size": SIZE}
    finally:
        torch.set_num_threads(before)
