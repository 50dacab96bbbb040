"""Silences stderr with sys.stderr = None (as pythonw does), then trains."""
import sys

import torch

sys.stderr = None
m = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for _ in range(16):
    opt.zero_grad()
    m(torch.randn(2, 4)).sum().backward()
    opt.step()
print("done")
