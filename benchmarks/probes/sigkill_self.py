"""SIGKILL to itself mid-training: no report can be written, the status is -9.

no_report: SIGKILL ends the process before anything can be written
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import os
import signal

for i in range(10):
    if i == 6:
        os.kill(os.getpid(), signal.SIGKILL)
    print(f"step {i} loss {step():.4f}", flush=True)
