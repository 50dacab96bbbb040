"""Python, torch and hash-seeded RNG draws after training: nothing may consume the script's randomness.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import random

random.seed(3)
for i in range(8):
    step()
print(random.random(), torch.rand(2).tolist(), torch.initial_seed(), hash("probe"))
