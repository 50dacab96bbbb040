"""Before/after of two runs from their summary.json: step time, throughput, per-phase time, verdict change.

Per-phase time per step is phase share x steady step time (seconds per step over the steady-state steps, what a
synchronized clock reads; the median of bimodal step times would not), so the deltas say where the saved time came
from. Summaries written before `steady` existed fall back to their median.
"""
from __future__ import annotations

PHASES = ("dataloader", "h2d", "forward", "backward", "optimizer", "allreduce", "other")


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
