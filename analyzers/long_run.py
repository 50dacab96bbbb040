"""Findings over the whole run, not its typical step: step-time drift, periodic stalls, memory creep.

Pure functions over numpy arrays (one entry per step, or per sample), so a run of millions of steps costs a few
vectorised passes. Each finding carries its evidence; a steady run gets none of them:

  * drift: the step time moves steadily over the run. The steady steps are cut into TREND_CHUNKS equal chunks
    and each chunk's median taken (stalls and noise do not move a median); the trend is a line through those
    medians. A drift needs the line to change the step by DRIFT_MIN and the chunk medians to follow it in order
    (rank correlation >= MONOTONE) and lie on it (R^2 >= LINEAR_FIT): noise is not a trend, and neither is a jump
    (a neighbour's job starting on the machine moves the step time once, it does not drift).
  * periodic stalls: steps longer than STALL_FACTOR x the median step (and STALL_MIN_NS longer) that recur at a
    regular interval, in steps (an epoch boundary, a checkpoint every N steps) or in seconds (a timer). Their
    cause is the phase that holds the extra time, and whether a new DataLoader iterator began in that step
    (an epoch start). Stalls on adjacent steps are one occurrence (a slow stretch; at every step it is the step
    itself), so a period is 2 steps or more, between MIN_STALLS occurrences; a step period takes +-1 step only
    where that is within PERIOD_TOL (10 steps and more: at 2 it would admit any interval of 1 to 3), and a period
    in seconds is read on the ordinary steps between occurrences, not on the stalls' own length (long stalls
    close together are evenly spaced in time whatever their pattern).
  * memory creep: a memory series (host RSS of the process tree, device memory allocated) that grows steadily:
    the same chunk-median trend, by at least CREEP_MIN_FRACTION and CREEP_MIN_BYTES over the run, over as many
    steady steps as a drift needs (MIN_TREND_STEPS), on a line (LINEAR_FIT: one allocation is a jump, not a leak)
    and still growing in the run's second half (LATE_RATE: start-up allocation, such as a model loading its
    weights or the allocator warming its pools, stops; a leak keeps its rate).
"""
from __future__ import annotations

import numpy as np

from .findings import Finding

TREND_CHUNKS = 10
MIN_TREND_STEPS = 40          # fewer steps: no trend finding (a chunk of 4 steps has no median worth the name)
DRIFT_MIN = 0.10              # the trend moves the step time by 10% or more over the run
MONOTONE = 0.8                # Spearman rank correlation of the chunk medians with time
LINEAR_FIT = 0.85             # R^2 of the line through the chunk medians: below it the step time jumped, not drifted
STALL_FACTOR = 2.0
STALL_MIN_NS = 1_000_000      # and at least 1 ms longer than the median step: sub-ms jitter is no stall
MIN_STALLS = 4                # a period needs four stalls (three intervals): two intervals agree by chance
PERIOD_AGREE = 0.6            # that share of the intervals between stalls must be the same (+-1 step or +-10%)
GRID_FILLED = 1.0             # a period among one-off slow steps: every place of its grid taken, first to last,
GRID_MIN = 5                  # by this many stalls at least (random slow steps pair up, they fill no grid)
PERIOD_TOL = 0.10             # how far an interval may be off the period and still agree with it
CREEP_MIN_FRACTION = 0.10
CREEP_MIN_BYTES = 64 << 20
MIN_CREEP_SAMPLES = 10
LATE_RATE = 0.5               # the second half's own growth rate, against the whole run's: below it the rise stopped


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3g} ms"


def _spearman(y: np.ndarray) -> float:
    """Rank correlation of y with its order (1: strictly rising, -1: strictly falling)."""
    n = len(y)
    if n < 3 or np.all(y == y[0]):
        return 0.0
    ranks = np.argsort(np.argsort(y, kind="stable"), kind="stable").astype(float)
    return float(np.corrcoef(np.arange(n, dtype=float), ranks)[0, 1])


