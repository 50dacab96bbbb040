"""The script's own SIGTERM handler saves a checkpoint and exits 3.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import os
import signal
import sys


def on_term(signum, frame):
    torch.save(model.state_dict(), "ckpt.pt")
    print("saved on SIGTERM", flush=True)
    sys.exit(3)


signal.signal(signal.SIGTERM, on_term)
for i in range(10):
    if i == 6:
        os.kill(os.getpid(), signal.SIGTERM)
    print(f"step {i} loss {step():.4f}", flush=True)
