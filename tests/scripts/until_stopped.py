"""Trains until the file named by argv[1] exists (a job someone profiles while it runs), then prints its steps.
Under torchrun every rank trains a tiny DDP model (gloo) so that the ranks step together."""
import os
import sys
import time

import torch

stop = sys.argv[1]
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
if "RANK" in os.environ:
    import torch.distributed as dist
    dist.init_process_group("gloo")
    model = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
steps = 0
while True:
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
    steps += 1
    time.sleep(0.01)
    if steps % 10 == 0:
        done = torch.tensor([float(os.path.exists(stop))])
        if "RANK" in os.environ:
            torch.distributed.all_reduce(done)   # every rank stops after the same step
        if done.item():
            break
print("steps", steps, flush=True)
if "RANK" in os.environ:
    torch.distributed.destroy_process_group()
