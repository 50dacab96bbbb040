"""Report section: every op-level tracing window, its trace file, and its steps beside the steady steps around
it (summary.json `trace_windows`; only when the run traced more than its first window)."""
from __future__ import annotations

from ..rundir.units import format_flops
from .escape import render


def _ms(x) -> str:
    return "n/a" if x is None else f"{x:.3g} ms"


def _why(w: dict) -> str:
    an = w.get("anomaly")
    if an and w.get("missed"):   # the slow moment it was placed for did not come
        m = w["missed"]
        return (f"{_flight_why(an)}; it did not come: the slowest recorded step, {m['step']}, took "
                f"{m['step_ms']:.3g} ms ({m['times_median']:.2g}× the median step), no stall")
    if an:
        return _flight_why(an)
    return "after warm-up" if w.get("asked_step") is None else f"asked for at step {w['asked_step']}"


def _flight_why(an: dict) -> str:
    if an.get("period_steps"):
        return (f"flight recorder: a stall every {an['period_steps']} steps (last seen at step "
                f"{an['seen_step']}), due at step {an['due_step']}")
    if an.get("period_s"):
        return (f"flight recorder: a stall every {an['period_s']:.3g} s (last seen at step {an['seen_step']}), "
                f"due at step {an['due_step']}")
    return f"flight recorder: slow steps in a row from step {an['seen_step']}"


def _efficiency(d) -> str:
    e = d.summary.get("efficiency")
    if not e:
        return ""
    steady = (d.summary.get("step_time_s") or {}).get("steady")
    rows = [{"file": w["file"], "flops": format_flops(w["flops_per_step"]) if w.get("flops_per_step") else "n/a",
             "achieved": f"{format_flops(w['achieved_flops'])}/s" if w.get("achieved_flops") else "n/a",
             "mfu": f"{w['mfu']:.1%}" if w.get("mfu") else "n/a"} for w in e.get("windows") or []]
    return render("windows.html.j2", "efficiency", e=e, rows=rows,
                  flops=format_flops(e["flops_per_step"]) if e.get("flops_per_step") else None,
                  achieved=f"{format_flops(e['achieved_flops'])}/s" if e.get("achieved_flops") else None,
                  peak=f"{format_flops(e['peak_flops'])}/s" if e.get("peak_flops") else None,
                  mfu=f"{e['mfu']:.1%}" if e.get("mfu") else None, steady=f"{steady * 1e3:.1f}" if steady else None,
                  device=_device_use(e))


def _device_use(e: dict) -> str | None:
    """CUDA runs: the tensor cores' share of the traced kernel time and the memory headroom at the peak."""
    parts = []
    if e.get("tensor_core_share") is not None:
        parts.append(f"tensor cores ran {e['tensor_core_share']:.0%} of the traced kernel time (by kernel name)")
    m = e.get("memory_headroom")
    if m:
        gib = 2 ** 30
        parts.append(f"memory {m['peak_bytes'] / gib:.1f} of {m['capacity_bytes'] / gib:.1f} GiB at the peak "
                     f"({m['headroom_bytes'] / gib:.1f} GiB free; {m['source']})")
    return "; ".join(parts) or None


def section_windows(d, figs) -> str:
    windows = d.summary.get("trace_windows") or []
    if len(windows) < 2:
        return _efficiency(d)   # the one window after warm-up is the op-level trace section's
    rows = [{"file": w.get("file"), "steps": f"{w['first_step']}–{w['last_step']}", "inside": _ms(w["step_ms"]),
             "around": _ms(w.get("around_ms")),
             "slower": "n/a" if w.get("slowdown") is None else f"{w['slowdown']:.2f}×", "why": _why(w),
             "explained": w.get("explained")} for w in windows]
    return render("windows.html.j2", "section", rows=rows) + _efficiency(d)
