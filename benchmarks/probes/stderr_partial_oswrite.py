"""stderr ends without a newline, written with os.write past python's stream: haiprof's lines must not be glued to it.

expected_diff: on a pipe haiprof sees only what python's own stderr stream writes (runtime/stderr_tail.py); bytes
    written to fd 2 directly (os.write, a C library) are not seen, so its verdict line follows on the same line
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import sys

for i in range(6):
    print(f"step {i} loss {step():.4f}")
import os
sys.stderr.flush()
os.write(2, b"progress 100%")
