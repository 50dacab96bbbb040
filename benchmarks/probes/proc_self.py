"""Reads /proc/self: its name, status and stdio targets.
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

for i in range(6):
    step()
status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\t" in line)
print(status["Name"].strip(), status["State"].strip()[:1])
print([os.readlink(f"/proc/self/fd/{n}").split(":")[0] for n in (0, 1, 2)])
print(os.readlink("/proc/self/exe") == os.path.realpath(__import__("sys").executable))
