"""copy.deepcopy of the model and the optimizer mid-training; the copies train on.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import copy

for i in range(4):
    step()
model2, opt2 = copy.deepcopy(model), copy.deepcopy(opt)
print(len(model2._forward_hooks), len(model2._backward_hooks), len(opt2.state))
for i in range(4):
    opt2.zero_grad()
    loss = torch.nn.functional.mse_loss(model2(x), y)
    loss.backward()
    opt2.step()
    print(f"copy loss {loss.item():.4f} orig {step():.4f}")
