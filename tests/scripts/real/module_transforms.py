"""In the shape of an image-classification script whose transforms are nn.Modules (as torchvision's are): with
num_workers=0 the DataLoader runs them on the training thread, ~20 ms of preprocessing per batch, under a tiny
model. Its own clock: the time spent fetching batches against the whole step, printed at the end."""
import statistics
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Augment(nn.Module):
    """A preprocessing module: blurs the image a few times (real CPU work, no model in it)."""

    def __init__(self):
        super().__init__()
        self.blur = nn.Conv2d(3, 3, 5, padding=2, bias=False)

    @torch.no_grad()
    def forward(self, x):
        for _ in range(6):
            x = self.blur(x)
        return x


class Images(Dataset):
    def __init__(self, n):
        self.n, self.transform = n, nn.Sequential(Augment(), nn.Flatten(0))

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return self.transform(torch.rand(1, 3, 64, 64, generator=g)), i % 10


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    loader = DataLoader(Images(int(sys.argv[1]) * 8 if len(sys.argv) > 1 else 160), batch_size=8)
    model = nn.Linear(3 * 64 * 64, 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    shares = []
    it = iter(loader)
    while True:
        t0 = time.perf_counter()
        try:
            x, y = next(it)
        except StopIteration:
            break
        fetch = time.perf_counter() - t0
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        shares.append(fetch / (time.perf_counter() - t0))
    print(f"loader share {statistics.median(shares):.3f}")


if __name__ == "__main__":
    main()
