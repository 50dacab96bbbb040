"""A sharded data-parallel job whose communication can dominate: FSDP2 (fully_shard) over six 1024x1024 linear
layers, gloo on CPU.

Plain PyTorch, no haiprof import; start it like any FSDP script:

    torchrun --nproc-per-node 2 examples/fsdp_comm_bound.py --steps 20
    haiprof run --nproc-per-node 2 examples/fsdp_comm_bound.py --steps 20

Each layer is its own FSDP unit: its parameters are all-gathered before its forward and again before its backward
(reshard after forward, FSDP's default), its gradients reduce-scattered after. With gloo every collective blocks
the training thread; `--prefetch` issues the next layer's all-gather asynchronously (FSDP's explicit forward
prefetching) so part of it overlaps the current layer's compute. On an ordinary loopback the 25 MB of parameters
moved about three times a step are cheap next to the compute; on a 1 Gbit/s link (see benchmarks/shaped_net.py)
they are the larger part of every step. `--slow-rank R --slow-ms MS` makes rank R's loading slower (a straggler);
`--wrapper` shards with the older FullyShardedDataParallel wrapper instead of fully_shard.
"""
import argparse
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
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
    ap.add_argument("--prefetch", action="store_true", help="all-gather the next layer asynchronously")
    ap.add_argument("--wrapper", action="store_true", help="FullyShardedDataParallel (FSDP1) instead of fully_shard")
    ap.add_argument("--slow-rank", type=int, default=-1)
    ap.add_argument("--slow-ms", type=float, default=0.0, help="extra loading time per batch on --slow-rank")
    args = ap.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    blocks = []
    for _ in range(args.layers):
        blocks.append(nn.Sequential(nn.Linear(args.width, args.width), nn.ReLU()))
    if args.wrapper:   # the older FullyShardedDataParallel wrapper; on CPU it needs device_id given
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        cpu = torch.device("cpu")
        model = FSDP(nn.Sequential(*[FSDP(b, device_id=cpu) for b in blocks], nn.Linear(args.width, 10)),
                     device_id=cpu)
    else:
        model = nn.Sequential(*blocks, nn.Linear(args.width, 10))
        for block in blocks:
            fully_shard(block)
        fully_shard(model)
    if args.prefetch and not args.wrapper:
        for block, nxt in zip(blocks, blocks[1:]):
            block.set_modules_to_forward_prefetch([nxt])
        for block in blocks:
            block._set_unshard_async_op(True)
    delay = args.slow_ms / 1e3 / args.batch_size if rank == args.slow_rank else 0.0
    data = Batches(args.steps * args.batch_size, args.width, delay, seed=rank)
    loader = DataLoader(data, batch_size=args.batch_size, num_workers=args.workers)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    t0 = time.perf_counter()
    for xb, yb in loader:
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
