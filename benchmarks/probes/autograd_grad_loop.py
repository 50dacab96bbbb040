"""torch.autograd.grad in a loop with a manual update, no optimizer and no .backward().
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
w = torch.randn(8, 2, requires_grad=True)
for i in range(10):
    loss = (x @ w - y).pow(2).mean()
    (g,) = torch.autograd.grad(loss, w)
    with torch.no_grad():
        w -= 0.1 * g
    print(f"step {i} loss {loss.item():.4f}")
