"""Split an input-bound verdict: storage-bound (the loader waits on reads, its CPU idle) versus
preprocessing-bound (decode/augment saturates the loader's CPU).

Evidence, by DataLoader mode:
  num_workers = 0   the loading runs on the training thread inside DataLoader.__next__; the phase collector
                    records that thread's on-CPU and runqueue-wait ns per wait (schedstat; fields 4 and 5 of a
                    dataloader record), so cpu_share = on-CPU / (wall - runqueue wait): near 1 for a thread that
                    decodes, even on a contended host; low for one that sleeps on reads.
  num_workers > 0   the workers are children of the training process; the system sampler's children CPU%,
                    divided by what the workers could use (min(workers, cores) x 100%), is their busy share.
Storage evidence: the process tree's read bytes/s (system sampler) and per-device reads (diskstats).
"""
from __future__ import annotations

import statistics
from typing import NamedTuple

import numpy as np

from .findings import edited

STORAGE, PREPROCESSING, UNCLEAR = "storage", "preprocessing", "unclear"
MIN_WORKER_SAMPLES = 2
MIN_READ_RATE = 1 << 20  # bytes/s of reads below which the wait is not on local storage


class Loader(NamedTuple):
    """The DataLoader's waits on the training thread, as arrays (one entry a `dataloader` record with the thread's
    CPU: [name, start, end, on-CPU ns, runqueue-wait ns]), and num_workers as its iterators declared it."""
    start: np.ndarray      # ns: the warm-up cut
    wall: np.ndarray       # end - start, ns
    cpu: np.ndarray        # the thread's on-CPU ns
    runq: np.ndarray       # its runqueue-wait ns (0 where the record has none)
    declared: int | None   # declared_workers of the @loader marks


def _ints(values) -> np.ndarray:
    """int64, or Python ints where a value is beyond int64 (a hand-made record): sums stay exact."""
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        return np.array(values, dtype=object)


def loader_waits(start, end, nx, xs, records=()) -> Loader:
    """The waits of `dataloader` records held as columns (start, end, extras count `nx` and the flat extras `xs`
    of rows that each have at least one), plus those among `records` (lists: older run directories, records of
    another shape), and the workers the @loader marks among `records` declare."""
    nx = np.asarray(nx, dtype=np.int64)
    has = nx > 0                                    # [name, start, end] alone: no CPU measured
    first = (np.cumsum(nx) - nx)[has]               # each row's first extra in xs
    xs = np.asarray(xs, dtype=np.int64)
    cpu = xs[first]
    runq = np.where(nx[has] >= 2, xs[np.minimum(first + 1, max(0, len(xs) - 1))], 0) if len(first) else cpu
    start, end = np.asarray(start, dtype=np.int64)[has], np.asarray(end, dtype=np.int64)[has]
    more = []
    for r in records:
        if isinstance(r, list) and len(r) >= 4 and r[0] == "dataloader":
            try:
                more.append((int(r[1]), int(r[2]), int(r[3]), int(r[4]) if len(r) >= 5 else 0))
            except (TypeError, ValueError, OverflowError):
                continue
    m = [_ints([w[k] for w in more]) for k in range(4)]
    if more:
        start, end, cpu, runq = (np.concatenate([a, b]) for a, b in zip((start, end, cpu, runq), m))
    return Loader(start, end - start, cpu, runq, declared_workers(records))


def loader_of_records(records) -> Loader:
    """loader_waits of records as lists only."""
    empty = np.zeros(0, np.int64)
    return loader_waits(empty, empty, empty, empty, records)


def _total(a: np.ndarray) -> int:
    """Exact sum as a Python int (int64 could wrap only for values no real wait has)."""
    if a.dtype == object or not len(a):
        return int(sum(a.tolist()))
    big = max(abs(int(a.max())), abs(int(a.min())))
    return int(a.sum()) if big < (2 ** 63 - 1) // len(a) else int(sum(a.tolist()))


def loader_thread_busy(loader: Loader, start_ns: int | None = None) -> dict:
    """Sum of wall and thread-CPU ns over dataloader waits (after start_ns: warm-up excluded)."""
    keep = slice(None) if start_ns is None else loader.start >= start_ns
    wall, cpu, runq = (_total(a[keep]) for a in (loader.wall, loader.cpu, loader.runq))
    n = len(loader.wall[keep])
    usable = wall - runq  # time the thread was not merely waiting for a CPU
    return {"waits": n, "wall_s": wall / 1e9, "cpu_s": cpu / 1e9, "runqueue_wait_s": runq / 1e9,
            "cpu_share": min(1.0, cpu / usable) if usable > 0 else None}


def declared_workers(records) -> int | None:
    """num_workers as the DataLoader iterators reported it ("@loader" marks, the largest seen); None for runs
    recorded before the mark existed."""
    found = None
    for r in records:
        if isinstance(r, list) and len(r) >= 4 and r[0] == "@loader" and type(r[3]) is int and r[3] >= 0:
            found = r[3] if found is None else max(found, r[3])
    return found


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def worker_cpu(system_samples: list[dict], cores: int) -> dict:
    """Workers' CPU share of what they could use; workers = children of the training process."""
    s = [x for x in system_samples if "t_ns" in x][1:]  # the first sample has no CPU interval
    children = [max(0, x.get("procs", 1) - 1) for x in s]
    workers = max(children, default=0)
    if not workers:
        return {"workers": 0}
    # A child's first CPU reading is 0 by construction (no previous interval): drop it, and need a few more.
    busy = [x.get("cpu_children_pct") for x in s if x.get("procs", 1) > 1][1:]
    if len(busy) < MIN_WORKER_SAMPLES:
        return {"workers": workers, "samples": len(busy), "cpu_share": None,
                "note": f"workers lived for fewer than {MIN_WORKER_SAMPLES + 1} system samples"}
    mean_pct = _mean(busy)
    capacity = 100.0 * min(workers, max(1, cores))
    return {"workers": workers, "cpu_pct_mean": mean_pct, "capacity_pct": capacity,
            "cpu_share": (mean_pct / capacity) if mean_pct is not None else None}


