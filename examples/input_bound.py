"""An input-bound training job: every sample waits on storage latency (a simulated 3 ms read).

Plain PyTorch, no haiprof import. `haiprof run examples/input_bound.py` should call it input-bound.
"""
import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SlowStorageDataset(Dataset):
    """Each __getitem__ pays a fixed read latency, like small files on network storage."""

    def __init__(self, n, dim, latency_s):
        self.n, self.dim, self.latency_s = n, dim, latency_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.latency_s)
        g = torch.Generator().manual_seed(i)
        x = torch.randn(self.dim, generator=g)
        return x, int(x.sum() > 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--latency-ms", type=float, default=3.0)
    ap.add_argument("--workers", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(0)
    ds = SlowStorageDataset(args.batches * args.batch_size, 256, args.latency_ms / 1e3)
    loader = DataLoader(ds, batch_size=args.batch_size, shuffle=False, num_workers=args.workers)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    ticks = []   # the script's own clock: end of every step
    for step, (x, y) in enumerate(loader):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        ticks.append(time.perf_counter())
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")

    # Mean step time by this script's own clock, past warm-up, compilation and the profiler's window (the first
    # quarter of the steps, at least 6): benchmarks/fixes.py compares haiprof's ratios with it.
    skip = max(6, len(ticks) // 4)
    if len(ticks) > skip + 1:
        n = len(ticks) - 1 - skip
        print(f"OWN_CLOCK steps={n} step_ms={(ticks[-1] - ticks[skip]) / n * 1e3:.3f}")


if __name__ == "__main__":
    main()
