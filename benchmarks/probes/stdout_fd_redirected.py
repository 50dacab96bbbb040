"""fd 1 dup2'd to a file mid-run: later prints go to the file.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import os
import sys

print("before", flush=True)
fd = os.open("out.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.dup2(fd, 1)
for i in range(6):
    print(f"step {i} loss {step():.4f}", flush=True)
