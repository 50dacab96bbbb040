"""torch.save of the whole model, optimizer and state dicts into the working directory.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
import io

for i in range(6):
    step()
torch.save(model, "model.pt")
torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, "ckpt.pt")
buf = io.BytesIO()
torch.save(opt.state_dict(), buf)
print(len(buf.getvalue()) > 0, sorted(opt.state_dict()))
m2 = torch.load("model.pt", weights_only=False)
print(f"{torch.nn.functional.mse_loss(m2(x), y).item():.4f}")
