"""sys.stderr set to a log file: its warnings and traceback land there, none of haiprof's lines.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import sys
import warnings

sys.stderr = open("err.log", "w")
for i in range(6):
    print(f"step {i} loss {step():.4f}")
warnings.warn("lr looks high")
raise SystemExit("stopping: " + "see err.log")
