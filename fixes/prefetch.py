"""prefetch: load batches in DataLoader worker processes, ahead of the training loop.

How many workers depends on why loading is slow, measured on a few samples when the DataLoader is built:
  - mostly CPU work (decode, augment): one worker per core actually available to this process
    (sched_getaffinity, not os.cpu_count(): containers and taskset restrict it);
  - mostly waiting (storage latency, remote reads): more workers than cores, WAIT_WORKERS_PER_CORE each,
    since a waiting worker costs no CPU.
Plus persistent_workers (no re-fork per epoch), a deeper prefetch_factor when waiting, pin_memory on CUDA, and on
CUDA a device-side prefetcher (prefetch_device.py) that overlaps the next batch's copy with compute.
"""
from __future__ import annotations

import functools
import inspect
import os
import pickle
import statistics
import time

from .base import FixContext, cuda_available

ID = "prefetch"
VARIANTS: tuple = ()   # takes no ID=VARIANT (checked by parse_spec before the run)
NOT_TRIGGERED = "the script created no DataLoader"

CPU_BOUND_FRACTION = 0.5      # process CPU time / wall time of a sample fetch at or above this: CPU-bound loading
WAIT_WORKERS_PER_CORE = 4     # workers per available core when loading mostly waits
MAX_WORKERS = 16
PROBE_SAMPLES = 4             # samples timed to tell CPU work from waiting
PROBE_BUDGET_S = 0.5          # stop probing after this long, whatever the count
PREFETCH_FACTOR_WAITING = 4


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


SCHEDSTAT = "/proc/thread-self/schedstat"


def _sched_ns() -> tuple[int, int] | None:
    """(ns this thread ran on a CPU, ns it sat runnable waiting for one): schedstat fields 1 and 2."""
    try:
        with open(SCHEDSTAT, encoding="ascii") as f:
            run_ns, wait_ns = f.read().split()[:2]
        return int(run_ns), int(wait_ns)
    except (OSError, ValueError):
        return None


def probe_cpu_fraction(dataset, n: int = PROBE_SAMPLES, budget_s: float = PROBE_BUDGET_S) -> float | None:
    """Share of a sample fetch spent computing, of the time the fetch could have used a CPU; the rest is waiting
    (storage, sleep). None when not measurable.

    Time queued for a CPU is left out of the denominator: on a loaded machine CPU-bound loading still scores ~1
    (it ran whenever it was not queued), and a loader that sleeps on storage still scores ~0 even when every
    wake-up has to queue for a CPU.
    """
    try:
        size = len(dataset)
    except TypeError:
        return None
    if size == 0:
        return None
    idx = [int(i * size / n) for i in range(min(n, size))]
    use_sched = _sched_ns() is not None
    w0 = time.perf_counter()
    dataset[idx[0]]   # warm-up, not timed: first calls pay lazy imports, dispatch caches and cold pages in CPU
    fractions, spent = [], time.perf_counter() - w0
    for i in idx:
        w0 = time.perf_counter()
        s0 = _sched_ns() if use_sched else (time.thread_time_ns(), 0)
        dataset[i]
        s1 = _sched_ns() if use_sched else (time.thread_time_ns(), 0)
        wall = time.perf_counter() - w0
        usable = wall - (s1[1] - s0[1]) / 1e9
        if usable > 0:
            fractions.append(min(1.0, (s1[0] - s0[0]) / 1e9 / usable))
        spent += wall
        if spent > budget_s:
            break
    # the median sample: one fetch caught by a GC pause or a page fault does not turn waiting into computing
    return float(statistics.median(fractions)) if fractions else None


def choose_workers(cpu_fraction: float | None, cores: int) -> tuple[int, str]:
    if cpu_fraction is None or cpu_fraction >= CPU_BOUND_FRACTION:
        what = "CPU-bound loading" if cpu_fraction is not None else "loading of unknown kind"
        frac = "" if cpu_fraction is None else f" ({100 * cpu_fraction:.0f}% CPU per fetch)"
        return cores, f"{what}{frac}: {cores} worker(s), one per available core"
    n = min(MAX_WORKERS, WAIT_WORKERS_PER_CORE * cores)
    return n, (f"loading mostly waits ({100 * cpu_fraction:.0f}% CPU per fetch): {n} workers "
               f"on {cores} core(s), more than cores since waiting workers use no CPU")


