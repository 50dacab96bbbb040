"""What the flush thread spends, per record, turning phase records into JSON lines (haiprof/rundir/appenders.py
JsonlAppender.encode against plain json.dumps), side by side in one process.

    python benchmarks/flush_cost.py [--records 20000] [--rounds 15]

Why it matters: the flush thread holds the GIL while it encodes, and a fast CUDA loop emits thousands of records
a second (host phases plus their gpu:* spans), so this is time taken from the training thread's Python. The
record mix is one training step's: dataloader, h2d, forward, backward, optimizer on the host, the same five as
CUDA-event spans, and the step mark.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from haiprof.phasestore import encode_chunk
from haiprof.rundir import JsonlAppender

CHUNK = 2500   # records in half a second of a fast loop

STEP = ("dataloader", "h2d", "forward", "backward", "optimizer", "gpu:h2d", "gpu:forward", "gpu:backward",
        "gpu:optimizer", "gpu:optimizer", "@step")


def _records(n: int) -> list:
    t = 514_619_881_175
    out = []
    for i in range(n):
        out.append((STEP[i % len(STEP)], t, t + 12_345))
        t += 20_000
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    recs = _records(args.records)
    with tempfile.TemporaryDirectory() as d:
        app = JsonlAppender(Path(d) / "phases.jsonl")
        plain, fast, chunk, size = [], [], [], 0
        for _ in range(args.rounds):     # interleaved, so a noisy neighbour hits all alike
            t0 = time.perf_counter()
            for i in range(0, len(recs), CHUNK):   # phases.bin: what ChunkAppender writes, a chunk per flush
                size += len(encode_chunk(recs[i:i + CHUNK]))
            chunk.append((time.perf_counter() - t0) / len(recs))
            t0 = time.perf_counter()
            for r in recs:
                json.dumps(r, separators=(",", ":"), default=str)
            plain.append((time.perf_counter() - t0) / len(recs))
            t0 = time.perf_counter()
            for r in recs:
                app.encode(r)
            fast.append((time.perf_counter() - t0) / len(recs))
        app.close()
    p, f, c = statistics.median(plain) * 1e6, statistics.median(fast) * 1e6, statistics.median(chunk) * 1e6
    jsonl = sum(len(app.encode(r)) + 1 for r in recs)
    print(f"phases.bin chunks ({CHUNK} records a flush): {c:.2f} us a record, {size / args.rounds / len(recs):.1f} "
          f"bytes a record (JSON lines: {jsonl / len(recs):.1f})")
    ratios = sorted(a / b for a, b in zip(plain, fast))
    print(f"per record: json.dumps {p:.2f} us, JsonlAppender.encode {f:.2f} us; ratio median {p / f:.1f}x "
          f"(min {ratios[0]:.1f}x, max {ratios[-1]:.1f}x over {args.rounds} interleaved rounds)")
    for rate in (1000, 5000):
        print(f"at {rate} records/s the flush thread encodes for {p * rate / 1e4:.2f}% of a core with json.dumps, "
              f"{f * rate / 1e4:.2f}% with encode, {c * rate / 1e4:.2f}% in phases.bin chunks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
