"""The hand-off of one batch from a DataLoader worker process to the training process, measured on this machine:
what the prefetch what-if (analyzers/whatif.py) needs to know before it moves loading into workers.

A DataLoader worker collates each batch into new shared memory (torch's collate allocates a shared storage in a
worker and writes the batch into it: a page fault per page on first touch), sends its handle over a queue, and the
training process maps it and reads it once (pin_memory's copy, or the pageable copy to the device: a minor fault
per 4 KiB page of the new mapping), then frees it. One forked worker does the same here with a tensor of the
batch's size, REPS times; the median of each stage is kept (the stages the training process pays are what bound
the loop once many workers produce in parallel). Beside it, a plain copy of the same bytes between two touched
buffers in this process (the copy rate the what-if would otherwise assume). Run after the script has ended,
never during training: about 0.1 s a 100 MB batch on a quiet machine.
"""
from __future__ import annotations

import queue
import statistics
import time

REPS = 5                  # the median of these, after one warm-up hand-off
MAX_BYTES = 256 << 20     # a larger batch is probed at this size (rates per byte hold past a few MB)
TIMEOUT_S = 20.0          # a worker that sends nothing back by then: no probe (the report is not held up)


def _worker(requests, replies) -> None:   # the child: a DataLoader worker's collate, one batch per request
    import torch
    torch.set_num_threads(1)   # as DataLoader workers do
    src = None
    while True:
        n = requests.get()
        if n is None:
            return
        if src is None or src.numel() != n:
            src = torch.ones(n, dtype=torch.uint8)   # the samples, already in the worker's memory
        t0 = time.perf_counter()
        out = torch.empty(0, dtype=torch.uint8).set_(torch.UntypedStorage._new_shared(n))
        out.copy_(src)   # collate's write into new shared memory
        write = time.perf_counter() - t0
        replies.put((out, write, time.perf_counter()))
        del out


def stages(nbytes: int, reps: int = REPS) -> dict:
    """Seconds per stage (medians over reps) of handing nbytes from a worker to this process:
    worker_write (allocate shared memory and write the batch), transport (queue: the handle, mapping it here),
    first_read (copy it out of the new mapping: the minor faults), read_again (the same copy, pages mapped),
    release (free the mapping), memcpy (the same bytes between two touched buffers in this process)."""
    import torch
    import torch.multiprocessing as mp
    ctx = mp.get_context("fork")
    requests, replies = ctx.SimpleQueue(), ctx.Queue()   # replies: waited for with a timeout, never forever
    proc = ctx.Process(target=_worker, args=(requests, replies), daemon=True)
    proc.start()
    rows = []
    try:
        dst, src = torch.ones(nbytes, dtype=torch.uint8), torch.ones(nbytes, dtype=torch.uint8)
        for i in range(reps + 1):
            requests.put(nbytes)
            out, write, sent = replies.get(timeout=TIMEOUT_S)
            got = time.perf_counter()
            t0 = time.perf_counter()
            dst.copy_(out)
            t1 = time.perf_counter()
            dst.copy_(out)
            t2 = time.perf_counter()
            del out
            t3 = time.perf_counter()
            dst.copy_(src)
            t4 = time.perf_counter()
            if i:   # the first one warms up the queue, the worker's source and this process's buffers
                rows.append({"worker_write": write, "transport": got - sent, "first_read": t1 - t0,
                             "read_again": t2 - t1, "release": t3 - t2, "memcpy": t4 - t3})
    finally:
        requests.put(None)
        proc.join(5)
        if proc.is_alive():
            proc.kill()
    return {k: statistics.median(r[k] for r in rows) for k in rows[0]}


def measure(nbytes: float) -> dict | None:
    """{"bytes", "handoff_bytes_per_s", "memcpy_bytes_per_s", "stages_s"}: the training process's side of a
    hand-off (transport + first read + release), per byte; None when no worker could be started."""
    n = int(max(1 << 20, min(MAX_BYTES, nbytes)))
    try:
        st = stages(n)
    except (OSError, RuntimeError, EOFError, queue.Empty):
        return None
    main = st["transport"] + st["first_read"] + st["release"]
    return {"bytes": n, "handoff_bytes_per_s": n / main, "memcpy_bytes_per_s": n / st["memcpy"],
            "stages_s": st}
