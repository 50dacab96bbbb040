"""A small real training job for the fix tests. Plain PyTorch, no haiprof import.

It prints one line `PROBE {json}` at the end with what the script itself observes of its own objects, so the tests
can check that a fix really took effect: which processes produced the batches (DataLoader workers), the optimizer's
foreach/fused flags, whether autocast was on inside the model's forward and the dtype of its matmuls, whether the
model's forward is a compiled one. Data: each sample waits `--latency-ms` (storage), then is generated from its
index, so every run sees the same batches in the same order, with or without workers.
"""
import argparse
import json
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SlowDataset(Dataset):
    def __init__(self, n, dim, latency_s):
        self.n, self.dim, self.latency_s = n, dim, latency_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.latency_s)
        g = torch.Generator().manual_seed(i)
        x = torch.randn(self.dim, generator=g)
        return x, int(x[:4].sum() > 0), os.getpid()


class Net(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, 64), nn.Linear(64, 2)
        self.seen = {"autocast": set(), "hidden_dtype": set()}

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        if not torch.compiler.is_compiling():
            self.seen["autocast"].add(torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda"))
            self.seen["hidden_dtype"].add(str(h.dtype))
        return self.fc2(h)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--latency-ms", type=float, default=2.0)
    ap.add_argument("--optim", default="adam")
    ap.add_argument("--foreach", choices=["false", "true"], help="pass foreach= to the optimizer explicitly")
    ap.add_argument("--eval-first", action="store_true",
                    help="evaluate (eval mode, no_grad) before training, as nanoGPT's estimate_loss does")
    args = ap.parse_args()
    torch.manual_seed(0)
    dim = 32
    # storage slower on one day than another (same command line): stands in for a baseline under other conditions
    latency_ms = args.latency_ms + float(os.environ.get("FIX_WORKLOAD_EXTRA_LATENCY_MS") or 0)
    loader = DataLoader(SlowDataset(args.steps * args.batch_size, dim, latency_ms / 1e3),
                        batch_size=args.batch_size, shuffle=True)
    model = Net(dim)
    kw = {} if args.foreach is None else {"foreach": args.foreach == "true"}
    opt = (torch.optim.Adam(model.parameters(), lr=1e-2, **kw) if args.optim == "adam"
           else torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, **kw))
    if args.eval_first:
        model.eval()
        with torch.no_grad():
            model(torch.randn(4, dim))
        model.train()
    pids = set()
    # A step made slower from outside (same command line): stands in for a fix that slows the step.
    extra_s = float(os.environ.get("FIX_WORKLOAD_STEP_SLEEP_MS") or 0) / 1e3
    for x, y, pid in loader:
        pids.update(pid.tolist())
        time.sleep(extra_s)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    group = opt.param_groups[0]
    probe = {
        "main_pid": os.getpid(), "batch_pids": sorted(pids), "num_workers": loader.num_workers,
        "persistent_workers": loader.persistent_workers, "prefetch_factor": loader.prefetch_factor,
        "optimizer": type(opt).__name__, "foreach": group.get("foreach"), "fused": group.get("fused"),
        "autocast": sorted(model.seen["autocast"]), "hidden_dtype": sorted(model.seen["hidden_dtype"]),
        "forward_compiled": hasattr(model.__dict__.get("forward"), "_torchdynamo_orig_callable"),
        "final_loss": loss.item(),
    }
    print("PROBE " + json.dumps(probe))


if __name__ == "__main__":
    main()
