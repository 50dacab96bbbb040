"""A torch.jit.script'ed model trained for a few steps.

"""
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(32, 8), torch.randn(32, 2)

smodel = torch.jit.script(model)
for i in range(6):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(smodel(x), y)
    loss.backward()
    opt.step()
    print(f"step {i} loss {loss.item():.4f}")
