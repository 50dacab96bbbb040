"""Benchmark workload that times its own steps (so the same number is read with and without haiprof).

--kind compute: the compute-bound example's model (large dense layers); --kind fast: a few-ms step (small MLP).
Prints one JSON line at the end: {"step_s": [...], "cpu_s": ...}, cpu_s being the process's CPU time (all its
threads) from the end of step 10 to the last step's end.
"""
import argparse
import json
import time

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--kind", choices=["compute", "fast"], default="fast")
ap.add_argument("--steps", type=int, default=200)
args = ap.parse_args()
torch.manual_seed(0)
if args.kind == "compute":
    width, batch, depth = 1024, 128, 3
else:
    width, batch, depth = 512, 128, 3
layers = []
for _ in range(depth):
    layers += [nn.Linear(width, width), nn.ReLU()]
model = nn.Sequential(*layers, nn.Linear(width, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
data = [(torch.randn(batch, width), torch.randint(0, 10, (batch,))) for _ in range(8)]
loader = torch.utils.data.DataLoader(data, batch_size=None, shuffle=False)
times = []
step = 0
while step < args.steps:
    for x, y in loader:
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        step += 1
        if step == 10:
            cpu0 = time.process_time()
        if step >= args.steps:
            break
print(json.dumps({"step_s": times, "cpu_s": time.process_time() - cpu0}))
