"""stderr ends without a newline: haiprof's lines must not be glued to it (its first line starts its own line).
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import sys

for i in range(6):
    print(f"step {i} loss {step():.4f}")
sys.stderr.write("progress 100%")
sys.stderr.flush()
