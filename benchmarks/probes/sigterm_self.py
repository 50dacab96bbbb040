"""SIGTERM to itself mid-training: the process dies of SIGTERM.
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
import os
import signal

for i in range(10):
    if i == 6:
        os.kill(os.getpid(), signal.SIGTERM)
    print(f"step {i} loss {step():.4f}", flush=True)
