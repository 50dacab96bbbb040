"""torch.autograd.grad in a loop with a manual update, no optimizer and no .backward().
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
w = torch.randn(8, 2, requires_grad=True)
for i in range(10):
    loss = (x @ w - y).pow(2).mean()
    (g,) = torch.autograd.grad(loss, w)
    with torch.no_grad():
        w -= 0.1 * g
    print(f"step {i} loss {loss.item():.4f}")