def chunk_trend(values: np.ndarray, chunks: int = TREND_CHUNKS) -> dict | None:
    """Median of each of `chunks` equal chunks, the least-squares line through them, its value at the run's start
    and end, and how monotone the medians are."""
    values = np.asarray(values, dtype=float)
    if len(values) < chunks * 2:
        return None
    parts = np.array_split(values, chunks)
    medians = np.array([np.median(p) for p in parts])
    x = (np.arange(chunks, dtype=float) + 0.5) / chunks   # chunk centres, as fractions of the run
    slope, intercept = np.polyfit(x, medians, 1)
    start, end = intercept, intercept + slope   # the line at the run's first and last step
    residual = medians - (intercept + slope * x)
    spread = float(np.sum((medians - medians.mean()) ** 2))
    r2 = 1.0 - float(np.sum(residual ** 2)) / spread if spread > 0 else 0.0
    return {"medians": medians, "start": float(start), "end": float(end), "monotone": _spearman(medians),
            "r2": r2}


def drift(durations_ns: np.ndarray) -> dict | None:
    """A steady rise (or fall) of the step time over the run."""
    d = np.asarray(durations_ns, dtype=float)
    if len(d) < MIN_TREND_STEPS:
        return None
    tr = chunk_trend(d)
    if tr is None or tr["start"] <= 0:
        return None
    change = (tr["end"] - tr["start"]) / tr["start"]
    direction = 1 if change > 0 else -1
    if abs(change) < DRIFT_MIN or direction * tr["monotone"] < MONOTONE or tr["r2"] < LINEAR_FIT:
        return None   # noise, or a jump (a neighbour's job starting, a new phase of the data): not a trend
    severity = "high" if change >= 2 * DRIFT_MIN + 0.05 else "moderate" if change > 0 else "info"
    how = "steadily"
    word = "rose" if change > 0 else "fell"
    med = tr["medians"]
    return Finding(
        kind="drift", severity=severity, share=abs(change),
        message=(f"the step time {word} {how} over the run, from {_ms(tr['start'])} to {_ms(tr['end'])} "
                 f"({change:+.0%} over {len(d)} steps; the median of each tenth of the run: "
                 f"{', '.join(f'{m / 1e6:.3g}' for m in med)} ms)"),
        evidence={"steps": int(len(d)), "start_s": tr["start"] / 1e9, "end_s": tr["end"] / 1e9,
                  "change": float(change), "chunk_median_s": [float(m / 1e9) for m in med],
                  "rank_correlation": tr["monotone"], "linear_fit_r2": tr["r2"],
                  "thresholds": {"change": DRIFT_MIN, "monotone": MONOTONE}},
        fixes=[],
    ).as_dict()


def _period(values: np.ndarray, tolerance, report: np.ndarray | None = None) -> tuple[float, float] | None:
    """The interval most of `values` (intervals between stalls) agree on, and the share that agrees; `report`:
    what to give as the period instead, the median of its entries where `values` agree (same order)."""
    if len(values) < MIN_STALLS - 1:
        return None
    report = values if report is None else report
    best, agree = None, 0.0
    for candidate in np.unique(np.round(values, 6)):
        close = np.abs(values - candidate) <= tolerance(candidate)
        share = float(np.mean(close))
        # three intervals that agree, whatever share they are: two (16 and 15 among 16, 85, 15) are a busy
        # machine's slow steps pairing up by chance, as often as not
        if share > agree and close.sum() >= MIN_STALLS - 1:
            best, agree = float(np.median(report[close])), share
    return (best, agree) if best is not None and agree >= PERIOD_AGREE else None


