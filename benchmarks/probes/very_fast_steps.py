"""3000 steps of a 1x1 linear layer: microsecond steps.
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
m = torch.nn.Linear(1, 1)
o = torch.optim.SGD(m.parameters(), lr=0.01)
v = torch.ones(1, 1)
for i in range(3000):
    o.zero_grad()
    loss = (m(v) - 2).pow(2).sum()
    loss.backward()
    o.step()
print(f"{loss.item():.6f}")
