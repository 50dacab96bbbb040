"""An exception inside a DataLoader worker: torch's re-raised traceback, exit 1.
"""
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(32, 8), torch.randn(32, 2)


def step():
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()
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
