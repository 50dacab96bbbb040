"""User json.py and random.py in the working directory, two ranks (issue 29.3).

haiprof-args: --nproc-per-node 2
"""
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(32, 8), torch.randn(32, 2)


def step():
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()
import os

import json  # the user's own module (probes/_files)
import random

rank = int(os.environ.get("RANK", "0"))
if os.environ.get("WORLD_SIZE"):
    import torch.distributed as dist
    dist.init_process_group("gloo")
    model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
for i in range(6):
    loss = step()
    if rank == 0:
        print(f"step {i} loss {loss:.4f}")
if rank == 0:
    print(getattr(json, "WHO", "stdlib json"), getattr(random, "WHO", "stdlib random"))
