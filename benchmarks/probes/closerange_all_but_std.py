"""closerange before any step, dup2 a file onto fd 5, train: fd 5 must hold only the script's bytes.
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

os.closerange(3, 256)
fd = os.open("five.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
if fd != 5:
    os.dup2(fd, 5)
    os.close(fd)
for i in range(10):
    os.write(5, f"{step():.4f}\n".encode())
os.close(5)
print(len(open("five.txt").read().splitlines()))
