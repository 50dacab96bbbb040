"""The script monkeypatches optimizer.step (class and instance) to clip and count.
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
calls = []
orig = torch.optim.SGD.step


def clipped(self, *a, **k):
    calls.append("class")
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
    return orig(self, *a, **k)


torch.optim.SGD.step = clipped
inst = opt.step
opt.step = lambda *a, **k: (calls.append("inst"), inst(*a, **k))[1]
for i in range(6):
    print(f"step {i} loss {step():.4f}")
print(calls.count("class"), calls.count("inst"))
