"""os.fork mid-training: the child prints and returns normally, the parent waits and trains on.
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
import sys

for i in range(4):
    step()
pid = os.fork()
if pid == 0:
    print("child loss", f"{step():.4f}", flush=True)
    sys.exit(5)
_, status = os.waitpid(pid, 0)
print("child exit", os.waitstatus_to_exitcode(status))
for i in range(4):
    print(f"loss {step():.4f}")
