"""Runs as `-m` (a module in the working directory): __name__, __spec__ and sys.argv as python -m.

module: m_module_run
args: a b
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

print(__name__, __spec__.name, sys.argv[1:], sys.argv[0].endswith("m_module_run.py"))
for i in range(6):
    print(f"step {i} loss {step():.4f}")
