"""The script's own sys.excepthook must print the uncaught exception, not python's default.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import sys


def hook(kind, value, tb):
    print(f"custom hook: {kind.__name__}: {value}", file=sys.stderr)


sys.excepthook = hook
for i in range(6):
    print(f"step {i} loss {step():.4f}")
raise RuntimeError("diverged")
