"""Trains a few steps, then ends its stderr without a newline (a progress line), as a batch job's log may."""
import sys

import torch

model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(6):
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
sys.stderr.write("progress 100%")
sys.stderr.flush()
