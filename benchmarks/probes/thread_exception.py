"""An exception in a thread: threading's 'Exception in thread' report, exit 0.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import threading


def boom():
    step()
    raise ValueError("worker failed")


for i in range(4):
    step()
t = threading.Thread(target=boom, name="worker")
t.start()
t.join()
print(f"main loss {step():.4f}")
