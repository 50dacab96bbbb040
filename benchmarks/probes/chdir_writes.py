"""os.chdir into a new directory mid-run and writes a checkpoint there.
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

for i in range(4):
    step()
os.makedirs("sub/deeper")
os.chdir("sub/deeper")
for i in range(4):
    loss = step()
with open("loss.txt", "w") as f:
    f.write(f"{loss:.4f}\n")
print(os.path.basename(os.getcwd()))
