"""torch.set_num_threads and interop threads set by the script; it reads them back.
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
before = torch.get_num_threads()
torch.set_num_threads(1)
for i in range(6):
    step()
print(before, torch.get_num_threads(), torch.get_num_interop_threads())
