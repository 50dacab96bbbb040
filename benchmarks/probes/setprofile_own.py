"""The script installs its own sys.setprofile counting calls of one function of its own.

expected_diff: the script's profile function also sees haiprof's calls on the training thread: the tracing window's
    torch.profiler `step()` calls count as 4 more calls named step (16, python 12); a profile hook sees every Python
    call in its thread, and haiprof's hooks run there
"""
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
