"""Data-parallel training without DDP: each rank averages its gradients itself with dist.all_reduce after backward
(one call per parameter, or one flat buffer with --flat; --async-op issues them all with async_op=True, then waits). `--late-rank R --late-ms MS` makes rank R sleep MS ms
before its all_reduce calls, every step: the others wait for it inside their first all_reduce.

    torchrun --nproc-per-node 2 tests/scripts/explicit_allreduce.py --late-rank 1 --late-ms 150
"""
import argparse
import time

import torch
import torch.distributed as dist
from torch import nn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--late-rank", type=int, default=-1)
    ap.add_argument("--late-ms", type=float, default=0.0)
    ap.add_argument("--flat", action="store_true", help="one all_reduce over a flat buffer of all gradients")
    ap.add_argument("--async-op", action="store_true", help="issue every all_reduce async, then wait for them")
    args = ap.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(args.width, args.width), nn.ReLU(), nn.Linear(args.width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(args.batch_size, args.width, generator=g)
    y = torch.randint(0, 10, (args.batch_size,), generator=g)
    for _ in range(args.steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        if rank == args.late_rank:
            time.sleep(args.late_ms / 1e3)
        grads = [p.grad for p in model.parameters()]
        if args.flat:
            flat = torch.cat([t.reshape(-1) for t in grads])
            dist.all_reduce(flat)
            flat /= world
            i = 0
            for t in grads:
                t.copy_(flat[i:i + t.numel()].view_as(t))
                i += t.numel()
        elif args.async_op:
            for work in [dist.all_reduce(t, async_op=True) for t in grads]:
                work.wait()
            for t in grads:
                t /= world
        else:
            for t in grads:
                dist.all_reduce(t)
                t /= world
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
