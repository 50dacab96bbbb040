"""orjson.py, pandas.py and plotly.py of the user's own in the working directory (haiprof's dependencies' names): the
script, which imports none of them, runs and is reported as under python.
"""
import torch
from tiny_model import step   # noqa: F401

for i in range(6):
    print(f"step {i} loss {step():.4f}")
