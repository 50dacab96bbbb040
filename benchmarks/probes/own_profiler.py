"""The script runs torch.profiler itself around a few steps while haiprof traces its own window.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import os

from torch.profiler import ProfilerActivity, profile, record_function

for i in range(3):
    step()
# kineto prints start/stop lines with a timestamp and pid on fd 2 (under python too): kept out of the comparison
saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
os.dup2(devnull, 2)
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for i in range(3):
        with record_function("my_step"):
            step()
os.dup2(saved, 2)
print(any(e.key == "my_step" for e in prof.key_averages()))
for i in range(4):
    print(f"loss {step():.4f}")
