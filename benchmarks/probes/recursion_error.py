"""A RecursionError escapes: python's traceback with its repeated-lines count.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
def deep(n):
    return deep(n + 1) + 1


for i in range(4):
    print(f"step {i} loss {step():.4f}")
deep(0)
