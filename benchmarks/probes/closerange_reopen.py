"""os.closerange(3, 4096) then the script opens its own files and trains on (issue 29.2).
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import os

for i in range(3):
    step()
os.closerange(3, 4096)
files = [open(f"log{k}.txt", "w") for k in range(4)]
for i in range(8):
    loss = step()
    for f in files:
        f.write(f"{i} {loss:.4f}\n")
        f.flush()
for f in files:
    f.close()
print(open("log0.txt").read() == open("log3.txt").read())
