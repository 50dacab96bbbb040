"""traceback.print_stack() at module level: the frames a script sees under python.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import traceback

for i in range(4):
    step()
traceback.print_stack()
