"""--trace-every far shorter than a window: windows asked for back to back.

haiprof-args: --trace-every 0.0001
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
for i in range(14):
    print(f"step {i} loss {step():.4f}")
