"""The prefetch what-if (analyzers/whatif.py's predictor for `prefetch`): workers hide the loading, but the step
stays at least what the workers produce (time per fetch over the workers the fix starts) and what the main process
still does with each batch (the hand-off from a worker, measured by the run's probe or assumed in copies at the
traced copy rate, then the copy to the device); its range may end slower than now. A loader waiting on local
storage reads: each fetch's wait gets as much faster as the device read for N readers after the run
(collectors/read_probe.py: `read_probe` in the summary), else the point assumes N times; its CPU part spreads over
the workers and cores. An existing worker pool is left alone: only the copy
to the device is hidden. Pure: a summary in, a prediction out."""
from __future__ import annotations

from . import thresholds as T
from .input_split import MIN_READ_RATE
from .whatif_common import _device, _finding, _out, _share, step_s

# The training process's side of a worker's hand-off of each batch (receive it from the worker's new shared
# memory: a minor fault per page; copy it into pinned memory; free the mapping), in plain copies of the batch's
# bytes: 1.6-6.8x, median 4.25x, over every 16-128 MB row of the three tables in docs/benchmarks.md
# (benchmarks/handoff.py on a 2-core machine: quiet, light and heavy load; 20 rows; the H100 host of
# docs/predictions.md showed about 3.7x with 16 workers). Used where the run did not measure its own hand-off
# (collectors/handoff_probe.py: `handoff` in the summary), with the pageable copies' rate standing in for a plain
# copy's; a measured hand-off keeps the same relative spread. The copy to the device then runs from pinned memory
# at PINNED_SPEEDUP times the pageable copies' rate (an H100 measured 6x: 2 is the cautious end), on the device
# prefetcher's side stream while the pinning thread hands off the next batch: the two overlap, the slower bounds.
HANDOFF_COPIES = {"point": 4.25, "low": 1.6, "high": 6.8}
PINNED_SPEEDUP = 2.0
# Batches from this size up: the hand-off is probed after the run (haiprof/analysis/handoff.py) when prefetch is
# predicted; below it the hand-off is a few ms at most.
HANDOFF_PROBE_BYTES = 16e6
# The prefetch fix's worker count (fixes/prefetch.py; analyzers may not import fixes): one per core when loading
# computes, WAIT_WORKERS_PER_CORE per core (at most MAX_WORKERS) when it mostly waits.
CPU_BOUND_FRACTION, WAIT_WORKERS_PER_CORE, MAX_WORKERS = 0.5, 4, 16


def _io_share(s: dict, dev: dict | None) -> float:
    if dev:
        return float((dev.get("bound") or {}).get("io") or 0.0)
    f = _finding(s, "io")
    return float(f.get("share") or 0.0) if f else _share(s, "dataloader", "h2d")


def _batch_bytes(s: dict) -> tuple[float | None, float | None]:
    """(host-to-device bytes per step, the pageable copies' rate in bytes/s) from the tracing window."""
    gpu = s.get("gpu") or {}
    steps = gpu.get("steps") or 0
    htod = [c for c in gpu.get("copies") or [] if str(c.get("kind", "")).startswith("HtoD")]
    if not steps or not htod:
        return None, None
    nbytes = sum(c.get("bytes") or 0 for c in htod) / steps
    rate = next((c.get("gb_per_s") for c in htod if c.get("kind") == "HtoD pageable"), None) or \
        max((c.get("gb_per_s") or 0 for c in htod), default=0)
    return nbytes, (rate * 1e9 if rate else None)


def _loader(s: dict) -> dict:
    ev = _finding(s, "io").get("evidence") or {}
    split = ev.get("input_split") or {}
    return {"workers": ((split.get("workers") or {}).get("workers")), "cores": split.get("cores")
            or (s.get("conditions") or {}).get("cores") or (s.get("conditions") or {}).get("cpu_count"),
            "thread": split.get("loader_thread") or {}, "cpu_share": split.get("loader_cpu_share")}


def _fetch_s(ld: dict) -> tuple[float | None, float | None]:
    """(wall seconds per fetch on the training thread, its CPU fraction)."""
    th = ld["thread"]
    waits, wall = th.get("waits"), th.get("wall_s")
    if not waits or not wall:
        return None, None
    return wall / waits, (th.get("cpu_s") or 0.0) / wall


