"""A UserWarning raised every step is shown once; a DeprecationWarning from __main__ too (issue 29.7).
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import warnings

for i in range(8):
    warnings.warn("learning rate looks high")
    warnings.warn("old API", DeprecationWarning)
    print(f"step {i} loss {step():.4f}")
