"""warnings.simplefilter('error') before training: any warning in the process becomes an exception.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import warnings

warnings.simplefilter("error")
for i in range(10):
    print(f"step {i} loss {step():.4f}")
