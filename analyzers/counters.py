"""Cumulative hardware counters -> deltas and rates, with wrap, saturation and reset handling."""
from __future__ import annotations

U32_MAX = 2**32 - 1


def delta(prev: float, cur: float, width: int = 64, max_value: float | None = None) -> tuple[float | None, str]:
    """(increase, note) between two readings of a cumulative counter.

    note: "" normal; "wrapped" (a 32-bit counter or a counter with a known range rolled over once);
    "saturated" (a 32-bit IB counter stuck at 0xFFFFFFFF: the increase is a lower bound);
    "reset" (went backwards with no known range: the increase is unknown, None).
    """
    if cur >= prev:
        if width == 32 and cur == U32_MAX:
            return cur - prev, "saturated"
        return cur - prev, ""
    if max_value is not None:           # RAPL: energy_uj rolls over at max_energy_range_uj
        return max_value - prev + cur, "wrapped"
    if width == 32 and prev <= U32_MAX:  # a 32-bit counter that wraps instead of saturating
        return U32_MAX + 1 - prev + cur, "wrapped"
    return None, "reset"


def rate_series(samples: list[dict], get, width_of=None, max_of=None, scale: float = 1.0) -> dict:
    """Rates between consecutive samples of one counter.

    get(sample) -> value or None; width_of/max_of(sample) -> counter width / range. Returns
    {"t0": [...ns], "t1": [...ns], "rate": [...per s], "notes": {"wrapped": n, "saturated": n, "reset": n}}.
    """
    out = {"t0": [], "t1": [], "rate": [], "notes": {"wrapped": 0, "saturated": 0, "reset": 0}}
    prev = None
    for s in samples:
        v = get(s)
        if v is None or "t_ns" not in s:
            continue
        if prev is not None:
            pv, pt = prev
            dt = (s["t_ns"] - pt) / 1e9
            d, note = delta(pv, v, width_of(s) if width_of else 64, max_of(s) if max_of else None)
            if note:
                out["notes"][note] += 1
            if dt > 0 and d is not None:
                out["t0"].append(pt)
                out["t1"].append(s["t_ns"])
                out["rate"].append(d * scale / dt)
        prev = (v, s["t_ns"])
    return out


def mean_rate(series: dict) -> float | None:
    """Time-weighted mean of a rate series."""
    total_t = sum((b - a) for a, b in zip(series["t0"], series["t1"]))
    if total_t <= 0:
        return None
    return sum(r * (b - a) for r, a, b in zip(series["rate"], series["t0"], series["t1"])) / total_t
