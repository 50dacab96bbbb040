"""A data-parallel job whose gradient sync can dominate: DDP over six 1024x1024 linear layers, gloo on CPU.

Plain PyTorch, no haiprof import; start it like any DDP script:

    torchrun --nproc-per-node 2 examples/ddp_comm_bound.py --steps 20
    haiprof run --nproc-per-node 2 examples/ddp_comm_bound.py --steps 20

On an ordinary loopback the 25 MB gradient allreduce is cheap next to the compute; on a 1 Gbit/s link (see
benchmarks/shaped_net.py) it is the larger part of every step. Fault and skew knobs: `--slow-rank R --slow-ms MS`
makes rank R's loading slower (a straggler), `--die-rank R --die-step N` kills rank R with SIGKILL at step N,
`--abort-at-exit-rank R` makes rank R abort at interpreter exit after training (a teardown crash), `--hog-rank R`
starts `--hogs N` busy processes on rank R's CPU core (each rank pinned to a core of its own: other jobs on its CPU),
`--pause-rank R --pause-ms MS --pause-every N` makes rank R pause MS ms every N steps between steps (as a garbage
collection or a checkpoint would). `--compress`
registers DDP's fp16 compression hook (the `compress` fix done by hand); `--workers N` uses DataLoader workers.
"""
import argparse
import atexit
import os
import signal
import subprocess
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset


class Batches(Dataset):
    """Random samples; `delay_s` simulates slow decoding on this rank only."""

    def __init__(self, n, width, delay_s=0.0, seed=0):
        self.n, self.width, self.delay_s = n, width, delay_s
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(64, width, generator=g)
        self.y = torch.randint(0, 10, (64,), generator=g)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.delay_s:
            time.sleep(self.delay_s)
        return self.x[i % 64], self.y[i % 64]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--slow-rank", type=int, default=-1)
    ap.add_argument("--slow-ms", type=float, default=0.0, help="extra loading time per batch on --slow-rank")
    ap.add_argument("--die-rank", type=int, default=-1)
    ap.add_argument("--die-step", type=int, default=3)
    ap.add_argument("--abort-at-exit-rank", type=int, default=-1,
                    help="this rank aborts (SIGABRT) at interpreter exit, after training: a teardown crash")
    ap.add_argument("--hog-rank", type=int, default=-1, help="busy processes share this rank's CPU core")
    ap.add_argument("--hogs", type=int, default=1, help="how many busy processes --hog-rank gets")
    ap.add_argument("--pause-rank", type=int, default=-1)
    ap.add_argument("--pause-ms", type=float, default=0.0, help="pause between steps on --pause-rank")
    ap.add_argument("--pause-every", type=int, default=3)
    ap.add_argument("--compress", action="store_true", help="fp16 gradient compression hook")
    args = ap.parse_args()

    if args.hog_rank >= 0:   # before the process group: gloo's threads inherit the core
        rank = int(os.environ["RANK"])
        cores = sorted(os.sched_getaffinity(0))
        core = cores[rank % len(cores)]
        os.sched_setaffinity(0, {core})
        if rank == args.hog_rank:
            for _ in range(args.hogs):   # each spins until its parent (this rank) is gone, however the rank ends
                hog = subprocess.Popen([sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{core}}})\n"
                                        f"while os.getppid() == {os.getpid()}: pass"])
                atexit.register(hog.kill)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if rank == args.abort_at_exit_rank:
        atexit.register(os.abort)
    torch.manual_seed(0)
    layers = []
    for _ in range(args.layers):
        layers += [nn.Linear(args.width, args.width), nn.ReLU()]
    model = DDP(nn.Sequential(*layers, nn.Linear(args.width, 10)))
    if args.compress:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        model.register_comm_hook(dist.group.WORLD, default_hooks.fp16_compress_hook)
    delay = args.slow_ms / 1e3 / args.batch_size if rank == args.slow_rank else 0.0
    data = Batches(args.steps * args.batch_size, args.width, delay, seed=rank)
    loader = DataLoader(data, batch_size=args.batch_size, num_workers=args.workers)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    t0 = time.perf_counter()
    for step, (xb, yb) in enumerate(loader):
        if rank == args.die_rank and step == args.die_step:
            os.kill(os.getpid(), signal.SIGKILL)
        if rank == args.pause_rank and step % args.pause_every == args.pause_every - 1:
            time.sleep(args.pause_ms / 1e3)
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
    elapsed = time.perf_counter() - t0
    if rank == 0:
        print(f"{args.steps} steps, {1e3 * elapsed / args.steps:.0f} ms/step")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
