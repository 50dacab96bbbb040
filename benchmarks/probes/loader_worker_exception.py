"""An exception inside a DataLoader worker: torch's re-raised traceback, exit 1.
"""
import torch
from tiny_model import model, opt, x, y, step   # noqa: F401  (the probes' shared model, copied beside each)
from torch.utils.data import DataLoader, Dataset


class Bad(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        if i == 40:
            raise IndexError(f"sample {i} is corrupt")
        return x[i % 32], y[i % 32]


if __name__ == "__main__":
    for i, (xb, yb) in enumerate(DataLoader(Bad(), batch_size=8, num_workers=1)):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(xb), yb).backward()
        opt.step()
        print("batch", i)
