"""The script runs torch.profiler itself around a few steps while haiprof traces its own window.
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

from torch.profiler import ProfilerActivity, profile, record_function

for i in range(3):
    step()
# kineto prints start/stop lines with a timestamp and pid on fd 2 (under python too): kept out of the comparison
saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
os.dup2(devnull, 2)
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for i in range(3):
        with record_function("my_step"):
            step()
os.dup2(saved, 2)
print(any(e.key == "my_step" for e in prof.key_averages()))
for i in range(4):
    print(f"loss {step():.4f}")
