"""faulthandler: its state as python leaves it, enabled by the script, dumping to a file.

expected_diff: the dumped stack shows haiprof's launcher frames below the script's <module> frame (12 File lines,
    python 1): the script runs inside haiprof's call stack, as with traceback_print_stack
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import faulthandler

print("enabled at start", faulthandler.is_enabled())
faulthandler.enable()
for i in range(6):
    step()
with open("dump.txt", "w") as f:
    faulthandler.dump_traceback(f, all_threads=False)
print(open("dump.txt").read().count("File"))
