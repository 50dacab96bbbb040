"""Host-bound CPU training: dozens of tiny ops per step, dispatch rather than arithmetic (the CPU analogue of a
launch-bound GPU step), for the tracing window's after-effect test (tests/test_trace_after_effect.py).

Prints one JSON line: the training thread's CPU time per step ("cpu_ns", steady under machine load, where wall
time is not) and the wall time per step ("wall_ns")."""
import json
import sys
import time

import torch
from torch import nn

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 120
torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(*[nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.LayerNorm(16)) for _ in range(12)])
opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
x, y = torch.randn(8, 16), torch.randn(8, 16)
cpu, wall = [], []
for step in range(steps):
    c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
    opt.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    cpu.append(time.thread_time_ns() - c0)
    wall.append(time.perf_counter_ns() - w0)
print(json.dumps({"cpu_ns": cpu, "wall_ns": wall}))
