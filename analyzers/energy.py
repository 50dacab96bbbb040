"""Energy per step and per phase: integrate power over the step and phase intervals.

Power comes as piecewise-constant segments (t0_ns, t1_ns, watts): from cumulative energy counters (NVML total
energy in mJ, RAPL energy_uj with its wrap) as delta-energy over delta-time, or from instantaneous NVML power
readings (the mean of two consecutive readings over the interval between them). Each segment's joules are split
over the phases by the same rule as the step breakdown (analyzers/timeline_owner.py), so "energy while waiting
for input" means joules drawn during dataloader + h2d time.
"""
from __future__ import annotations

import statistics

import numpy as np

from . import counters
from .findings import Finding
from .step_columns import ALL_PHASES, Split, StepColumns, split_of_records
from .timeline_owner import K, Intervals, Weight, device_partition, owned

NO_INTERVALS = Intervals([], [], [])


def gpu_segments(samples: list[dict]) -> list[tuple[int, int, float]]:
    """Summed over GPUs: energy counter where it exists, else mean power between readings."""
    segs = []
    devices = sorted({d.get("index") for s in samples for d in s.get("devices", [])})
    for idx in devices:
        per = [{"t_ns": s["t_ns"], **d} for s in samples if "t_ns" in s for d in s.get("devices", [])
               if d.get("index") == idx]
        if sum("energy_mj" in p for p in per) >= 2:
            r = counters.rate_series(per, lambda p: p.get("energy_mj"), scale=1e-3)
            segs += list(zip(r["t0"], r["t1"], r["rate"]))
            continue
        pw = [p for p in per if p.get("power_mw") is not None]
        segs += [(a["t_ns"], b["t_ns"], (a["power_mw"] + b["power_mw"]) / 2e3) for a, b in zip(pw, pw[1:])
                 if b["t_ns"] > a["t_ns"]]
    return segs


def rapl_segments(samples: list[dict]) -> list[tuple[int, int, float]]:
    segs = []
    zones = sorted({z for s in samples for z in s.get("zones", {})})
    for z in zones:
        r = counters.rate_series(samples, lambda s: (s.get("zones", {}).get(z) or {}).get("energy_uj"),
                                 max_of=lambda s: (s.get("zones", {}).get(z) or {}).get("max_energy_range_uj"),
                                 scale=1e-6)
        segs += list(zip(r["t0"], r["t1"], r["rate"]))
    return segs


def phase_intervals(records=(), split: Split | None = None) -> tuple[Intervals, Intervals | None]:
    """(host, gpu) intervals energy is split by (`split`: the records' step_columns.Split when the caller has
    it). CPU runs (gpu None): the host phases. CUDA runs: the device partition, the same as time's
    (analyzers/device_timeline.py): the GPU's spans are its busy time, and the host's phases only explain the
    gaps between them, so a DataLoader wait the GPU computed through is no energy spent waiting."""
    if split is None:
        split = split_of_records(records)
    return split.intervals("host"), (split.intervals("gpu") if split.has_gpu else None)


def integrate(steps, intervals: tuple, segments) -> dict:
    """Per step (arrays, in the steps' order): "index", "joules", "phases" (n x ALL_PHASES joules),
    "covered_ns" (power-segment time inside the step, summed over segments), "duration_ns". Segments of several
    sources are added."""
    cols = StepColumns.of(steps)
    seg = np.array([(a, b) for a, b, _ in segments], dtype=np.int64).reshape(-1, 2)
    watts = Weight(seg[:, 0], seg[:, 1], [w for _, _, w in segments])
    a, b = cols.start_ns, cols.end_ns
    host, gpu = intervals
    if gpu is None:
        ns_w = owned(host, a, b, weight=watts)
    else:
        busy, idle = device_partition(host, gpu, a, b, weight=watts)
        ns_w = idle
        ns_w[:, :K] += busy[:, :K]
    phases = ns_w / 1e9
    count = Weight(seg[:, 0], seg[:, 1], np.ones(len(seg)))
    covered = owned(NO_INTERVALS, a, b, weight=count)[:, K] if len(a) else np.zeros(0)
    return {"index": cols.index, "joules": phases.sum(axis=1), "phases": phases, "covered_ns": covered,
            "duration_ns": cols.duration_ns}


