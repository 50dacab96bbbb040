"""An uncaught exception mid-training: python's traceback text, exactly, exit 1.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
def check(loss):
    if loss < 10:
        raise ValueError(f"loss {loss:.4f} is suspicious")


for i in range(8):
    loss = step()
    print(f"step {i} loss {loss:.4f}")
    if i == 5:
        check(loss)
