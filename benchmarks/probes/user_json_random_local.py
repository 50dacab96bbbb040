"""User json.py and random.py beside the script, one process: the script sees its own.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import json
import random

for i in range(8):
    print(f"step {i} loss {step():.4f}")
print(getattr(json, "WHO", "stdlib json"), getattr(random, "WHO", "stdlib random"))
