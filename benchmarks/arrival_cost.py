"""What the arrival timestamps at DDP's gradient sync cost: the post-accumulate-grad hook per parameter
(collectors/ddp_comm.py) that stamps the moment a rank's last gradient is ready, its arrival at the sync; the
completion is the end of backward, already timed. The job merge separates the wait for the last arrival from the
transfer with them (analyzers/distributed.comm_split, analyzers/culprit.py).

    python -m benchmarks.arrival_cost [--rounds 9] [--steps 30]

On examples/ddp_comm_bound.py's model (six 1024x1024 linear layers, 14 parameters, batch 32) and on a model of
1,000 one-element parameters (the per-parameter cost's worst case), one process: backward with the observer's
hooks installed and removed in alternation, `--rounds` rounds of `--steps` backward passes (the minimum per model),
the training thread's CPU time with torch on one thread (the machine's load stays out). Printed: µs per sync (one
per backward) and per parameter hook, the ratio to backward's own time, and to the sync's own time in the recorded
2-rank gloo job (tests/data/ddp_rank200, the same model at 2 layers: its transfer per step, the minimum of the
ranks' exposed sync).
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

from haiprof.collectors.ddp_comm import DDPCommObserver

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "tests" / "data" / "ddp_rank200"


class _Wrapped:
    """What DDPCommObserver._watch reads of a DDP model: its module (weak-referenceable)."""

    def __init__(self, module):
        self.module = module


def _model(kind: str) -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    if kind == "ddp_comm_bound":
        layers = []
        for _ in range(6):
            layers += [nn.Linear(1024, 1024), nn.ReLU()]
        return nn.Sequential(*layers, nn.Linear(1024, 10)), torch.randn(32, 1024)
    return _Scalars(1000), torch.ones(1)


class _Scalars(nn.Module):
    """n one-element parameters and almost no arithmetic: backward is the autograd engine's per-parameter work,
    where a per-parameter hook shows most."""

    def __init__(self, n: int):
        super().__init__()
        self.ps = nn.ParameterList([nn.Parameter(torch.ones(1)) for _ in range(n)])

    def forward(self, x):
        return torch.stack([p * x for p in self.ps])


def _backward_cpu_s(model, x, steps: int) -> float:
    """Training-thread CPU seconds per backward pass."""
    t = time.thread_time()
    for _ in range(steps):
        model(x).sum().backward()
    return (time.thread_time() - t) / steps


def measure(kind: str, rounds: int, steps: int) -> dict:
    model, x = _model(kind)
    params = sum(1 for p in model.parameters() if p.requires_grad)
    _backward_cpu_s(model, x, 3)   # warm-up
    plain, hooked = [], []
    for _ in range(rounds):
        plain.append(_backward_cpu_s(model, x, steps))
        obs = DDPCommObserver(lambda rec: None)
        obs._watch(_Wrapped(model))
        hooked.append(_backward_cpu_s(model, x, steps))
        obs._after_backward(time.monotonic_ns())
        for undo in obs._undo:
            undo()
    # the minimum of each: CPU-bound work on a loaded machine only ever runs slower than its own cost
    p, h = min(plain), min(hooked)
    return {"model": kind, "params": params, "backward_ms": p * 1e3, "hooked_ms": h * 1e3,
            "per_sync_us": (h - p) * 1e6, "per_param_us": (h - p) * 1e6 / params,
            "median_diff_us": (statistics.median(hooked) - statistics.median(plain)) * 1e6}


def recorded_transfer_ms() -> float | None:
    """The sync's own time in the recorded 2-rank job: transfer ms per step (the ranks' minimum exposed sync)."""
    if not TEMPLATE.is_dir():
        return None
    from haiprof.analysis.ranks import analyze_job
    from haiprof.rundir import RunDir
    with tempfile.TemporaryDirectory() as tmp:
        job = Path(tmp) / "job"
        shutil.copytree(TEMPLATE, job)
        return analyze_job(RunDir(job)).summary["distributed"]["comm"].get("transfer_ms_per_step")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--steps", type=int, default=30)
    a = ap.parse_args()
    import os
    torch.set_num_threads(1)   # the matmuls on this thread: its CPU time is the whole backward's
    transfer = recorded_transfer_ms()
    print(f"rounds {a.rounds} x {a.steps} backward passes, alternated; load average {os.getloadavg()[0]:.1f}; "
          f"recorded job's sync (transfer) {transfer:.2f} ms/step" if transfer else "no recorded job")
    print(f"{'model':>15} {'params':>6} {'backward ms':>11} {'+hooks ms':>9} {'µs/sync':>8} {'µs/param':>8} "
          f"{'of backward':>11} {'of the sync':>11} {'medians µs':>10}")
    rows = {}
    for kind in ("ddp_comm_bound", "scalars"):
        m = rows[kind] = measure(kind, a.rounds, a.steps)
        of_sync = f"{m['per_sync_us'] / (transfer * 1e3):.2e}" if transfer else "n/a"
        print(f"{m['model']:>15} {m['params']:>6} {m['backward_ms']:>11.2f} {m['hooked_ms']:>9.2f} "
              f"{m['per_sync_us']:>8.1f} {m['per_param_us']:>8.2f} "
              f"{m['per_sync_us'] / (m['backward_ms'] * 1e3):>11.2e} "
              f"{of_sync:>11} {m['median_diff_us']:>10.1f}", flush=True)

    # a hook's own cost is microseconds: on a 40 ms backward the direct difference is within the load's noise, so
    # the per-sync cost of the real model is its parameter count times the per-parameter cost resolved above
    per_param, real = rows["scalars"]["per_param_us"], rows["ddp_comm_bound"]
    per_sync = per_param * real["params"]
    print(f"per sync on ddp_comm_bound's model: {real['params']} x {per_param:.2f} µs = {per_sync:.0f} µs, "
          f"{100 * per_sync / (real['backward_ms'] * 1e3):.2f}% of its backward"
          + (f", {100 * per_sync / (transfer * 1e3):.2f}% of the recorded sync" if transfer else ""))


if __name__ == "__main__":
    main()
