"""copy.deepcopy of the model and the optimizer mid-training; the copies train on.
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
import copy

for i in range(4):
    step()
model2, opt2 = copy.deepcopy(model), copy.deepcopy(opt)
print(len(model2._forward_hooks), len(model2._backward_hooks), len(opt2.state))
for i in range(4):
    opt2.zero_grad()
    loss = torch.nn.functional.mse_loss(model2(x), y)
    loss.backward()
    opt2.step()
    print(f"copy loss {loss.item():.4f} orig {step():.4f}")
