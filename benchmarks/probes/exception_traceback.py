"""An uncaught exception mid-training: python's traceback text, exactly, exit 1.
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
def check(loss):
    if loss < 10:
        raise ValueError(f"loss {loss:.4f} is suspicious")


for i in range(8):
    loss = step()
    print(f"step {i} loss {loss:.4f}")
    if i == 5:
        check(loss)
