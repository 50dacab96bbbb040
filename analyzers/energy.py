"""Energy per step and per phase: integrate power over the step and phase intervals.

Power comes as piecewise-constant segments (t0_ns, t1_ns, watts): from cumulative energy counters (NVML total
energy in mJ, RAPL energy_uj with its wrap) as delta-energy over delta-time, or from instantaneous NVML power
readings (the mean of two consecutive readings over the interval between them). Each segment's joules are split
over the phases by the same interval arithmetic as the step breakdown (analyzers/steps.attribute), so "energy
while waiting for input" means joules drawn during dataloader + h2d time.
"""
from __future__ import annotations

import bisect
import statistics

from . import counters
from .steps import ALL_PHASES, attribute


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


def phase_intervals(records, split: tuple | None = None) -> list[tuple[str, int, int]]:
    """The intervals energy is split by: the host phases on CPU runs; on CUDA runs the device partition (the
    same as time's, analyzers/device_timeline.py): the GPU's spans are its busy time, and the host's phases only
    explain the gaps between them, so a DataLoader wait the GPU computed through is no energy spent waiting."""
    from .steps import split_records
    host, gpu, _ = split.legacy() if hasattr(split, "legacy") else split if split is not None else \
        split_records(records)
    if not gpu:
        return host
    union: list[list[int]] = []
    for _, a, b in sorted(gpu, key=lambda iv: iv[1]):
        if union and a <= union[-1][1]:
            union[-1][1] = max(union[-1][1], b)
        else:
            union.append([a, b])
    starts = [u[0] for u in union]
    out = list(gpu)
    for phase, s, e in host:   # each host interval less the device's busy time
        cur, i = s, max(0, bisect.bisect_right(starts, s) - 1)
        while i < len(union) and union[i][0] < e:
            a, b = union[i]
            if b > cur:
                if a > cur:
                    out.append((phase, cur, min(a, e)))
                cur = max(cur, b)
            i += 1
        if cur < e:
            out.append((phase, cur, e))
    return out


def integrate(steps, intervals, segments) -> list[dict]:
    """Per step: {"index", "joules", "phases": {phase: joules}}; segments are summed (several sources)."""
    segments = sorted(segments)
    seg_starts = [s[0] for s in segments]
    ivs = sorted(intervals, key=lambda iv: iv[1])
    iv_starts = [iv[1] for iv in ivs]
    longest = max((e - s for _, s, e in ivs), default=0)
    longest_seg = max((b - a for a, b, _ in segments), default=0)
    out = []
    for st in steps:
        lo = bisect.bisect_left(iv_starts, st.start_ns - longest)
        hi = bisect.bisect_left(iv_starts, st.end_ns)
        local = [iv for iv in ivs[lo:hi] if iv[2] > st.start_ns]
        phases = dict.fromkeys(ALL_PHASES, 0.0)
        j0 = bisect.bisect_left(seg_starts, st.start_ns - longest_seg)
        j1 = bisect.bisect_left(seg_starts, st.end_ns)
        covered = 0
        for a, b, watts in segments[j0:j1]:
            a, b = max(a, st.start_ns), min(b, st.end_ns)
            if b <= a:
                continue
            covered += b - a
            for p, ns in attribute(local, a, b).items():
                phases[p] += watts * ns / 1e9
        out.append({"index": st.index, "joules": sum(phases.values()), "phases": phases,
                    "covered_ns": covered, "duration_ns": st.duration_ns})
    return out


def summarize(steps, steady, intervals, sources: dict[str, list]) -> dict:
    """sources: name -> segments. Returns the summary.json "energy" block (available False with a reason)."""
    sources = {k: v for k, v in sources.items() if v}
    if not sources:
        return {"available": False}
    if not steps:
        return {"available": False, "reason": "power was sampled but no training steps were detected"}
    all_segs = [s for segs in sources.values() for s in segs]
    per_step = integrate(steps, intervals, all_segs)
    steady_idx = {s.index for s in steady}
    chosen = [p for p in per_step if p["index"] in steady_idx and p["covered_ns"] > 0]
    if not chosen:
        return {"available": False, "reason": "no power sample covered a training step (steps too few or too short "
                                              "for the sampling interval)"}
    total = sum(p["joules"] for p in chosen)
    by_phase = {ph: sum(p["phases"][ph] for p in chosen) for ph in ALL_PHASES}
    by_source = {}
    for name, segs in sources.items():
        by_source[name] = {"joules": sum(p["joules"] for p in integrate(steady, intervals, segs)),
                           "mean_watts": statistics.fmean(w for _, _, w in segs)}
    waiting = by_phase["dataloader"] + by_phase["h2d"]
    coverage = sum(p["covered_ns"] for p in chosen) / max(1, sum(p["duration_ns"] for p in chosen))
    return {
        "available": True, "sources": by_source, "steps": len(chosen),
        "joules_total": total,
        "joules_per_step_median": statistics.median(p["joules"] for p in chosen),
        "phase_joules": by_phase,
        "phase_share": {ph: (v / total if total > 0 else 0.0) for ph, v in by_phase.items()},
        "waiting_for_input_share": waiting / total if total > 0 else 0.0,
        "coverage": coverage,
        "per_step": [{"index": p["index"], "joules": p["joules"]} for p in per_step],
    }


def finding(energy: dict, note_at: float) -> dict | None:
    if not energy.get("available"):
        return None
    share = energy["waiting_for_input_share"]
    if share < note_at:
        return None
    return {"kind": "energy", "severity": "info", "share": 0.0,
            "message": f"{100 * share:.0f}% of energy ({energy['phase_joules']['dataloader'] + energy['phase_joules']['h2d']:.0f} J "
                       f"of {energy['joules_total']:.0f} J) was spent while waiting for input",
            "evidence": {"waiting_for_input_share": share, "joules_total": energy["joules_total"],
                         "joules_per_step_median": energy["joules_per_step_median"],
                         "sources": sorted(energy["sources"])},
            "fixes": ["prefetch"]}
