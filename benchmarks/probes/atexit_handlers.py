"""atexit handlers write a file and print after training, in python's order.
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
import atexit


def first():
    print("first registered, runs last")


def save():
    torch.save(model.state_dict(), "final.pt")
    print("saved at exit")


atexit.register(first)
atexit.register(save)
for i in range(6):
    print(f"step {i} loss {step():.4f}")
