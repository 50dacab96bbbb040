"""A finding's evidence as a readable table: one row per fact (nested keys joined), values with their unit and
three significant digits, read from the key's name (…_share and thresholds as %, …_s/_ns/_us as time, …bytes as
B/KiB/MiB/GiB, …bytes_per_s as a rate). The raw numbers stay in summary.json."""
from __future__ import annotations

from .escape import render

# keys holding a share of 1 (thresholds and busy/idle grades) though their names do not say "share"
SHARE_KEYS = ("moderate", "high", "busy", "idle", "saturated", "others", "host_cpu_busy")
TIME_UNITS = {"_ns": 1e9, "_us": 1e6, "_s": 1.0, "_seconds": 1.0}   # key suffix -> units per second
TIMED = tuple(TIME_UNITS)
MAX_LIST = 8   # longer lists are summarised by their length (the full list is in summary.json)


def _sig(x: float) -> str:
    return f"{x:.3g}"


def _time(seconds: float) -> str:
    if abs(seconds) >= 1:
        return f"{_sig(seconds)} s"
    if abs(seconds) >= 1e-3:
        return f"{_sig(seconds * 1e3)} ms"
    return f"{_sig(seconds * 1e6)} µs"


def _bytes(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{_sig(n / scale)} {unit}"
    return f"{n:.0f} B"


def value(key: str, v) -> str:
    """`v` formatted by what `key` says it is."""
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (list, tuple)):
        if len(v) > MAX_LIST or any(isinstance(x, (dict, list, tuple)) for x in v):
            return f"{len(v)} values (in summary.json)"
        return ", ".join(value(key, x) for x in v) or "none"
    if not isinstance(v, (int, float)):
        return str(v)
    k = key.lower()
    if k.endswith("bytes_per_s") or k.endswith("_per_s_mean"):
        return _bytes(v) + "/s"
    # the unit of the value, or of its group (excess_by_phase_s · dataloader), goes before "thresholds are
    # shares": thresholds · min_excess_s is seconds and thresholds · bytes bytes, not a percent
    own = next((p for p in reversed(k.split(" · ")) if "share" in p or "bytes" in p or p.endswith(TIMED)), "")
    if "share" not in own:
        div = next((d for suffix, d in TIME_UNITS.items() if own.endswith(suffix)), None)
        if div is not None:
            return _time(v / div)
        if "bytes" in own:
            return _bytes(v)
    if "share" in k or "threshold" in k or "density" in k or k in SHARE_KEYS:
        return f"{_sig(100 * v)}%" if isinstance(v, float) and -1.5 <= v <= 1.5 else _sig(v)
    if k.endswith("_pct") or k.endswith("pct_mean"):
        return f"{_sig(v)}%"
    return str(v) if isinstance(v, int) else _sig(v)


def rows(evidence: dict, prefix: str = "") -> list[tuple[str, str]]:
    out = []
    for key, v in evidence.items():
        name = f"{prefix}{key}".replace("_", " ")
        if isinstance(v, dict):
            out += rows(v, f"{prefix}{key} · ")
        else:
            out.append((name, value(f"{prefix}{key}", v)))   # the path names the unit: bound share · io
    return out


def table(evidence: dict) -> str:
    return render("evidence.html.j2", "table", rows=rows(evidence or {}))
