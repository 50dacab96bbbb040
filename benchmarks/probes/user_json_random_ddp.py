"""User json.py and random.py in the working directory, two ranks (issue 29.3).

haiprof-args: --nproc-per-node 2
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
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
