"""About 4 MB of stdout and 1 MB of stderr while training.
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

for i in range(6):
    step()
    sys.stdout.write(("x" * 99 + "\n") * 7000)
    sys.stderr.write(("e" * 99 + "\n") * 1700)
print("end")
