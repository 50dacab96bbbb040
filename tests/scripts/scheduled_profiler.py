"""A script that profiles itself with a scheduled torch.profiler (wait, warm-up, active steps), as the PyTorch
profiler recipe shows: its profiler is not enabled during the wait/warm-up steps."""
import torch
from torch.profiler import profile, schedule

model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=1)) as prof:
    for i in range(12):
        opt.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        opt.step()
        prof.step()
print("events", len(prof.events()) > 0)
