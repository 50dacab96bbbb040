"""An exception in a thread: threading's 'Exception in thread' report, exit 0.
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
import threading


def boom():
    step()
    raise ValueError("worker failed")


for i in range(4):
    step()
t = threading.Thread(target=boom, name="worker")
t.start()
t.join()
print(f"main loss {step():.4f}")
