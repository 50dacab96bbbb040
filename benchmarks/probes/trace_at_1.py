"""--trace-at 1 next to the default window (issue 29.1: two profilers at once crashed export).

haiprof-args: --trace-at 1
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
for i in range(10):
    print(f"step {i} loss {step():.4f}")
