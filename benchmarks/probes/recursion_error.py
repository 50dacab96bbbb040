"""A RecursionError escapes: python's traceback with its repeated-lines count.

expected_diff: the count of repeated lines is 13 lower under haiprof (983, python 996): haiprof's launcher frames
    sit below the script's and count toward the recursion limit
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
def deep(n):
    return deep(n + 1) + 1


for i in range(4):
    print(f"step {i} loss {step():.4f}")
deep(0)