def classify(io_finding: dict, loader: Loader, system_samples: list[dict], disk_summary: dict, cores: int,
             busy: float, idle: float, start_ns: int | None = None, end_ns: int | None = None,
             traced=()) -> dict:
    """The io finding with the split added to message, evidence and a `recommendation`; fix id stays prefetch.
    start_ns/end_ns: the steady steps' span, traced: (start, end) of the traced steps; the loader's waits and the
    process's reads are counted within the one and outside the others."""
    thread = loader_thread_busy(loader, start_ns)
    workers = worker_cpu(system_samples, cores)
    declared = loader.declared
    if declared is not None:
        # The DataLoader's own word beats counting children: short-lived workers can fall between samples.
        workers["declared"] = declared
        if declared and not workers.get("workers"):
            workers.update(cpu_share=None, note="the workers lived too briefly for the system sampler to see them")
    n_workers = declared if declared is not None else workers.get("workers")
    if n_workers:
        mode, share = f"{n_workers} DataLoader worker(s)", workers.get("cpu_share")
    else:
        mode, share = "num_workers=0: loading on the training thread", thread.get("cpu_share")
    read_rate = _mean([v.get("read_bytes_per_s_mean") for v in disk_summary.values()]) if disk_summary else None
    proc_read = _proc_read_rate(system_samples, start_ns, end_ns, traced)
    evidence = {"loader_mode": mode, "loader_cpu_share": share, "loader_thread": thread, "workers": workers,
                "proc_read_bytes_per_s": proc_read, "disk_read_bytes_per_s": read_rate, "cores": cores,
                "thresholds": {"busy": busy, "idle": idle}}
    if share is None:
        kind, why = UNCLEAR, "the loader's CPU could not be measured" + (
            f" ({workers['note']})" if workers.get("note") else "")
        rec = "Overlap loading with compute: more DataLoader workers, pin_memory, prefetch_factor."
    elif share >= busy:
        kind = PREPROCESSING
        why = f"preprocessing-bound: the loader was busy on CPU {100 * share:.0f}% of the wait ({mode})"
        n = max(1, cores - 1)
        rec = (f"Decoding/augmentation saturates the CPU: use DataLoader workers up to the available cores "
               f"(num_workers={n} on this {cores}-core host; more workers than cores will not help), make the "
               f"transform cheaper, or cache decoded samples.")
    elif share <= idle:
        kind = STORAGE
        rd = proc_read if proc_read is not None else read_rate
        if rd and rd >= MIN_READ_RATE:
            why = (f"storage-bound: the loader waited with its CPU idle ({100 * share:.0f}% busy, {mode}, "
                   f"reads {rd / 2**20:.1f} MiB/s)")
        else:
            why = (f"latency-bound: the loader waited with its CPU idle ({100 * share:.0f}% busy, {mode}) and little "
                   f"local disk reading: network storage, a remote fetch or a lock")
        rec = (f"Reads are latency-bound, not CPU-bound: use more DataLoader workers than cores (e.g. "
               f"num_workers={4 * cores}) with prefetch_factor so reads overlap, or move the data to faster/local "
               f"storage or larger sequential shards.")
    else:
        kind = UNCLEAR
        why = f"mixed: the loader was on CPU {100 * share:.0f}% of the time ({mode})"
        rec = "Both reads and CPU matter: add workers up to the cores first, then check storage latency."
    return edited(io_finding, message=f"{io_finding['message']}; {why}",
                  evidence={**io_finding.get("evidence", {}), "input_bound": kind, "input_split": evidence},
                  recommendation=rec, fixes=list(io_finding.get("fixes") or ["prefetch"]))


def _proc_read_rate(samples: list[dict], start_ns: int | None = None, end_ns: int | None = None,
                    exclude=()) -> float | None:
    """The training process tree's reads, bytes/s, over the sampling intervals that overlap the steady steps
    (start_ns..end_ns) and none of the `exclude` spans (the traced steps: the profiler loads its libraries). Not
    over the whole run: at start-up torch's import reads tens of MB of libraries from a cold page cache, and a
    loader that only waits (a remote fetch, a lock) was called storage-bound for reads it never made. None
    without such an interval."""
    s = [x for x in samples if "t_ns" in x and "proc_read_bytes" in x]
    if len(s) < 2:
        return None
    t = np.array([x["t_ns"] for x in s], dtype=np.int64)
    read = np.array([x["proc_read_bytes"] for x in s], dtype=np.float64)
    a, b = t[:-1], t[1:]
    keep = b > a
    if start_ns is not None:
        keep &= b > start_ns
    if end_ns is not None:
        keep &= a < end_ns
    for lo, hi in exclude:
        keep &= ~((a < hi) & (b > lo))
    span = int((b - a)[keep].sum())
    if span <= 0:
        return None
    return float(np.diff(read)[keep].clip(min=0).sum()) / (span / 1e9)   # a counter reset adds nothing
