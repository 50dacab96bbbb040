"""os.close(2) mid-run, then a file opened (it gets fd 2): haiprof must write nothing into it.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import os

for i in range(3):
    step()
os.close(2)
f = open("metrics.txt", "w")
for i in range(8):
    f.write(f"{step():.4f}\n")
    f.flush()
f.close()
print(len(open("metrics.txt").read()))
