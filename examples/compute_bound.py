"""A compute-bound training job: large dense layers, the whole data set already in memory.

Plain PyTorch, no haiprof import. `haiprof run examples/compute_bound.py` should call it compute-bound.
"""
import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    x = torch.randn(args.steps * args.batch_size, args.width)
    y = torch.randint(0, 10, (args.steps * args.batch_size,))
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True)
    model = nn.Sequential(
        nn.Linear(args.width, 2 * args.width), nn.ReLU(),
        nn.Linear(2 * args.width, 2 * args.width), nn.ReLU(),
        nn.Linear(2 * args.width, args.width), nn.ReLU(),
        nn.Linear(args.width, 10),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
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
