"""os.close(2) mid-run, then a file opened (it gets fd 2): haiprof must write nothing into it.
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

for i in range(3):
    step()
os.close(2)
f = open("metrics.txt", "w")
for i in range(8):
    f.write(f"{step():.4f}\n")
    f.flush()
f.close()
print(len(open("metrics.txt").read()))
