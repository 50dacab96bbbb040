"""Inference only: eval() under torch.no_grad and inference_mode, never a backward.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
model.eval()
with torch.no_grad():
    for i in range(20):
        out = model(x)
with torch.inference_mode():
    out2 = model(x)
print(f"{out.sum().item():.4f} {out2.sum().item():.4f}")
