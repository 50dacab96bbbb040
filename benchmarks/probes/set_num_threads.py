"""torch.set_num_threads and interop threads set by the script; it reads them back.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
before = torch.get_num_threads()
torch.set_num_threads(1)
for i in range(6):
    step()
print(before, torch.get_num_threads(), torch.get_num_interop_threads())
