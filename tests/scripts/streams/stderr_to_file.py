"""Sends its own stderr to a log file, as many training scripts do, then trains."""
import sys

import torch

sys.stderr = open(sys.argv[1], "w")
print("to the log", file=sys.stderr)
m = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for _ in range(16):
    opt.zero_grad()
    m(torch.randn(2, 4)).sum().backward()
    opt.step()
print("done")
