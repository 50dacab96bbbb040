"""os.fork mid-training: the child prints and returns normally, the parent waits and trains on.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import os
import sys

for i in range(4):
    step()
pid = os.fork()
if pid == 0:
    print("child loss", f"{step():.4f}", flush=True)
    sys.exit(5)
_, status = os.waitpid(pid, 0)
print("child exit", os.waitstatus_to_exitcode(status))
for i in range(4):
    print(f"loss {step():.4f}")
