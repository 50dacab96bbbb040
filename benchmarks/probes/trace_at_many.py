"""--trace-at on consecutive steps with 2-step windows that overlap each other and the default.

haiprof-args: --trace-at 1,2,3,4 --trace-steps 2
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
for i in range(12):
    print(f"step {i} loss {step():.4f}")
