"""A script that profiles itself with torch.profiler around its whole training loop."""
import torch
from torch.profiler import profile

model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with profile() as prof:
    for i in range(8):
        opt.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        opt.step()
print("events", len(prof.events()) > 0)
