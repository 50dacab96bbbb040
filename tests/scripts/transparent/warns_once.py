"""Warns from one line before, during and after training and from an atexit handler: python's default filter
shows it once per location, whatever haiprof does with warnings.filters meanwhile. With `profile` as argv[1] the
training runs inside haiprof.profile() (argv[2]: its run directory) and the script warns on after the block."""
import atexit
import contextlib
import sys
import warnings

import torch


def warn():
    warnings.warn("x")


def train():
    for step in range(8):
        warn()
        opt.zero_grad()
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
        warn()


warn()
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
if sys.argv[1:2] == ["profile"]:
    import haiprof
    block = haiprof.profile(out=sys.argv[2])
else:
    block = contextlib.nullcontext()
with block:
    train()
print("trained", flush=True)
atexit.register(warn)
warn()
