"""os._exit(7) after training with output still buffered: python loses it, so must haiprof.

no_report: os._exit ends the process without any cleanup
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import os

for i in range(8):
    print(f"step {i} loss {step():.4f}")
os._exit(7)
