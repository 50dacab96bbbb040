"""The storage device's parallel read rate, measured on the files the loader read: what the prefetch what-if
(analyzers/whatif_input.py) needs before it says that N DataLoader workers reading at once read N times faster.
An SSD's queues serve many readers at once; a throughput-capped cloud volume or a spinning disk hardly.

Random aligned blocks of the files are read by one reader, then by N threads at once (os.preadv releases the GIL,
so the threads' reads are in flight together, as N workers' are), in alternating rounds: two (one reader, N
readers) pairs, so the speedup is measured twice and its spread is kept. Reads bypass the page cache: O_DIRECT
into a page-aligned mmap buffer, or, where the filesystem refuses O_DIRECT, posix_fadvise(POSIX_FADV_DONTNEED) on
each block just before it is read. Read-only: files are opened O_RDONLY and nothing is ever written to them.
Bounded: ~1.2 s and 256 MB at most in all. Run after the script has ended, never during training.
"""
from __future__ import annotations

import mmap
import os
import random
import threading
import time

BLOCK = 1 << 20            # the size of a read (the bundled storage example's; a loader's own size is not known)
ROUND_S = 0.3              # each of the four rounds
MAX_BYTES = 256 << 20      # in all rounds together
ROUNDS = 2                 # (one reader, N readers) pairs


def _open(path: str, direct: bool) -> int:
    return os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECT", 0) if direct else 0))


def _direct_works(path: str, block: int) -> bool:
    """Whether this file can be read with O_DIRECT into an aligned buffer (tmpfs and some filesystems refuse)."""
    if not hasattr(os, "O_DIRECT"):
        return False
    buf = mmap.mmap(-1, block)
    try:
        fd = _open(path, True)
    except OSError:
        return False
    try:
        os.preadv(fd, [buf], 0)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
        buf.close()


def _reader(fds: list, blocks: list, weights: list, block: int, direct: bool, until: float, cap: int,
            seed: int, out: list) -> None:
    rng, buf, got = random.Random(seed), mmap.mmap(-1, block), 0
    try:
        while got < cap and time.perf_counter() < until:
            i = rng.choices(range(len(fds)), weights)[0]
            offset = rng.randrange(blocks[i]) * block   # aligned, as O_DIRECT needs
            if not direct:   # drop this block's cached pages first, so the read reaches the device
                os.posix_fadvise(fds[i], offset, block, os.POSIX_FADV_DONTNEED)
            got += os.preadv(fds[i], [buf], offset)
    except OSError:
        pass   # a file truncated under us: what was read so far still counts
    finally:
        buf.close()
    out.append(got)


def _round(fds, blocks, block, direct, readers: int, cap: int, seed: int) -> float | None:
    """Bytes/s read by `readers` threads at once for ROUND_S (cap bytes in all)."""
    out: list = []
    until = time.perf_counter() + ROUND_S
    threads = [threading.Thread(target=_reader, args=(fds, blocks, blocks, block, direct, until,
                                                       max(block, cap // readers), seed * 100 + k, out), daemon=True)
               for k in range(readers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - t0
    return sum(out) / took if took > 0 and sum(out) else None


def measure(files: list, readers: int, block: int = BLOCK) -> dict | None:
    """{"readers", "block", "mode", "files", "file_bytes", "one_bytes_per_s", "many_bytes_per_s",
    "speedup", "speedups"} for `files` ([path, size] pairs: only regular files of at least one block whose size is
    unchanged are read); None where none is left or nothing could be read."""
    keep = []
    for path, size in files:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if os.path.isfile(path) and st.st_size == size and size >= block:
            keep.append(path)
    if not keep or readers < 1:
        return None
    direct = _direct_works(keep[0], block)
    fds, blocks = [], []
    try:
        for path in keep:
            try:
                fd = _open(path, direct)
            except OSError:
                continue
            fds.append(fd)
            blocks.append(os.fstat(fd).st_size // block)
        if not fds:
            return None
        cap = MAX_BYTES // (2 * ROUNDS)
        pairs = []
        for r in range(ROUNDS):
            one = _round(fds, blocks, block, direct, 1, cap, 2 * r)
            many = _round(fds, blocks, block, direct, readers, cap, 2 * r + 1)
            if one and many:
                pairs.append((one, many))
    finally:
        for fd in fds:
            os.close(fd)
    if not pairs:
        return None
    one = sum(p[0] for p in pairs) / len(pairs)
    many = sum(p[1] for p in pairs) / len(pairs)
    return {"readers": readers, "block": block, "mode": "O_DIRECT" if direct else "fadvise",
            "files": len(fds), "file_bytes": sum(b * block for b in blocks),
            "one_bytes_per_s": one, "many_bytes_per_s": many, "speedup": many / one,
            "speedups": sorted(m / o for o, m in pairs)}
