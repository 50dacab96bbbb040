"""traceback.print_stack() at module level: the frames a script sees under python.

expected_diff: haiprof runs the script in its own process under runpy: print_stack shows haiprof's launcher frames
    above the script's (python shows none); hiding them would need a frame-rewriting hook
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import traceback

for i in range(4):
    step()
traceback.print_stack()
