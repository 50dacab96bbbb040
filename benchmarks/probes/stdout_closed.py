"""The script closes sys.stdout mid-run and goes on training and writing to stderr.
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
import sys

for i in range(4):
    print(f"step {i} loss {step():.4f}")
sys.stdout.close()
for i in range(4):
    print(f"stderr step {i} loss {step():.4f}", file=sys.stderr)
