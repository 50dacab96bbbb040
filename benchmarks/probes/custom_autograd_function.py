"""A custom autograd.Function with its own backward, trained for a few steps.
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
class Clamp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        ctx.save_for_backward(t)
        return t.clamp(-1, 1)

    @staticmethod
    def backward(ctx, g):
        (t,) = ctx.saved_tensors
        return g * (t.abs() <= 1)


for i in range(6):
    opt.zero_grad()
    loss = Clamp.apply(model(x)).pow(2).mean()
    loss.backward()
    opt.step()
    print(f"step {i} loss {loss.item():.4f}")
