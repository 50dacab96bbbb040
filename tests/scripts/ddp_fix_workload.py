"""A 2-rank DDP training job (gloo, CPU) for the compress/bucket fix tests. Plain PyTorch, no haiprof import.

Prints `PROBE {json}` on rank 0: the comm hook DDP itself reports (its logging data) and its bucket size cap.
"""
import json

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(10):
        x = torch.randn(32, 64, generator=g)
        y = (x[:, 0] > 0).long()
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    info = model._get_ddp_logging_data()
    if rank == 0:
        print("PROBE " + json.dumps({"comm_hook": info.get("comm_hook"), "bucket_cap_bytes": model.bucket_bytes_cap,
                                     "world": world, "loss": loss.item()}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
