"""RLIMIT_NOFILE lowered to 64 by the script, which then opens files until refused.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import resource

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
for i in range(6):
    step()
held = []
try:
    while len(held) < 200:
        held.append(open(__file__))
except OSError as e:
    print("refused", e.errno)
for f in held:
    f.close()
print(f"loss {step():.4f}")
