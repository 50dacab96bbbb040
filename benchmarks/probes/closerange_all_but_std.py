"""closerange before any step, dup2 a file onto fd 5, train: fd 5 must hold only the script's bytes.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import os

os.closerange(3, 256)
fd = os.open("five.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
if fd != 5:
    os.dup2(fd, 5)
    os.close(fd)
for i in range(10):
    os.write(5, f"{step():.4f}\n".encode())
os.close(5)
print(len(open("five.txt").read().splitlines()))