def _storage_reads(s: dict, cpu_fraction: float | None) -> float | None:
    """The loader's read rate (bytes/s) where it waits on local storage (analyzers/input_split.py's storage-bound
    case: its CPU mostly idle, the process reading from disk); None otherwise. More readers help such a loader
    only as far as the device serves reads in parallel: an SSD's queues do, a throughput-capped cloud volume or a
    spinning disk hardly, and one reader at a time does not tell which."""
    if cpu_fraction is None or cpu_fraction >= CPU_BOUND_FRACTION:
        return None
    split = (_finding(s, "io").get("evidence") or {}).get("input_split") or {}
    rate = split.get("proc_read_bytes_per_s")   # the process's own reads; a measured 0 is no reading, not unknown
    rate = rate if rate is not None else split.get("disk_read_bytes_per_s")
    return rate if rate and rate >= MIN_READ_RATE else None


def _workers(cpu_fraction: float | None, cores: int) -> int:
    if cpu_fraction is None or cpu_fraction >= CPU_BOUND_FRACTION:
        return max(1, cores)
    return min(MAX_WORKERS, WAIT_WORKERS_PER_CORE * cores)


def prefetch(s: dict) -> dict:
    step, dev = step_s(s), _device(s)
    io = _io_share(s, dev)
    touches = "waiting for input (DataLoader + host-to-device copy)"
    if not step or io <= 0:
        return _out("prefetch", step, touches, io, 0.0, 0.0, 0.0, "no input wait in the steady step")
    ld = _loader(s)
    h2d = float(((dev or {}).get("busy") or {}).get("h2d") or 0.0) if dev else _share(s, "h2d")
    h2d += float(((dev or {}).get("idle_by_host") or {}).get("h2d") or 0.0) if dev else 0.0
    if ld["workers"]:   # an existing pool: the fix leaves it; a device prefetcher hides only the copy
        busy = (ld["cpu_share"] or 0.0) >= T.LOADER_CPU_BUSY
        why = (f"the script's {ld['workers']} DataLoader workers are CPU-bound ({100 * (ld['cpu_share'] or 0):.0f}% "
               "busy): a device prefetcher cannot make them produce faster" if busy else
               f"the script already loads in {ld['workers']} DataLoader workers")
        return _out("prefetch", step, touches, io, min(h2d, io), 0.0, min(h2d, io),
                    f"{why}; only the host-to-device copy ({100 * h2d:.0f}% of the step) is hidden")
    left = step * (1 - io)   # the step without any input wait
    fetch, frac = _fetch_s(ld)
    cores = int(ld["cores"] or 1)
    parts = [f"the step without its input wait is {left * 1e3:.1f} ms"]
    floors = {"point": left, "low": left, "high": left}
    if fetch:
        n = _workers(frac, cores)
        eff = min(n, cores) if frac is None or frac >= CPU_BOUND_FRACTION else n
        reads = _storage_reads(s, frac)
        probe = (s.get("read_probe") or {}) if reads else {}
        par = _parallel(probe, n)
        produce = fetch / eff
        if reads:   # a fetch = its CPU (spread over the cores) + its wait on the device (as fast as the device
            # serves n readers: the read probe's speedup, else assumed n times; the range's slow end, no faster)
            cpu = max(fetch * (frac or 0.0) / min(n, cores), fetch / n)
            wait = fetch * (1 - (frac or 0.0))
            speed = par or {"point": float(n), "low": float(n), "high": 1.0}
            made = {k: max(cpu, wait / speed[k]) for k in floors}
            produce = made["point"]
            for k in floors:
                floors[k] = max(floors[k], made[k])
        else:
            for k in floors:
                floors[k] = max(floors[k], produce)
        parts.append(f"{n} workers produce a batch every {produce * 1e3:.1f} ms ({fetch * 1e3:.1f} ms per fetch, "
                     f"{100 * (frac or 0):.0f}% CPU, {cores} cores)")
        if par:
            parts.append(f"the loader reads local storage ({reads / 2**20:.0f} MiB/s): the device read "
                         f"{probe['one_bytes_per_s'] / 2**20:.0f} MiB/s with one reader, "
                         f"{probe['many_bytes_per_s'] / 2**20:.0f} MiB/s with {probe.get('readers') or n}: "
                         f"{probe['speedup']:.1f}x ({min(par['spread']):.1f}-{max(par['spread']):.1f}x over "
                         f"{len(par['spread'])} rounds; measured after the run on {probe.get('files')} of the files "
                         f"it read, in {probe.get('block', 0) / 2**20:g} MiB reads)")
        elif reads:
            why = probe.get("not_measured")
            parts.append(f"the loader reads local storage ({reads / 2**20:.0f} MiB/s with one reader): that assumes "
                         f"the device serves {n} readers in parallel; the range's slow end, one batch every "
                         f"{floors['high'] * 1e3:.1f} ms, a device that reads no faster for them (its parallel rate "
                         f"is not measured{': ' + why if why else ''})")
    nbytes, rate = _batch_bytes(s)
    if nbytes and rate:
        one = nbytes / rate
        hand, said = _handoff_s(s, nbytes, one)
        for k in floors:
            floors[k] = max(floors[k], hand[k], one / PINNED_SPEEDUP)
        parts.append(f"{said}; the copy to the device, from pinned memory at {PINNED_SPEEDUP:.0f}x the pageable "
                     f"rate on a side stream, overlaps the next batch's hand-off")
    gain = {k: (step - floors[k]) / step for k in floors}
    # the slow end may be slower than now: a hand-off slower than the loading it replaces (said, not clamped)
    p = _out("prefetch", step, touches, io, gain["point"], gain["high"], gain["low"], "; ".join(parts))
    if gain["high"] < 0:   # floors["high"]: the slowest hand-off
        p["low_share"] = gain["high"]
    if gain["point"] < 0:   # the hand-off costs more than the loading it replaces: a slower step, said as such
        p.update(gain_share=gain["point"], step_after_s=floors["point"], worth=False, slower_by="hand-off",
                 batch_bytes=nbytes,
                 why_not=f"predicted to make the step slower ({step * 1e3:.1f} → {floors['point'] * 1e3:.1f} ms): "
                         f"the training process would spend longer receiving each batch from a worker than it "
                         f"now spends loading it")
    return p


