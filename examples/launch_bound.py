"""A launch-bound training job: a deep stack of tiny layers on small tensors.

Each step runs hundreds of framework ops (linear, layer-norm, activations, residual adds) whose arithmetic takes
less time than dispatching them, so the step is framework overhead rather than compute. Plain PyTorch, no
haiprof import. `haiprof run examples/launch_bound.py` should call it launch-bound.
"""
import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class TinyBlock(nn.Module):
    """A residual block on a handful of features: a few microseconds of math, a dozen ops of dispatch."""

    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return x + torch.tanh(self.fc(self.norm(x))) * 0.5


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--depth", type=int, default=48)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # tiny tensors: threads only add synchronisation
    x = torch.randn(args.steps * args.batch_size, args.width)
    y = torch.randint(0, 4, (args.steps * args.batch_size,))
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True)
    model = nn.Sequential(*[TinyBlock(args.width) for _ in range(args.depth)], nn.Linear(args.width, 4))
    # Adam with torch's CPU default, the per-parameter loop: one small update per tensor (foreach is the CUDA default).
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    ticks = []   # the script's own clock: end of every step
    for step, (xb, yb) in enumerate(loader):
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        ticks.append(time.perf_counter())
        print(f"step {step} loss {loss.item():.6f}")

    # Mean step time by this script's own clock, past warm-up, compilation and the profiler's window (the first
    # quarter of the steps, at least 6): benchmarks/fixes.py compares haiprof's ratios with it.
    skip = max(6, len(ticks) // 4)
    if len(ticks) > skip + 1:
        n = len(ticks) - 1 - skip
        print(f"OWN_CLOCK steps={n} step_ms={(ticks[-1] - ticks[skip]) / n * 1e3:.3f}")


if __name__ == "__main__":
    main()
