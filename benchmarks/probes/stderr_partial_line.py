"""stderr ends without a newline: haiprof's lines must not be glued to it.

expected_diff: haiprof's verdict line follows the script's unterminated last stderr line on the same line: on a pipe
    haiprof cannot see what the script wrote to fd 2 (os.write included), so it cannot know a newline is missing
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import sys

for i in range(6):
    print(f"step {i} loss {step():.4f}")
sys.stderr.write("progress 100%")
sys.stderr.flush()