PER_STEP_POINTS = 2000   # the energy-per-step series: bucket means beyond this many steps (never one per step)


def summarize(steps, steady, intervals, sources: dict[str, list]) -> dict:
    """sources: name -> segments. Returns the summary.json "energy" block (available False with a reason).
    Every figure in it, the per-step series the report charts included, is over the same steps: the steady
    steps a power sample covered ("steps"), so the chart's bars add up to the text's joules."""
    sources = {k: v for k, v in sources.items() if v}
    if not sources:
        return {"available": False}
    if not len(steps):
        return {"available": False, "reason": "power was sampled but no training steps were detected"}
    all_segs = [s for segs in sources.values() for s in segs]
    per = integrate(steps, intervals, all_segs)
    steady_idx = StepColumns.of(steady).index
    chosen = np.isin(per["index"], steady_idx) & (per["covered_ns"] > 0)
    if not chosen.any():
        return {"available": False, "reason": "no power sample covered a training step (steps too few or too short "
                                              "for the sampling interval)"}
    joules = per["joules"][chosen]
    total = float(joules.sum())
    by_phase = dict(zip(ALL_PHASES, per["phases"][chosen].sum(axis=0).tolist()))
    by_source = {}
    for name, segs in sources.items():
        by_source[name] = {"joules": float(integrate(steps, intervals, segs)["joules"][chosen].sum()),
                           "mean_watts": statistics.fmean(w for _, _, w in segs)}
    waiting = by_phase["dataloader"] + by_phase["h2d"]
    coverage = float(per["covered_ns"][chosen].sum()) / max(1, int(per["duration_ns"][chosen].sum()))
    return {
        "available": True, "sources": by_source, "steps": int(chosen.sum()),
        "joules_total": total,
        "joules_per_step_median": float(np.median(joules)),
        "phase_joules": by_phase,
        "phase_share": {ph: (v / total if total > 0 else 0.0) for ph, v in by_phase.items()},
        "waiting_for_input_share": waiting / total if total > 0 else 0.0,
        "coverage": coverage,
        "per_step": _series(per["index"][chosen], joules),
    }


def _series(index: np.ndarray, joules: np.ndarray) -> list[dict]:
    """Joules per step, as bucket means (index: the bucket's centre) beyond PER_STEP_POINTS steps."""
    k = -(-len(index) // PER_STEP_POINTS)
    if k <= 1:
        return [{"index": i, "joules": j} for i, j in zip(index.tolist(), joules.tolist())]
    edges = np.arange(0, len(index), k)
    cnt = np.diff(np.append(edges, len(index)))
    mid = np.add.reduceat(index.astype(np.float64), edges) / cnt
    return [{"index": i, "joules": j, "steps": c} for i, j, c in
            zip(mid.tolist(), (np.add.reduceat(joules, edges) / cnt).tolist(), cnt.tolist())]


def finding(energy: dict, note_at: float) -> dict | None:
    if not energy.get("available"):
        return None
    share = energy["waiting_for_input_share"]
    if share < note_at:
        return None
    waiting_j = energy["phase_joules"]["dataloader"] + energy["phase_joules"]["h2d"]
    return Finding(kind="energy", severity="info", share=0.0,
                   message=f"{100 * share:.0f}% of energy ({waiting_j:.0f} J of {energy['joules_total']:.0f} J) "
                           f"was spent while waiting for input",
                   evidence={"waiting_for_input_share": share, "joules_total": energy["joules_total"],
                             "joules_per_step_median": energy["joules_per_step_median"],
                             "sources": sorted(energy["sources"])},
                   fixes=["prefetch"]).as_dict()