def _parallel(probe: dict, n: int) -> dict | None:
    """{point, low, high}: how many times faster n workers read than one, from the run's read probe
    (collectors/read_probe.py: one reader against the same n at once), held to n; low is the fast end (the
    largest speedup measured), high the slow end; None where not measured."""
    if not probe.get("speedup") or not probe.get("one_bytes_per_s") or not probe.get("many_bytes_per_s"):
        return None
    got = probe.get("speedups")
    spread = [x for x in (got if isinstance(got, list) else []) if isinstance(x, (int, float)) and x > 0] \
        or [probe["speedup"]]
    held = lambda x: min(float(n), max(1e-3, x))   # noqa: E731
    return {"point": held(probe["speedup"]), "low": held(max(spread)), "high": held(min(spread)),
            "spread": spread}


def read_probe_readers(s: dict) -> int | None:
    """The readers to probe the storage device with (the workers the prefetch fix would start), where the
    prefetch what-if leans on local storage reads on the training thread and the run has not measured the device's
    parallel rate yet; else None."""
    if s.get("read_probe") or not step_s(s) or _io_share(s, _device(s)) <= 0:
        return None
    ld = _loader(s)
    if ld["workers"]:
        return None
    fetch, frac = _fetch_s(ld)
    if not fetch or not _storage_reads(s, frac):
        return None
    return _workers(frac, int(ld["cores"] or 1))


def handoff_bytes(s: dict) -> float | None:
    """The batch size to probe the hand-off with, where the prefetch what-if starts workers on large batches
    (HANDOFF_PROBE_BYTES) and the run has not measured it yet; else None."""
    nbytes, rate = _batch_bytes(s)
    if s.get("handoff") or not nbytes or not rate or nbytes < HANDOFF_PROBE_BYTES or not step_s(s):
        return None
    return nbytes if _io_share(s, _device(s)) > 0 and not _loader(s)["workers"] else None


def _handoff_s(s: dict, nbytes: float, one: float) -> tuple[dict, str]:
    """Seconds the training process spends receiving each batch from a worker and copying it into pinned
    memory ({point, low, high}), and how it was known: the run's own probe, else HANDOFF_COPIES plain copies."""
    probe = s.get("handoff") or {}
    rate = probe.get("handoff_bytes_per_s")
    if rate:
        t = nbytes / rate
        return ({k: t * v / HANDOFF_COPIES["point"] for k, v in HANDOFF_COPIES.items()},
                f"the main process receives each {nbytes / 1e6:.1f} MB batch from a worker at the hand-off rate "
                f"measured on this machine ({rate / 1e9:.2f} GB/s, {probe.get('bytes', 0) / 1e6:.0f} MB probe: "
                f"{t * 1e3:.1f} ms; range {HANDOFF_COPIES['low'] / HANDOFF_COPIES['point']:.1f}-"
                f"{HANDOFF_COPIES['high'] / HANDOFF_COPIES['point']:.1f}x that, as batch size and load vary it)")
    c = HANDOFF_COPIES
    return ({k: v * one for k, v in c.items()},
            f"the hand-off rate from workers was not measured (a run recorded before haiprof probed it): receiving "
            f"each {nbytes / 1e6:.1f} MB batch and copying it into pinned memory is assumed to take {c['point']}x "
            f"({c['low']}-{c['high']}x, measured on another machine) a copy at the pageable rate "
            f"{nbytes / one / 1e9:.1f} GB/s")
