"""Where a compute-bound step's time goes in float32 and under bf16 autocast on this CPU (the `amp` fix's ceiling).

    python benchmarks/amp_breakdown.py [--steps 8] [--width 1024] [--batch-size 128]

The model, data and optimizer of examples/compute_bound.py, run by hand (no haiprof), float32 steps and
autocast(bf16) steps alternating. Prints ms/step for each and, from torch.profiler, the self CPU time per step of
the op groups: matmuls (mm/addmm), dtype casts (copy_/to), and the rest (elementwise, loss, optimizer). autocast
can only speed up the matmuls; casts are what it adds.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

MATMUL = ("aten::mm", "aten::addmm", "aten::bmm", "aten::linear")
CAST = ("aten::copy_", "aten::_to_copy")


def build(width: int, batch: int):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(width, 2 * width), nn.ReLU(), nn.Linear(2 * width, 2 * width), nn.ReLU(),
                          nn.Linear(2 * width, width), nn.ReLU(), nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(batch, width), torch.randint(0, 10, (batch,))
    loss_fn = nn.CrossEntropyLoss()

    def step(amp: bool):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            out = model(x)
        loss_fn(out.float(), y).backward()
        opt.step()
    return step


def groups(prof, steps: int) -> dict:
    out = {"matmul": 0.0, "cast": 0.0, "other": 0.0}
    for ev in prof.key_averages():
        if ev.key.startswith("Optimizer.") or ev.key.startswith("ProfilerStep"):
            continue
        kind = "matmul" if ev.key in MATMUL else "cast" if ev.key in CAST else "other"
        out[kind] += ev.self_cpu_time_total / 1e3 / steps
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch-size", type=int, default=128)
    ns = ap.parse_args()
    print(f"threads {torch.get_num_threads()}, oneDNN bf16: {torch.ops.mkldnn._is_mkldnn_bf16_supported()}, "
          f"loadavg {open('/proc/loadavg').read().split()[0]}")
    step = build(ns.width, ns.batch_size)
    times = {False: [], True: []}
    for _ in range(3):
        for amp in (False, True):
            step(amp)
            t0 = time.perf_counter()
            for _ in range(ns.steps):
                step(amp)
            times[amp].append((time.perf_counter() - t0) / ns.steps * 1e3)
    for amp in (False, True):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for _ in range(ns.steps):
                step(amp)
        g = groups(prof, ns.steps)
        print(f"{'bf16 autocast' if amp else 'float32':<14} {statistics.median(times[amp]):7.1f} ms/step  "
              f"(profiled, self CPU ms/step: matmul {g['matmul']:.1f}, casts {g['cast']:.1f}, "
              f"other {g['other']:.1f})")
    print(f"speedup {statistics.median(times[False]) / statistics.median(times[True]):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