def _grid_period(at: np.ndarray) -> tuple[float, float, np.ndarray] | None:
    """A step period that one-off slow steps break up: (period, agreeing share, per occurrence whether it is on
    the period). An occurrence agrees when another lies one period before or after it (+-_step_tolerance), so a
    one-off between two occurrences (intervals 14 and 6 of a period of 20) leaves the others on the grid."""
    if len(at) < MIN_STALLS:
        return None
    diffs = (at[None, :] - at[:, None])
    best = None
    for c in np.unique(diffs[(diffs >= 2)]):
        tol = _step_tolerance(float(c))
        on = (np.abs(np.abs(diffs) - c) <= tol).any(axis=1)
        share = float(np.mean(on))
        if on.sum() < GRID_MIN or share < PERIOD_AGREE:
            continue
        # one grid, mostly filled: every occurrence on it a whole number of periods from the first, and most of
        # the grid's places between the first and the last taken (random slow steps pair up, they fill no grid)
        grid_at = at[on]
        place = np.round((grid_at - grid_at[0]) / c)
        if np.any(np.abs(grid_at - grid_at[0] - place * c) > tol) or \
                len(np.unique(place)) < GRID_FILLED * (place[-1] + 1):
            continue
        if best is None or share > best[1]:
            best = (float(np.median(np.diff(at[on]))) if on.sum() > 1 else float(c), share, on)
    return best


def _on_period(idx: np.ndarray, first_i: np.ndarray, step: np.ndarray, period: float) -> tuple:
    """The stalls (idx) and occurrences (first_i) of those occurrences that have another one period before or after
    them (+-_step_tolerance): the agreeing intervals' ends. All of them when fewer than two would be left."""
    at = step[first_i].astype(float)
    on = (np.abs(np.abs(at[None, :] - at[:, None]) - period) <= _step_tolerance(period)).any(axis=1)
    if on.all() or on.sum() < 2:
        return idx, first_i
    occurrence = np.cumsum(np.r_[True, np.diff(step[idx]) > 1]) - 1
    return idx[on[occurrence]], first_i[on]


def _step_tolerance(period: float) -> float:
    """A stall one step early or late agrees with a period of 10 steps or more (within PERIOD_TOL); below, the
    period must be exact: a step's slack would make 2 agree with 1 and 3, so any dense slow steps."""
    return 1.0 if period * PERIOD_TOL >= 1 else 0.0