def workers_for_cost(fetch_s: float, ipc_s: float, compute_s: float | None, cpu_fraction: float | None,
                     cores: int) -> tuple[int | None, str]:
    """Workers from the measured cost per batch: fetch_s to load one batch in-process, ipc_s to move it between
    processes (bytes per batch x measured copy cost: the worker writes it to shared memory, the training process
    reads and pins it), compute_s the rest of the step (from the diagnosis). Enough workers that the batches keep
    up with compute, (fetch + ipc) / n <= compute, within what the loading can use (cores when it computes,
    MAX_WORKERS when it waits); 0 when moving a batch costs the training process as much as loading it; None
    (use the core-count rule) when compute_s is unknown."""
    if compute_s is None or compute_s <= 0 or fetch_s <= 0:
        return None, "no measured step to size the workers against"
    if ipc_s >= fetch_s:
        return 0, (f"moving each batch between processes ({ipc_s * 1e3:.1f} ms) costs as much as loading it "
                   f"({fetch_s * 1e3:.1f} ms): workers would not help")
    need = max(1, -(-(fetch_s + ipc_s) // compute_s))
    cap = cores if cpu_fraction is None or cpu_fraction >= CPU_BOUND_FRACTION else \
        min(MAX_WORKERS, WAIT_WORKERS_PER_CORE * cores)
    n = int(min(need, cap))
    return n, (f"{n} worker(s): a batch costs {fetch_s * 1e3:.1f} ms to load + {ipc_s * 1e3:.1f} ms to move "
               f"between processes against {compute_s * 1e3:.1f} ms of compute per step"
               + (f" (capped at {cap})" if need > cap else ""))


def sample_bytes(sample) -> int:
    """Bytes of the tensors (and numpy arrays) in one sample."""
    if hasattr(sample, "nbytes") and not isinstance(sample, (list, tuple, dict)):
        try:
            return int(sample.nbytes)
        except TypeError:
            return 0
    items = sample.values() if isinstance(sample, dict) else sample if isinstance(sample, (list, tuple)) else ()
    return sum(sample_bytes(x) for x in items)


def copy_seconds_per_byte(nbytes: int, torch) -> float:
    """Measured cost of moving bytes between processes: one copy into a shared-memory tensor (what a worker's
    collate does) and one more (pinning in the training process), timed on min(nbytes, 64 MiB)."""
    n = max(1 << 16, min(int(nbytes), 64 << 20))
    src = torch.empty(n, dtype=torch.uint8)
    dst = torch.empty(n, dtype=torch.uint8).share_memory_()
    t0 = time.perf_counter()
    dst.copy_(src)
    src.copy_(dst)
    return (time.perf_counter() - t0) / n


def compute_s_from(diagnosis: dict) -> float | None:
    """Seconds per step not spent waiting for input, from the diagnosis run's summary (None without one)."""
    st = (diagnosis or {}).get("step_time_s") or {}
    steady = st.get("steady") or st.get("median")
    share = (diagnosis or {}).get("phase_share") or {}
    if not steady:
        return None
    return steady * max(0.05, 1.0 - (share.get("dataloader") or 0.0) - (share.get("h2d") or 0.0))


def _shards_itself(dataset) -> bool:
    # An IterableDataset must split its stream by get_worker_info(), or every worker yields the same data.
    try:
        src = inspect.getsource(type(dataset))
    except (OSError, TypeError):
        return False
    return "get_worker_info" in src


def install(ctx: FixContext) -> None:
    import torch
    from torch.utils.data import DataLoader, IterableDataset

    state = ctx.state
    original_init = DataLoader.__init__
    signature = inspect.signature(original_init)
    use_cuda = cuda_available(torch)
    cores = available_cores()
    seen = {"n": 0}

    @functools.wraps(original_init)   # keeps the real signature visible to a fix stacked on top
    def patched_init(self, *args, **kwargs):
        if not ctx.in_main_process():
            return original_init(self, *args, **kwargs)
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:
            return original_init(self, *args, **kwargs)   # let DataLoader raise its own error
        seen["n"] += 1
        target = f"DataLoader #{seen['n']}"
        new = decide(bound.arguments, target)
        if new:
            bound.arguments.update(new)
        return original_init(*bound.args, **bound.kwargs)

    def _decide(a: dict, target: str) -> dict | None:
        dataset = a.get("dataset")
        workers = a.get("num_workers", 0) or 0
        if workers > 0:
            state.skipped(f"already uses {workers} worker(s)", target)
            return None
        if isinstance(dataset, IterableDataset) and not _shards_itself(dataset):
            state.skipped("an IterableDataset without worker sharding (get_worker_info) would duplicate data",
                          target)
            return None
        ctx_mp = a.get("multiprocessing_context")
        method = ctx_mp if isinstance(ctx_mp, str) else getattr(ctx_mp, "_name", None) or \
            torch.multiprocessing.get_start_method(allow_none=True) or "fork"
        if method != "fork":
            try:
                pickle.dumps(dataset)
            except Exception as e:
                state.skipped(f"dataset cannot be pickled for '{method}' workers ({type(e).__name__})", target)
                return None
        frac = None if isinstance(dataset, IterableDataset) else probe_cpu_fraction(dataset)
        n, why = choose_workers(frac, cores)
        measured = None if isinstance(dataset, IterableDataset) else _measured_cost(dataset, a)
        if measured is not None:
            m, mwhy = workers_for_cost(*measured, compute_s_from(ctx.diagnosis), frac, cores)
            if m == 0:
                state.skipped(mwhy, target)
                return None
            if m is not None:
                n, why = m, mwhy
        if frac is not None and frac >= CPU_BOUND_FRACTION and cores < 2:
            state.skipped(f"CPU-bound loading with {cores} available core: workers would compete with training",
                          target)
            return None
        new = {"num_workers": n, "persistent_workers": True,
               "prefetch_factor": PREFETCH_FACTOR_WAITING if n > cores else 2}
        if use_cuda and not a.get("pin_memory"):
            new["pin_memory"] = True
        state.applied(target, why + ", persistent workers, prefetch_factor "
                      f"{new['prefetch_factor']}" + (", pinned memory" if new.get("pin_memory") else ""),
                      num_workers=n, cpu_fraction=frac, cores=cores, **{k: v for k, v in new.items()
                                                                         if k != "num_workers"})
        return new

    def _measured_cost(dataset, a: dict) -> tuple[float, float] | None:
        """(seconds to load one batch in-process, seconds to move it between processes), measured on a few
        samples; None when the dataset has no length."""
        try:
            size = len(dataset)
        except TypeError:
            return None
        if not size:
            return None
        batch = a.get("batch_size") or 1
        idx = [int(i * size / PROBE_SAMPLES) for i in range(min(PROBE_SAMPLES, size))]
        t0 = time.perf_counter()
        nbytes = 0
        for i in idx:
            nbytes += sample_bytes(dataset[i])
            if time.perf_counter() - t0 > PROBE_BUDGET_S:
                idx = idx[:idx.index(i) + 1]
                break
        per_sample_s = (time.perf_counter() - t0) / len(idx)
        per_batch_bytes = nbytes / len(idx) * batch
        return per_sample_s * batch, per_batch_bytes * copy_seconds_per_byte(per_batch_bytes, torch)

    decide = ctx.safely(_decide)
    ctx.patch(DataLoader, "__init__", patched_init)
    # DataLoader warns when workers outnumber cores; here that is the point (they wait, not compute).
    import warnings
    saved_filters = warnings.filters[:]
    warnings.filterwarnings("ignore", message=r"This DataLoader will create \d+ worker processes in total")
    ctx.on_undo(lambda: warnings.filters.__setitem__(slice(None), saved_filters))
    if use_cuda:
        from . import prefetch_device
        prefetch_device.install(ctx)
