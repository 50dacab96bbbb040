"""Reads its configuration from stdin.

stdin: lr=0.1\nsteps=5\n
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import sys

cfg = dict(line.split("=") for line in sys.stdin.read().split())
for g in opt.param_groups:
    g["lr"] = float(cfg["lr"])
for i in range(int(cfg["steps"])):
    print(f"step {i} loss {step():.4f}")
