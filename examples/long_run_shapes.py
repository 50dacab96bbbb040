"""A small training loop with one of the shapes a long run takes, for the whole-run findings.

    haiprof run examples/long_run_shapes.py --shape steady   # nothing to report
    haiprof run examples/long_run_shapes.py --shape drift    # each step a little slower (a growing replay buffer)
    haiprof run examples/long_run_shapes.py --shape stall    # a checkpoint every 50 steps (torch.save of the model)
    haiprof run examples/long_run_shapes.py --shape leak     # the loss kept with its graph every step (a leak)

Plain PyTorch, no haiprof import.
"""
import argparse
import io
import time

import torch
from torch import nn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=["steady", "drift", "stall", "leak"], default="steady")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--width", type=int, default=256)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(args.width, args.width), nn.ReLU(), nn.Linear(args.width, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, args.width), torch.randn(64, 1)
    replay = []     # drift: a buffer the step scans, growing by one batch a step
    kept = []       # leak: outputs kept alive with their autograd graph
    for step in range(args.steps):
        opt.zero_grad()
        out = model(x)
        loss = ((out - y) ** 2).mean()
        if args.shape == "drift":
            replay.append(x.clone())
            loss = loss + 1e-9 * sum(float(b.sum()) for b in replay)   # O(step) Python work each step
            # ... and a growing host-side wait, the larger part: a busy machine moves the Python work above
            # (its cost followed a neighbour's load up and down), not the waiting
            time.sleep(8e-5 * step)
        loss.backward()
        opt.step()
        if args.shape == "stall" and step % 50 == 49:
            buf = io.BytesIO()
            torch.save(model.state_dict(), buf)   # a checkpoint every 50 steps ...
            time.sleep(0.15)                       # ... written to slow storage
        if args.shape == "leak":
            kept.append(torch.randn(256, 1024) + out.sum())   # 1 MiB a step that is never freed
        time.sleep(0.012)  # the rest of the step (waiting on storage, say): a busy machine barely moves it
    print("done", args.shape, len(kept))


if __name__ == "__main__":
    main()
