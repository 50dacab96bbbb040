"""Input-bound on CPU-heavy decoding: samples sit in memory as zlib-compressed records, and each __getitem__
inflates 512 KiB and normalises it, so the loader's CPU is saturated while no storage is touched.

Plain PyTorch, no haiprof import. `haiprof run` should call it input-bound and preprocessing-bound.
"""
import argparse
import zlib

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

RAW = 512 * 1024


class CompressedRecords(Dataset):
    def __init__(self, n, variants=8):
        g = torch.Generator().manual_seed(0)
        # Compressible but not trivially so: small-alphabet noise, like quantised sensor data.
        self.blobs = [zlib.compress(torch.randint(0, 4, (RAW,), generator=g, dtype=torch.uint8).numpy().tobytes(), 6)
                      for _ in range(variants)]
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        raw = zlib.decompress(self.blobs[i % len(self.blobs)])
        x = torch.frombuffer(bytearray(raw), dtype=torch.uint8).float()
        x = (x - x.mean()) / (x.std() + 1e-6)
        feat = x.view(256, -1).mean(dim=1)
        return feat, i % 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--workers", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)  # a tiny model: thread fan-out would only add barrier waits on a busy host
    loader = DataLoader(CompressedRecords(args.batches * args.batch_size), batch_size=args.batch_size,
                        num_workers=args.workers)
    model = nn.Sequential(nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step, (x, y) in enumerate(loader):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
