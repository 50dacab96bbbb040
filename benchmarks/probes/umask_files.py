"""umask 077 set by the script; the modes of the files it then writes.
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
import stat

os.umask(0o077)
for i in range(6):
    step()
torch.save(model.state_dict(), "weights.pt")
with open("notes.txt", "w") as f:
    f.write("ok\n")
print(oct(stat.S_IMODE(os.stat("weights.pt").st_mode)), oct(stat.S_IMODE(os.stat("notes.txt").st_mode)))
