"""Unnamed threads the script starts get python's numbering (Thread-1, Thread-2).
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

for i in range(6):
    step()
t = threading.Thread(target=lambda: None)
u = threading.Thread(target=step)
print(t.name, u.name, threading.current_thread().name)
t.start(), u.start(), t.join(), u.join()
