"""Pickles an instance of a class defined in __main__ and a model with forward hooks.
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
import pickle


class Config:
    def __init__(self, lr):
        self.lr = lr


for i in range(6):
    step()
blob = pickle.dumps((Config(0.05), model))
cfg, m2 = pickle.loads(blob)
print(type(cfg).__module__, type(cfg).__qualname__, cfg.lr)
print(f"{torch.nn.functional.mse_loss(m2(x), y).item():.4f}", m2._forward_hooks, m2._forward_pre_hooks)
