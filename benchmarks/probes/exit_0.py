"""sys.exit(0) after training: the status and any message as python's.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import sys

for i in range(6):
    print(f"step {i} loss {step():.4f}")
sys.exit(0)
