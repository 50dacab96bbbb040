"""Unnamed threads the script starts get python's numbering (Thread-1, Thread-2).
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import threading

for i in range(6):
    step()
t = threading.Thread(target=lambda: None)
u = threading.Thread(target=step)
print(t.name, u.name, threading.current_thread().name)
t.start(), u.start(), t.join(), u.join()