def periodic_stalls(durations_ns: np.ndarray, starts_ns: np.ndarray, phases_ns: dict | None = None,
                    new_loader: np.ndarray | None = None, index: np.ndarray | None = None,
                    own_periods_s: dict | None = None) -> dict | None:
    """Stalls that recur every N steps or every T seconds, with what they spent their extra time on.
    `phases_ns`: phase -> per-step ns (same order); `new_loader`: per step, a DataLoader iterator began in it;
    `index`: each entry's step index in the run (default 0..n-1): the steady steps skip warm-up and traced steps,
    so periods and first steps are counted in the run's own numbering, the step chart's and the tables';
    `own_periods_s`: what of the profiler itself runs periodically -> its period: a stall at that period (and at
    no step period) is the profiler's own cost on tiny steps, said so, not blamed on the script."""
    d = np.asarray(durations_ns, dtype=float)
    if len(d) < MIN_TREND_STEPS:
        return None
    median = float(np.median(d))
    stall = (d > STALL_FACTOR * median) & (d - median >= STALL_MIN_NS)
    all_idx = np.flatnonzero(stall)
    if len(all_idx) < MIN_STALLS:
        return None
    starts = np.asarray(starts_ns, dtype=float)
    step = np.arange(len(d)) if index is None else np.asarray(index, dtype=np.int64)
    # A busy machine adds slow steps at random: the periodic stalls are then the larger ones, so the period is
    # looked for among all stalls, then among those at least a half and a quarter of the largest's excess.
    excess_all = d[all_idx] - median
    by_steps = by_time = None
    for level in (0.0, 0.5, 0.25):
        idx = all_idx[excess_all >= level * excess_all.max()]
        # stalls on adjacent steps (in the run's numbering) are one occurrence, from its first step to its last
        new = np.flatnonzero(np.r_[True, np.diff(step[idx]) > 1])
        first_i, last_i = idx[new], idx[np.r_[new[1:] - 1, len(idx) - 1]]
        if len(first_i) < MIN_STALLS:
            continue
        by_steps = _period(np.diff(step[first_i]).astype(float), _step_tolerance)
        between = starts[first_i[1:]] - (starts[last_i[:-1]] + d[last_i[:-1]])   # the ordinary steps' time
        by_time = _period(between, lambda c: PERIOD_TOL * c, np.diff(starts[first_i]))
        if by_steps is not None or by_time is not None:
            break
    if by_steps is not None:   # a one-off slow step (a busy moment) off the period is no stall of it
        idx, first_i = _on_period(idx, first_i, step, by_steps[0])
    if by_steps is None and by_time is None:
        # one-off slow steps between the occurrences (intervals 14 and 6 of a period of 20): the period of the
        # larger stalls that lie a period apart, and only those stalls (never among all of a busy machine's)
        for level in (0.5, 0.25, 0.1):
            idx = all_idx[excess_all >= level * excess_all.max()]
            occurrence = np.cumsum(np.r_[True, np.diff(step[idx]) > 1]) - 1
            first_i = idx[np.flatnonzero(np.r_[True, np.diff(step[idx]) > 1])]
            grid = _grid_period(step[first_i].astype(np.int64))
            if grid is not None:
                idx, first_i = idx[grid[2][occurrence]], first_i[grid[2]]
                by_steps = (float(np.round(grid[0])), grid[1])
                break
    if by_steps is None and by_time is None:
        return None
    excess = d[idx] - median
    total = float(d.sum())
    share = float(excess.sum()) / total if total else 0.0
    cause, per_phase = _stall_cause(idx, phases_ns, new_loader)
    own = None
    if by_time is not None and not cause.startswith("epoch start"):
        own = next((what for what, period in (own_periods_s or {}).items()
                    if abs(by_time[0] / 1e9 - period) <= 0.1 * period), None)
    if own is not None:
        by_steps = None   # steps of near-constant length line up with any timer: the timer is the period
        cause = f"the period is that of {own}: the profiler's own cost, visible on steps this short ({cause})"
    if by_steps is not None:
        every = f"every {by_steps[0]:.0f} steps"
    else:
        every = f"every {by_time[0] / 1e9:.3g} s"
    severity = "info" if own else "high" if share >= 0.10 else "moderate" if share >= 0.03 else "low"
    first = [int(i) for i in step[idx[:5]]]
    return Finding(
        kind="periodic-stall", severity=severity, share=share,
        message=(f"a stall {every}: {len(idx)} steps took {_ms(float(np.median(d[idx])))} against a "
                 f"{_ms(median)} median step (+{_ms(float(np.median(excess)))} each, {_pct(share)} of all step "
                 f"time); {cause}"),
        evidence={"stalls": int(len(idx)), "occurrences": int(len(first_i)),
                  "period_steps": by_steps[0] if by_steps else None,
                  "period_s": by_time[0] / 1e9 if by_time else None, "median_step_s": median / 1e9,
                  "median_stall_s": float(np.median(d[idx])) / 1e9, "share": share, "first_steps": first,
                  "excess_by_phase_s": per_phase, "profiler_own": own, "thresholds": {"factor": STALL_FACTOR,
                                                                 "min_excess_s": STALL_MIN_NS / 1e9}},
        fixes=["prefetch"] if not own and (cause.startswith("epoch start") or "waiting for the DataLoader" in
                                           cause) else [],
    ).as_dict()


def _stall_cause(idx: np.ndarray, phases_ns: dict | None, new_loader: np.ndarray | None) -> tuple[str, dict]:
    if not phases_ns:
        return "their cause is not recorded", {}
    excess = {}
    for phase, values in phases_ns.items():
        v = np.asarray(values, dtype=float)
        excess[phase] = float(np.sum(v[idx] - np.median(v))) / len(idx) / 1e9
    top = max(excess, key=excess.get)
    per_phase = {k: round(v, 6) for k, v in excess.items() if v > 0}
    epoch = new_loader is not None and float(np.mean(np.asarray(new_loader)[idx])) >= 0.6
    if epoch and top == "dataloader":
        return ("epoch start: a new DataLoader iterator begins in these steps and its first batch waits "
                f"{excess[top] * 1e3:.3g} ms longer (workers start again: persistent_workers=True keeps them)"), \
            per_phase
    what = {"dataloader": "waiting for the DataLoader", "other": "outside the training phases (checkpointing, "
            "logging, evaluation or a host sync in the script's own code)", "allreduce": "communication",
            "h2d": "host-to-device copies", "optimizer": "the optimizer", "forward": "forward",
            "backward": "backward"}.get(top, top)
    return f"the extra time is {what} (+{excess[top] * 1e3:.3g} ms a stall)", per_phase


