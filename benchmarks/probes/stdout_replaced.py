"""sys.stdout replaced by a StringIO during training, then restored and dumped.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import io
import sys

real, sys.stdout = sys.stdout, io.StringIO()
for i in range(6):
    print(f"step {i} loss {step():.4f}")
captured, sys.stdout = sys.stdout.getvalue(), real
print(captured.upper(), end="")
