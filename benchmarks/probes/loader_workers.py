"""A DataLoader with two workers (fork), training over two epochs.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(x, y), batch_size=4, num_workers=2)
for epoch in range(2):
    for xb, yb in loader:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        loss.backward()
        opt.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