def _late_slope(medians: np.ndarray) -> float:
    """Slope of the line through the second half of the chunk medians, in the same units as end - start."""
    n = len(medians)
    x = (np.arange(n, dtype=float) + 0.5) / n
    return float(np.polyfit(x[n // 2:], medians[n // 2:], 1)[0])


def memory_creep(t_ns: np.ndarray, values: np.ndarray, what: str, steps: int | None = None) -> dict | None:
    """A memory series that grows steadily over the run (a leak: tensors kept in a list, a growing cache).
    `steps`: the steady steps the series covers (None: not known); a trend needs MIN_TREND_STEPS of them."""
    v = np.asarray(values, dtype=float)
    t = np.asarray(t_ns, dtype=float)
    if len(v) < MIN_CREEP_SAMPLES or (steps is not None and steps < MIN_TREND_STEPS):
        return None   # a few steps are the start-up, whatever their length: no rate per hour from them
    tr = chunk_trend(v, min(TREND_CHUNKS, len(v) // 2))
    if tr is None:
        return None
    grown = tr["end"] - tr["start"]
    if grown < CREEP_MIN_BYTES or tr["start"] <= 0 or grown / tr["start"] < CREEP_MIN_FRACTION \
            or tr["monotone"] < MONOTONE:
        return None
    # A leak grows at a rate: one allocation (a cache built once, a graph captured) is a jump off the line, and a
    # rise that stops (weights loaded, allocator pools warmed) has no late growth; neither is a leak.
    late = _late_slope(tr["medians"])
    if tr["r2"] < LINEAR_FIT or late < LATE_RATE * grown:
        return None
    span_s = (t[-1] - t[0]) / 1e9 if len(t) > 1 else 0.0
    rate = grown / span_s if span_s > 0 else 0.0
    per_hour = rate * 3600
    severity = "high" if grown / tr["start"] >= 0.5 else "moderate"
    return Finding(
        kind="memory-creep", severity=severity, share=grown / tr["start"],
        message=(f"{what} grew steadily from {tr['start'] / 2**20:.0f} MiB to {tr['end'] / 2**20:.0f} MiB over "
                 f"{span_s:.0f} s ({per_hour / 2**30:.2f} GiB per hour at this rate): a leak, such as losses or "
                 "outputs kept with their graph, or a cache that never evicts"),
        evidence={"series": what, "start_bytes": tr["start"], "end_bytes": tr["end"], "seconds": span_s,
                  "bytes_per_s": rate, "samples": int(len(v)), "steps": steps,
                  "rank_correlation": tr["monotone"],
                  "linear_fit_r2": tr["r2"], "late_growth_ratio": late / grown,
                  "thresholds": {"fraction": CREEP_MIN_FRACTION, "bytes": CREEP_MIN_BYTES,
                                 "steps": MIN_TREND_STEPS, "linear_fit": LINEAR_FIT, "late_rate": LATE_RATE}},
        fixes=[],
    ).as_dict()


def slowest_steps(durations_ns: np.ndarray, index: np.ndarray, phases_ns: dict, top: int = 20,
                  notes: dict | None = None) -> list[dict]:
    """The `top` slowest steps, each with its phases (ms) and what else happened in it (`notes`: step index ->
    list of strings, e.g. "epoch start", "eval before", "traced")."""
    d = np.asarray(durations_ns)
    if len(d) == 0:
        return []
    k = min(top, len(d))
    order = np.argpartition(-d, k - 1)[:k]
    order = order[np.argsort(-d[order], kind="stable")]
    rows = []
    for i in order:
        step = int(index[i])
        rows.append({"step": step, "time_ms": float(d[i]) / 1e6,
                     "phases_ms": {p: float(v[i]) / 1e6 for p, v in phases_ns.items() if v[i] > 0},
                     "notes": list((notes or {}).get(step, []))})
    return rows
