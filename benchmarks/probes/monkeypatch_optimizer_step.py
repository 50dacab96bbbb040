"""The script monkeypatches optimizer.step (class and instance) to clip and count.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
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
