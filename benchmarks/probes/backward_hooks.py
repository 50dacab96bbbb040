"""Full backward hooks and tensor hooks registered by the script.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
seen = []
model[2].register_full_backward_hook(lambda m, gi, go: seen.append("module"))
model[0].weight.register_hook(lambda g: seen.append("tensor"))
model[0].weight.register_post_accumulate_grad_hook(lambda p: seen.append("post"))
for i in range(6):
    print(f"step {i} loss {step():.4f}")
print(seen.count("module"), seen.count("tensor"), seen.count("post"))
