"""Wiring for the hardware analyzers: samples of the hardware collectors -> summary keys, findings, timelines.

Called from analysis/summary.py. Each block says `available: False` with the collector's recorded reason when its
collector did not run, so the report can show why instead of an empty chart.
"""
from __future__ import annotations

import os

from haiprof.analyzers import devices, energy, input_split, links, numa, slow_link
from haiprof.analyzers import thresholds as T
from haiprof.analyzers.steps import steady_steps

from ..rundir import iter_records

HW_COLLECTORS = ("gpu", "infiniband", "nic", "numa", "membw", "rapl", "storage")


def _why(status: dict, name: str, samples: dict) -> str:
    st = status.get(name)
    if st and not st.get("available"):
        return st.get("reason") or "unavailable"
    if st is None:
        return "not run (this run predates the collector, or the sampler did not start)"
    return "no samples recorded (the run was shorter than one sampling interval)" if not samples.get(name) else ""


def timeline_origin(meta: dict, samples: dict, steps) -> int | None:
    """One origin (CLOCK_MONOTONIC ns) for every time series of the report, so they line up with each other and
    with the steps: the run's start, else the earliest sample or step."""
    t = meta.get("start_monotonic_ns")
    if isinstance(t, int) and not isinstance(t, bool):
        return t
    firsts = [s["t_ns"] for recs in samples.values() for s in recs[:1] if isinstance(s, dict) and "t_ns" in s]
    firsts += [int(steps.start_ns[0])] if len(steps) else []
    return min(firsts, default=None)


def analyze(records: list, all_steps: list, samples: dict, status: dict, meta: dict, origin_ns: int | None,
            valid: list | None = None, split: tuple | None = None) -> dict:
    """{"summary": {"hardware": ..., "energy": ...}, "findings": [...], "timelines": {...}}; time series count
    seconds from origin_ns (timeline_origin)."""
    steady = steady_steps(all_steps, T.WARMUP_STEPS)
    hw: dict = {"collectors": {n: {"available": bool(samples.get(n)), "reason": _why(status, n, samples)}
                               for n in HW_COLLECTORS}}
    tl: dict = {}
    findings: list = []
    window = (int(steady.start_ns[0]), int(steady.end_ns[-1])) if len(steady) else None
    gpu_sum, tl["gpu"] = devices.gpus(samples.get("gpu", []), origin_ns, window)
    hw["gpu"] = gpu_sum
    link_sum, link_tl = links.analyze(samples.get("infiniband", []), samples.get("nic", []))
    hw["links"] = link_sum
    tl.update(link_tl)
    findings += links.findings(link_sum, T.LINK_BUSY)
    if samples.get("tcp"):   # its host's send queues (a distributed job's local rank 0): a job compares nodes
        hw["tcp"] = slow_link.summarize(samples["tcp"], window)
    cross = numa.cross_node(samples.get("numa", []))
    tl["numa"] = cross.pop("_series", [])
    place = numa.placement(samples.get("numa", []), samples.get("gpu", []))
    hw["numa"] = {"cross_node": cross, "placement": place}
    findings += numa.findings(cross, place, T.CROSS_NUMA_MODERATE)
    hw["disks"], tl["disks"] = devices.disks(samples.get("storage", []))
    hw["membw"], tl["membw"] = devices.membw(samples.get("membw", []))

    sources = {"gpu": energy.gpu_segments(samples.get("gpu", [])), "cpu": energy.rapl_segments(samples.get("rapl", []))}
    # the phase intervals only where there is power to split (a long run's records are not walked for nothing)
    intervals = energy.phase_intervals(valid if valid is not None else iter_records(records),
                                       split if hasattr(split, "has_gpu") else None) if any(sources.values()) else None
    en = energy.summarize(all_steps, steady, intervals, sources)
    if not en.get("available") and "reason" not in en:
        en["reason"] = "no power source: GPU (NVML): " + _why(status, "gpu", samples) + \
                       "; CPU (RAPL): " + _why(status, "rapl", samples)
    f = energy.finding(en, T.ENERGY_WAITING_NOTE)
    if f:
        findings.append(f)
    tl["energy_per_step"] = en.pop("per_step", [])
    return {"summary": {"hardware": hw, "energy": en}, "findings": findings, "timelines": tl}


def refine_io(findings: list, records: list, loader_waits, all_steps: list, samples: dict, hw_summary: dict,
              meta: dict) -> list:
    """Replace the io finding with its storage- vs preprocessing-bound split. `loader_waits`: the run's
    `dataloader` rows with extras as columns (PhaseColumns.take), or None; `records`: the other records as lists
    (the @loader marks, and any dataloader record the columns could not hold)."""
    if not any(f.get("kind") == "io" for f in findings):
        return findings
    steady = steady_steps(all_steps, T.WARMUP_STEPS)
    start, end = (int(steady.start_ns[0]), int(steady.end_ns[-1])) if len(steady) else (None, None)
    traced = list(zip(all_steps.start_ns[all_steps.traced].tolist(), all_steps.end_ns[all_steps.traced].tolist()))
    cores = meta.get("cpu_affinity") or meta.get("cpu_count") or os.cpu_count() or 1
    loader = loader_evidence(loader_waits, records)
    out = []
    for f in findings:
        if f.get("kind") == "io":
            f = input_split.classify(f, loader, samples.get("system", []), hw_summary.get("disks", {}), cores,
                                     T.LOADER_CPU_BUSY, T.LOADER_CPU_IDLE, start, end, traced)
        out.append(f)
    return out


def loader_evidence(loader_waits, records: list) -> input_split.Loader:
    """The split's arrays: the `dataloader` rows with extras (PhaseColumns, or None) and any such record among
    `records`, with the workers the @loader marks declare; never a list per wait (a million steps, a million)."""
    if loader_waits is None:
        return input_split.loader_of_records(records)
    return input_split.loader_waits(loader_waits.start, loader_waits.end, loader_waits.nx, loader_waits.xs, records)
