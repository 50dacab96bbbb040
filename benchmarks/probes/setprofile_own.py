"""The script installs its own sys.setprofile counting calls of one function of its own (haiprof's step callback
runs with it paused: the count is the script's, collectors/script_profile.py)."""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import sys

calls = [0]


def prof(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "step":
        calls[0] += 1


sys.setprofile(prof)
for i in range(6):
    step()
sys.setprofile(None)
print("step calls", calls[0])
