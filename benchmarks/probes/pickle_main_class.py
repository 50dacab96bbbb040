"""Pickles an instance of a class defined in __main__ and a model with forward hooks.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
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
