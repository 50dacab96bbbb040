"""torch.utils.checkpoint around the model: forward re-run inside backward.
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
from torch.utils.checkpoint import checkpoint

for i in range(6):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(checkpoint(model, x, use_reentrant=False), y)
    loss.backward()
    opt.step()
    print(f"step {i} loss {loss.item():.4f}")
