"""torch.compile with the eager backend on CPU (dynamo without a C compiler).
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
cmodel = torch.compile(model, backend="eager")
for i in range(5):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(cmodel(x), y)
    loss.backward()
    opt.step()
    print(f"step {i} loss {loss.item():.4f}")
