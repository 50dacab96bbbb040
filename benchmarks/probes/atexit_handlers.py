"""atexit handlers write a file and print after training, in python's order.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
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
