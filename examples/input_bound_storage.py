"""Input-bound on storage latency: every sample is a real 1 MiB read from shard files in a temp directory,
bypassing the page cache (O_DIRECT, or fadvise(DONTNEED) where the filesystem refuses O_DIRECT), so each read
waits on the device while the CPU idles. Decoding is trivial.

Plain PyTorch, no haiprof import. `haiprof run` should call it input-bound and storage-bound.
"""
import argparse
import mmap
import os
import random
import shutil
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

CHUNK = 1024 * 1024
SHARD = 16 * 1024 * 1024


class ShardReader(Dataset):
    def __init__(self, root, shards, n):
        self.paths = [os.path.join(root, f"shard{i}.bin") for i in range(shards)]
        self.n = n
        rng = random.Random(0)
        self.where = [(rng.randrange(shards), rng.randrange(SHARD // CHUNK) * CHUNK) for _ in range(n)]
        self.buf = None
        self.fds, self.pid = {}, os.getpid()   # path -> descriptor, per process

    def __len__(self):
        return self.n

    def _open(self, path, direct=True):
        """The shard's descriptor and whether it bypasses the page cache, opened once and kept (as sharded readers
        keep theirs: a tar stream, an HDF5 or memory-mapped file), in the process that reads."""
        if path not in self.fds:
            try:
                self.fds[path] = (os.open(path, os.O_RDONLY | os.O_DIRECT), True) if direct and \
                    hasattr(os, "O_DIRECT") else (os.open(path, os.O_RDONLY), False)
            except OSError:   # a filesystem without O_DIRECT (tmpfs)
                self.fds[path] = (os.open(path, os.O_RDONLY), False)
        return self.fds[path]

    def _read(self, path, offset):
        if self.buf is None:
            self.buf = mmap.mmap(-1, CHUNK)  # page-aligned, as O_DIRECT requires
        if self.pid != os.getpid():   # a forked DataLoader worker opens its own descriptors
            self.fds, self.pid = {}, os.getpid()
        fd, direct = self._open(path)
        if direct:
            try:
                os.preadv(fd, [self.buf], offset)
                return bytes(self.buf[:1024])
            except OSError:   # O_DIRECT opened but refused: read through the cache from now on
                os.close(fd)
                del self.fds[path]
                fd, direct = self._open(path, direct=False)
        os.posix_fadvise(fd, offset, CHUNK, os.POSIX_FADV_DONTNEED)   # drop the cached pages, then read
        os.preadv(fd, [self.buf], offset)
        return bytes(self.buf[:1024])

    def __getitem__(self, i):
        shard, offset = self.where[i]
        head = self._read(self.paths[shard], offset)
        x = torch.frombuffer(bytearray(head), dtype=torch.uint8).float().div_(255.0)[:256]
        return x, int(head[0] & 1)


def write_shards(root, shards):
    block = os.urandom(1 << 20)
    for i in range(shards):
        with open(os.path.join(root, f"shard{i}.bin"), "wb") as f:
            for _ in range(SHARD >> 20):
                f.write(block)
            f.flush()
            os.fsync(f.fileno())  # dirty pages cannot be evicted: make every read hit the device


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=25)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--data", help="keep the shards in this folder (written once, reused, never removed), as a real "
                                   "data set outlives the script; default: a temporary folder removed at the end")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)  # a tiny model: thread fan-out would only add barrier waits on a busy host
    root = args.data or tempfile.mkdtemp(prefix="shards-")
    try:
        if args.data:
            os.makedirs(root, exist_ok=True)
        if not all(os.path.exists(p) and os.path.getsize(p) == SHARD
                   for p in (os.path.join(root, f"shard{i}.bin") for i in range(args.shards))):
            write_shards(root, args.shards)
        ds = ShardReader(root, args.shards, args.batches * args.batch_size)
        loader = DataLoader(ds, batch_size=args.batch_size, num_workers=args.workers)
        model = nn.Sequential(nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for step, (x, y) in enumerate(loader):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            if step % 10 == 0:
                print(f"step {step} loss {loss.item():.4f}")
    finally:
        if not args.data:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
