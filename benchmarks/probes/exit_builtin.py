"""The site module's exit(4) (not sys.exit) after training.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
for i in range(6):
    print(f"step {i} loss {step():.4f}")
exit(4)
