"""The script closes sys.stdout mid-run and goes on training and writing to stderr.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import sys

for i in range(4):
    print(f"step {i} loss {step():.4f}")
sys.stdout.close()
for i in range(4):
    print(f"stderr step {i} loss {step():.4f}", file=sys.stderr)
