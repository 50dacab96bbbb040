"""A model run through torch.compile (eager backend: the warning path without inductor's compile time)."""
import torch

m = torch.nn.Linear(8, 1)
cm = torch.compile(m, backend="eager")
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for i in range(8):
    opt.zero_grad()
    cm(torch.randn(4, 8)).sum().backward()
    opt.step()
print("ok")
