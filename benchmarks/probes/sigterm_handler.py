"""The script's own SIGTERM handler saves a checkpoint and exits 3.
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
import sys


def on_term(signum, frame):
    torch.save(model.state_dict(), "ckpt.pt")
    print("saved on SIGTERM", flush=True)
    sys.exit(3)


signal.signal(signal.SIGTERM, on_term)
for i in range(10):
    if i == 6:
        os.kill(os.getpid(), signal.SIGTERM)
    print(f"step {i} loss {step():.4f}", flush=True)
