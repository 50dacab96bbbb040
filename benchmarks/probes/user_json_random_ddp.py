"""User json.py and random.py in the working directory, two ranks (issue 29.3).

expected_diff: the script's own `import json` gets the standard library's on haiprof's ranks ("stdlib json stdlib
    random"; python prints "user json user random", as a plain torchrun worker, `python train.py`, would): each rank
    imports haiprof and torch before the script's folder is on sys.path (rank_entry, so a user module cannot break
    them), and the script then finds those names already imported; in one process (`haiprof run` from the script's
    folder) the user's modules win (user_json_random_local)

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
