"""umask 077 set by the script; the modes of the files it then writes.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import os
import stat

os.umask(0o077)
for i in range(6):
    step()
torch.save(model.state_dict(), "weights.pt")
with open("notes.txt", "w") as f:
    f.write("ok\n")
print(oct(stat.S_IMODE(os.stat("weights.pt").st_mode)), oct(stat.S_IMODE(os.stat("notes.txt").st_mode)))
