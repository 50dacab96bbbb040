"""Utilization summary from the system sampler's records (cumulative counters become rates here)."""
from __future__ import annotations

import statistics

from .counters import rate_series
from .findings import Finding


def rates(samples: list[dict], key: str, t0_ns: int | None = None) -> list[tuple[float, float]]:
    """(t_s since t0_ns (default: the first sample), bytes/s) between consecutive samples of a cumulative
    counter; resets skipped."""
    if not samples:
        return []
    t0 = samples[0]["t_ns"] if t0_ns is None else t0_ns
    series = rate_series(samples, lambda s: s.get(key))
    return [((t1 - t0) / 1e9, rate) for t1, rate in zip(series["t1"], series["rate"])]


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def summarize_system(samples: list[dict]) -> dict:
    samples = [s for s in samples if isinstance(s, dict) and "t_ns" in s]
    if not samples:
        return {"samples": 0}
    cores = [sum(s.get("cpu_cores_pct") or [0]) / max(1, len(s.get("cpu_cores_pct") or [0])) for s in samples]
    out = {
        "samples": len(samples),
        "duration_s": (samples[-1]["t_ns"] - samples[0]["t_ns"]) / 1e9,
        "cpu_main_pct_mean": _mean([s.get("cpu_main_pct") for s in samples[1:]]),
        "cpu_children_pct_mean": _mean([s.get("cpu_children_pct") for s in samples[1:]]),
        "cpu_system_pct_mean": _mean(cores[1:]) if len(cores) > 1 else _mean(cores),
        "rss_bytes_max": max(s.get("rss_bytes", 0) for s in samples),
        "procs_max": max((s.get("procs") or 1) for s in samples),
        "sampler_cost_ms_median": statistics.median(s.get("cost_ns", 0) for s in samples) / 1e6,
    }
    for key in ("proc_read_bytes", "proc_write_bytes", "disk_read_bytes", "disk_write_bytes",
                "net_sent_bytes", "net_recv_bytes"):
        r = rates(samples, key)
        out[key.replace("_bytes", "_bytes_per_s_mean")] = _mean([v for _, v in r])
    return out


def work_in_children(system: dict, min_cores: float) -> str:
    """For a run without steps: a sentence when the script's child processes did the work (their CPU, a mean over
    the run, at least `min_cores` of a core and above the script's own process), else "". haiprof records the
    process it starts; a script that trains in processes it spawns otherwise got only "no training steps"."""
    children, main = system.get("cpu_children_pct_mean"), system.get("cpu_main_pct_mean")
    if children is None or main is None or children < 100 * min_cores or children <= main:
        return ""
    n = max(1, int(system.get("procs_max") or 1) - 1)
    return (f" The work ran in the processes the script started (up to {n} at once; {children:.0f}% of a core against "
            f"{main:.0f}% in its own): haiprof records the process it starts, not the ones the script spawns "
            f"(torch.multiprocessing.spawn, a Pool). To profile the ranks, start them torchrun's way (each reading "
            f"RANK and WORLD_SIZE from its environment) with `haiprof run --nproc-per-node N`.")


RATE_SERIES = (("proc_read_bytes", "process read"), ("proc_write_bytes", "process write"),
               ("disk_read_bytes", "disk read"), ("disk_write_bytes", "disk write"),
               ("net_recv_bytes", "net recv"), ("net_sent_bytes", "net sent"))


def system_timelines(samples: list[dict], t0_ns: int | None = None) -> dict:
    """Series for the report: {"cpu": [(label, t_s, values)], "cpu_host": [...], "mem": [...], "io_mib_s": [...]};
    t_s counts from t0_ns (the run's start, so every chart shares one origin with the steps), default the first
    sample."""
    samples = [s for s in samples if isinstance(s, dict) and "t_ns" in s]
    if not samples:
        return {}
    t0 = samples[0]["t_ns"] if t0_ns is None else t0_ns
    t = [(s["t_ns"] - t0) / 1e9 for s in samples]
    cores = [sum(s.get("cpu_cores_pct") or [0]) / max(1, len(s.get("cpu_cores_pct") or [0])) for s in samples]
    io = []
    for key, label in RATE_SERIES:
        r = rates(samples, key, t0)
        io.append((label, [a for a, _ in r], [b / 2**20 for _, b in r]))
    # Two quantities, two charts: a process's CPU is a sum over the cores it runs on (100% = one core, up to
    # cores x 100%); the host's is a mean of its cores (100% = every core busy).
    return {
        "cpu": [("training process", t, [s.get("cpu_main_pct") for s in samples]),
                ("children (DataLoader workers)", t, [s.get("cpu_children_pct") for s in samples])],
        "cpu_host": [("all processes, mean of cores", t, cores)],
        "mem": [("process tree RSS", t, [s.get("rss_bytes", 0) / 2**30 for s in samples])],
        "io_mib_s": io,
    }


def run_cores(sample: dict) -> float:
    """Cores the run's own processes took in a system sample: the training process, its children (DataLoader
    workers) and torch.compile's worker pool (counted apart by the sampler, never a neighbour)."""
    return ((sample.get("cpu_main_pct") or 0.0) + (sample.get("cpu_children_pct") or 0.0)
            + (sample.get("cpu_compile_pct") or 0.0)) / 100.0


def load_samples(samples: list[dict]) -> list[dict]:
    """The system samples that measured the host's CPUs over an interval: with per-core CPU, the first left out
    (no interval behind it)."""
    return [s for s in samples if isinstance(s, dict) and "t_ns" in s and s.get("cpu_cores_pct")][1:]


def other_cores(sample: dict) -> float:
    """Cores processes other than the run's took in a system sample (one of load_samples): the host's busy cores
    less the run's own (run_cores). The one definition of other processes' load: the busy-neighbour finding
    averages it over the run (other_cores_mean), a fix comparison's conditions take its median
    (conditions.other_load). Slightly negative where the two readings' jitter crosses: clipped by the caller."""
    return sum(sample["cpu_cores_pct"]) / 100.0 - run_cores(sample)


def neighbour_finding(samples: list[dict], saturated: float, others_min: float) -> dict | None:
    """A busy neighbour: the host's CPUs were at least `saturated` busy (mean over cores) while processes other
    than this run's took at least `others_min` of the machine on average (other_cores). Step times and speedups
    measured then are noisy: the run waited for CPUs it did not get."""
    samples = load_samples(samples)
    if len(samples) < 3:
        return None
    n_cores = len(samples[-1]["cpu_cores_pct"])
    host = _mean([sum(s["cpu_cores_pct"]) / len(s["cpu_cores_pct"]) for s in samples]) / 100.0
    ours = _mean([run_cores(s) for s in samples])
    others = max(0.0, _mean([other_cores(s) for s in samples]))
    if host < saturated or others < others_min * n_cores:
        return None
    return Finding(kind="busy-neighbour", severity="moderate", share=0.0,
                   message=f"a busy machine: its {n_cores} CPU cores were {100 * host:.0f}% busy while this run's "
                           f"processes used {ours:.2f} core(s); other processes took {others:.2f} core(s). Step times, "
                           f"the verdict and any speedup measured now are noisy: measure again on a quiet machine",
                   evidence={"host_cpu_busy": host, "run_cores": ours, "other_cores_mean": others, "cores": n_cores,
                             "samples": len(samples), "thresholds": {"saturated": saturated, "others": others_min}},
                   fixes=[]).as_dict()

