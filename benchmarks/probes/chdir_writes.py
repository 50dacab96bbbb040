"""os.chdir into a new directory mid-run and writes a checkpoint there.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import os

for i in range(4):
    step()
os.makedirs("sub/deeper")
os.chdir("sub/deeper")
for i in range(4):
    loss = step()
with open("loss.txt", "w") as f:
    f.write(f"{loss:.4f}\n")
print(os.path.basename(os.getcwd()))
