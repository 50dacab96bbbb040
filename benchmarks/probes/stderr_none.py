"""sys.stderr = None, then a warning and an exception: python prints nothing of them.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import sys
import warnings

sys.stderr = None
for i in range(6):
    print(f"step {i} loss {step():.4f}")
warnings.warn("lost warning")
raise RuntimeError("lost error")
