"""SIGINT ignored by the script, then sent to itself: python goes on and exits 0 (issue 29.5).
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

signal.signal(signal.SIGINT, signal.SIG_IGN)
for i in range(8):
    if i == 4:
        os.kill(os.getpid(), signal.SIGINT)
    print(f"step {i} loss {step():.4f}")
print("done")
