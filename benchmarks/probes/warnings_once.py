"""A UserWarning raised every step is shown once; a DeprecationWarning from __main__ too (issue 29.7).
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
import warnings

for i in range(8):
    warnings.warn("learning rate looks high")
    warnings.warn("old API", DeprecationWarning)
    print(f"step {i} loss {step():.4f}")
