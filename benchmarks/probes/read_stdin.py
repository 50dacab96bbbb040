"""Reads its configuration from stdin.

stdin: lr=0.1\nsteps=5\n
"""
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(32, 8), torch.randn(32, 2)


def step():
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()
import sys

cfg = dict(line.split("=") for line in sys.stdin.read().split())
for g in opt.param_groups:
    g["lr"] = float(cfg["lr"])
for i in range(int(cfg["steps"])):
    print(f"step {i} loss {step():.4f}")
