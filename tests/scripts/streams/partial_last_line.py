"""Trains a few steps, then ends its stderr without a newline (a progress line), as a batch job's log may.
argv[1] says how: flushed (default), left in python's buffer for its exit, by print(end=""), ended by a carriage
return (a progress bar's), as a whole line, or on stdout (left in its buffer)."""
import sys

import torch

model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(6):
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
how = sys.argv[1] if len(sys.argv) > 1 else "flushed"
if how == "print-end":
    print("progress 100%", end="", file=sys.stderr)
elif how == "carriage-return":
    sys.stderr.write("progress 100%\r")
elif how == "stdout":
    print("progress 100%", end="")
elif how == "whole-line":
    sys.stderr.write("progress 100%\n")
else:
    sys.stderr.write("progress 100%")
if how not in ("unflushed", "stdout"):
    sys.stderr.flush()
