"""The step chart's data from numpy columns (step index, duration ns, ns per phase): whole-run buckets
(min/median/max and the mean phase split per bucket) and the compact per-step detail the page re-buckets from
on zoom (render/js/steps.js decodes it).

The detail is the finest level that fits the byte budget, tried in order of fidelity: every step with times to
0.07% and phase shares to 1/255, then coarser (times to 1.1%, shares to 1/15), then groups of 2, 5, 10, ... steps
(min/median/max/mean and the mean phase shares per group). Layout (gzipped, base64), unit after unit in planes
of bytes (byte 0 of every value, then byte 1, ...: similar numbers compress well):
    start u32 (first step index, as the difference from the previous unit's), count u32, span u32 (last - first)
    k == 1: duration u16 | k > 1: mean, min, median, max u16      times as round(log2(ns) * R), 0 for 0 ns
    share u8 per phase: round(S * phase ns / duration (the mean for a group))
"""
from __future__ import annotations

import base64
import gzip

import numpy as np

LEVEL = 6          # gzip level: 9 saves ~1% here and takes twice as long
SAMPLE = 16384     # units compressed to predict a level's size before compressing all of it

# (steps per unit, R: time codes per octave, S: share steps) in order of fidelity
LADDER = [(1, 1024, 255), (1, 256, 63), (1, 128, 31), (1, 64, 15)] + \
         [(k, 256, 63) for k in (2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 10**5)]


def _planes(a: np.ndarray, width: int) -> bytes:
    a = np.ascontiguousarray(a.astype(f"<u{width}"))
    return a.view(np.uint8).reshape(-1, width).T.tobytes()


def _code(ns: np.ndarray, r: int) -> np.ndarray:
    ns = np.asarray(ns, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.rint(np.log2(np.maximum(ns, 1.0)) * r)
    return np.where(ns >= 1.0, np.clip(q, 1, 65535), 0).astype(np.uint16)


def _units(n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(first row, rows) of each unit of k consecutive rows."""
    first = np.arange(0, n, k)
    return first, np.diff(np.append(first, n))


def buckets(idx: np.ndarray, dur: np.ndarray, phases: dict, k: int) -> dict:
    """Units of k consecutive steps: first/last step, count, min/median/max/mean ns and mean ns per phase."""
    n = len(idx)
    first, cnt = _units(n, k)
    last = first + cnt - 1
    pad = np.full(len(first) * k, np.nan)
    pad[:n] = dur
    return {"first": idx[first], "last": idx[last], "count": cnt,
            "min": np.minimum.reduceat(dur, first), "max": np.maximum.reduceat(dur, first),
            "median": np.nanmedian(pad.reshape(-1, k), axis=1) if k > 1 else dur.astype(np.float64),
            "mean": np.add.reduceat(dur, first) / cnt,
            "phases": {p: np.add.reduceat(v, first) / cnt for p, v in phases.items()}}


def _pack(idx, dur, phases: dict, k: int, r: int, s: int) -> bytes:
    b = buckets(idx, dur, phases, k)
    starts = b["first"].astype(np.int64)
    delta = np.diff(starts, prepend=0)
    parts = [_planes(delta, 4), _planes(b["count"], 4), _planes(b["last"] - starts, 4)]
    parts += [_planes(_code(b["mean"], r), 2)] if k == 1 else \
        [_planes(_code(b[key], r), 2) for key in ("mean", "min", "median", "max")]
    with np.errstate(divide="ignore", invalid="ignore"):
        for p in phases:
            share = np.where(b["mean"] > 0, b["phases"][p] / b["mean"], 0.0)
            parts.append(np.rint(np.clip(share, 0, 1) * s).astype(np.uint8).tobytes())
    return gzip.compress(b"".join(parts), LEVEL, mtime=0)


def encode(idx, dur, phases: dict, budget: int) -> dict | None:
    """The finest level of LADDER whose base64 fits `budget` bytes (None: not even the coarsest does)."""
    idx = np.asarray(idx, dtype=np.int64)
    if len(idx) == 0 or idx[0] < 0 or idx[-1] - idx[0] >= 2**32:
        return None
    dur = np.asarray(dur, dtype=np.float64)
    phases = {p: np.asarray(v, dtype=np.float64) for p, v in phases.items()}
    n = len(idx)
    for k, r, s in LADDER:
        units = -(-n // k)
        if units > budget * 8:        # can't fit at a sixth of a byte a unit: not worth compressing
            continue
        if units > 2 * SAMPLE:        # predict from a sample of the run's middle: one full compression only
            m = (n // 2) // k * k
            part = slice(m, min(n, m + SAMPLE * k))
            est = len(_pack(idx[part], dur[part], {p: v[part] for p, v in phases.items()}, k, r, s))
            if est * units / SAMPLE * 4 / 3 > budget * 1.05:
                continue
        b64 = base64.b64encode(_pack(idx, dur, phases, k, r, s)).decode("ascii")
        if len(b64) <= budget:
            return {"k": k, "R": r, "S": s, "units": units, "steps": n, "b64": b64}
    return None


def traced_runs(traced) -> list[list[int]]:
    """Sorted step indices as [first, last] runs of consecutive steps (one shaded rectangle each)."""
    runs: list[list[int]] = []
    for i in sorted(set(int(t) for t in traced)):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return runs
