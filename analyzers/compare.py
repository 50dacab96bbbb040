"""Before/after of two runs from their summary.json: step time, throughput, per-phase time, verdict change.

Per-phase time per step is phase share x steady step time (seconds per step over the steady-state steps, what a
synchronized clock reads; the median of bimodal step times would not), so the deltas say where the saved time came
from. Summaries written before `steady` existed fall back to their median.
"""
from __future__ import annotations

from haiprof.rundir.vocabulary import ALL_PHASES as PHASES


def step_time(summary: dict):
    st = summary.get("step_time_s") or {}
    for key in ("steady", "median"):
        m = st.get(key)
        if isinstance(m, (int, float)) and m > 0:
            return m
    return None


def compare_summaries(before: dict, after: dict) -> dict:
    ma, mb = step_time(before), step_time(after)
    out = {
        "before": {"step_time_s": ma, "steps_per_s": 1 / ma if ma else None, "steps": before.get("steps"),
                   "bottleneck": before.get("bottleneck"), "headline": before.get("headline"),
                   "wall_time_s": before.get("wall_time_s")},
        "after": {"step_time_s": mb, "steps_per_s": 1 / mb if mb else None, "steps": after.get("steps"),
                  "bottleneck": after.get("bottleneck"), "headline": after.get("headline"),
                  "wall_time_s": after.get("wall_time_s")},
        "speedup": (ma / mb) if ma and mb else None,
        "verdict_changed": before.get("bottleneck") != after.get("bottleneck"),
        "phases": {},
    }
    sa, sb = before.get("phase_share") or {}, after.get("phase_share") or {}
    for p in PHASES:
        ta = sa.get(p, 0.0) * ma if ma else None
        tb = sb.get(p, 0.0) * mb if mb else None
        out["phases"][p] = {"before_s": ta, "after_s": tb,
                            "delta_s": (tb - ta) if ta is not None and tb is not None else None,
                            "share_before": sa.get(p), "share_after": sb.get(p)}
    return out


def _ms(x) -> str:
    return "n/a" if x is None else f"{x * 1e3:.1f} ms"


def text_lines(cmp: dict, name_a: str = "before", name_b: str = "after") -> list[str]:
    a, b = cmp["before"], cmp["after"]
    lines = [f"step time (steady): {_ms(a['step_time_s'])} -> {_ms(b['step_time_s'])}"]
    if a["steps_per_s"] and b["steps_per_s"]:
        lines.append(f"throughput: {a['steps_per_s']:.2f} -> {b['steps_per_s']:.2f} steps/s "
                     f"({cmp['speedup']:.2f}x)")
    if a.get("wall_time_s") and b.get("wall_time_s"):
        lines.append(f"wall time: {a['wall_time_s']:.2f} s ({a['steps']} steps) -> "
                     f"{b['wall_time_s']:.2f} s ({b['steps']} steps)")
    lines.append("per-phase time per step:")
    for p, row in cmp["phases"].items():
        if row["before_s"] is None or row["after_s"] is None:
            continue
        if max(row["before_s"], row["after_s"]) < 1e-5:
            continue
        lines.append(f"  {p:<10} {_ms(row['before_s']):>10} -> {_ms(row['after_s']):>10}  "
                     f"({row['delta_s'] * 1e3:+.1f} ms)")
    verdict = f"verdict: {a['bottleneck']} -> {b['bottleneck']}"
    lines.append(verdict + (" (changed)" if cmp["verdict_changed"] else " (unchanged)"))
    return lines


def _pct(xs: list, q: float):
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))] if s else None


def step_distribution(before_s: list, after_s: list, bins: int = 16) -> dict | None:
    """Step times of both runs on shared bins (ms), for a before/after histogram, with p50/p90 of each.

    Bins span both runs' steady steps up to 1.5x the larger p90 (start-up outliers land in a last "slower" bin,
    so they never set the axis). None when either run has no steps."""
    a = [x * 1e3 for x in before_s or [] if isinstance(x, (int, float)) and x > 0]
    b = [x * 1e3 for x in after_s or [] if isinstance(x, (int, float)) and x > 0]
    if not a or not b:
        return None
    lo = min(min(a), min(b))
    hi = 1.5 * max(_pct(a, 0.9), _pct(b, 0.9))
    hi = max(hi, lo * 1.01 + 1e-6)
    width = (hi - lo) / bins
    edges = [lo + i * width for i in range(bins + 1)]

    def counts(xs):
        c = [0] * (bins + 1)   # the last one: slower than the axis
        for x in xs:
            c[min(bins, int((x - lo) / width)) if x < hi else bins] += 1
        return c

    return {"edges_ms": edges, "before": counts(a), "after": counts(b),
            "before_p50_ms": _pct(a, 0.5), "before_p90_ms": _pct(a, 0.9),
            "after_p50_ms": _pct(b, 0.5), "after_p90_ms": _pct(b, 0.9),
            "steps_before": len(a), "steps_after": len(b)}


def describe_target(key: tuple) -> str:
    """A run's command for a message, from runtime.fixrun.target_key's tuple (kind, what, argv, rank)."""
    kind, what, argv = key[0], key[1], key[2] if len(key) > 2 else ()
    head = f"-m {what}" if kind == "module" else str(what)
    return " ".join([head, *map(str, argv)])
