"""Non-UTF-8 bytes in argv: sys.argv as python decodes it (surrogateescape).

args: caf\xe9 \xff\xfe plain
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import os
import sys

print([os.fsencode(a) for a in sys.argv[1:]])
for i in range(6):
    print(f"step {i} loss {step():.4f}")
