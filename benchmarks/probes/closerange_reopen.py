"""os.closerange(3, 4096) then the script opens its own files and trains on (issue 29.2).
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
os.closerange(3, 4096)
files = [open(f"log{k}.txt", "w") for k in range(4)]
for i in range(8):
    loss = step()
    for f in files:
        f.write(f"{i} {loss:.4f}\n")
        f.flush()
for f in files:
    f.close()
print(open("log0.txt").read() == open("log3.txt").read())
