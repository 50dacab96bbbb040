"""A RecursionError escapes: python's traceback with its repeated-lines count.

expected_diff: the count of repeated lines is 13 lower under haiprof (983, python 996): haiprof's launcher frames
    sit below the script's and count toward the recursion limit
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
def deep(n):
    return deep(n + 1) + 1


for i in range(4):
    print(f"step {i} loss {step():.4f}")
deep(0)
