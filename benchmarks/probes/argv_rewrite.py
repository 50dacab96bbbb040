"""The script rewrites sys.argv and parses it with argparse.

args: --epochs 2 --name run1
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
import argparse
import sys

sys.argv = sys.argv[:1] + ["--lr", "0.2"] + sys.argv[1:]
p = argparse.ArgumentParser()
p.add_argument("--lr", type=float)
p.add_argument("--epochs", type=int)
p.add_argument("--name")
ns = p.parse_args()
print(vars(ns), p.prog)
for i in range(ns.epochs * 3):
    print(f"step {i} loss {step():.4f}")
