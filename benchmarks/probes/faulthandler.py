"""faulthandler: its state as python leaves it, enabled by the script, dumping to a file.
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
