"""What bounds a DataLoader worker's hand-off of a large batch to the training process, stage by stage, on this
machine (collectors/handoff_probe.py does the hand-off; the prefetch what-if in analyzers/whatif.py uses it).

    python benchmarks/handoff.py [--sizes-mb 1,4,16,64,128] [--reps 5] [--writers 0,1]

For each batch size: bytes/s of each stage (medians over reps): the worker's write into new shared memory, the
queue transport of its handle, the training process's first read of the new mapping (its minor faults), the same
read again (pages mapped), the release of the mapping, and a plain copy of the same bytes between two touched
buffers (the copy rate a model without the hand-off assumes). Last column: how many plain copies' time the
training process's side of the hand-off (transport + first read + release) takes. `--writers N` runs N more
processes that keep writing new shared memory meanwhile (the other workers of a pool, sharing memory bandwidth).
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from haiprof.collectors import handoff_probe  # noqa: E402


def _writer(nbytes: int, stop) -> None:   # another worker of the pool: new shared memory, written, freed
    import torch
    torch.set_num_threads(1)
    src = torch.ones(nbytes, dtype=torch.uint8)
    while not stop.is_set():
        out = torch.empty(0, dtype=torch.uint8).set_(torch.UntypedStorage._new_shared(nbytes))
        out.copy_(src)
        del out
        time.sleep(0)


def row(mb: int, reps: int, writers: int) -> dict:
    n = mb << 20
    stop = mp.get_context("fork").Event()
    procs = [mp.get_context("fork").Process(target=_writer, args=(n, stop), daemon=True) for _ in range(writers)]
    for p in procs:
        p.start()
    try:
        st = handoff_probe.stages(n, reps)
    finally:
        stop.set()
        for p in procs:
            p.join(10)
    main = st["transport"] + st["first_read"] + st["release"]
    return {"mb": mb, "writers": writers, **{k: n / v / 1e9 for k, v in st.items()},
            "handoff": n / main / 1e9, "copies": main / st["memcpy"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes-mb", default="1,4,16,64,128")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--writers", default="0,1", help="other writing workers meanwhile, comma-separated counts")
    args = ap.parse_args()
    cols = ["worker_write", "transport", "first_read", "read_again", "release", "memcpy", "handoff"]
    print(f"# {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; GB/s per stage (medians of {args.reps})")
    print("| batch | other writers | " + " | ".join(cols) + " | hand-off in plain copies |")
    print("|---|---|" + "---|" * len(cols) + "---|")
    for w in (int(x) for x in args.writers.split(",")):
        for mb in (int(x) for x in args.sizes_mb.split(",")):
            r = row(mb, args.reps, w)
            print(f"| {mb} MB | {w} | " + " | ".join(f"{r[c]:.2f}" for c in cols) + f" | {r['copies']:.1f} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
