"""Ctrl-C (SIGINT to itself) mid-training: KeyboardInterrupt traceback, death by SIGINT.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import os
import signal

for i in range(10):
    if i == 6:
        os.kill(os.getpid(), signal.SIGINT)
    print(f"step {i} loss {step():.4f}", flush=True)
