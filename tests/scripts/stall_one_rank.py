"""A 2-rank job whose ranks step on their own (no gradient sync): rank 1 stalls every 20 steps, rank 0 never.
Each rank trains its own small model; one barrier at the end. Rank 0 keeps rank 1's pace (its steps take the
stall's share of each period: 7.5 ms more, never a slow step), as a job's ranks do: it is never 100 steps ahead."""
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.set_num_threads(1)
torch.manual_seed(rank)
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
for step in range(int(os.environ.get("STEPS", "360"))):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    time.sleep(0.005 if rank == 1 else 0.0125)   # a steady step of a few ms on a loaded machine too
    if rank == 1 and step % 20 == 19:
        time.sleep(0.15)   # a checkpoint-like wait on this rank only
dist.barrier()
dist.destroy_process_group()
