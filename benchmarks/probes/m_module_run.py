"""Runs as `-m` (a module in the working directory): __name__, __spec__ and sys.argv as python -m.

module: m_module_run
args: a b
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import sys

print(__name__, __spec__.name, sys.argv[1:], sys.argv[0].endswith("m_module_run.py"))
for i in range(6):
    print(f"step {i} loss {step():.4f}")
