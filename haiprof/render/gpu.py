"""The report's GPU section, from the device-first analysis (summary["device"]), the tracing window's kernels and
copies (summary["gpu"]) and device memory per step (summary["memory"]). Reads the finished summary only."""
from __future__ import annotations

import numpy as np

from . import charts
from .escape import render

IDLE_LABELS = {"dataloader": "host waiting for the DataLoader", "h2d": "host in a synchronous copy",
               "forward": "host dispatching forward", "backward": "host dispatching backward",
               "optimizer": "host dispatching the optimizer", "allreduce": "host in a collective",
               "other": "host in Python outside the training phases",
               "inside_spans": "gaps between kernels inside a phase (the host launching them)"}


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def device_per_step(d, dev: dict) -> dict:
    """index, duration and busy (ms) and traced of each step with device time, as arrays: summary.json's
    per_step, or (a run too long to list them there) the device step columns of RunData."""
    per = dev.get("per_step")
    if per is not None:
        return {"index": np.array([p["index"] for p in per], dtype=np.int64),
                "duration": np.array([p["duration_s"] * 1e3 for p in per]),
                "busy": np.array([p["busy_s"] * 1e3 for p in per]),
                "traced": np.array([bool(p.get("traced")) for p in per], dtype=bool)}
    cols = getattr(d, "device_steps", None)
    if cols is None or not len(cols) or not hasattr(cols, "phases"):
        return {"index": np.zeros(0, np.int64), "duration": np.zeros(0), "busy": np.zeros(0),
                "traced": np.zeros(0, bool)}
    has = cols.end_ns > cols.start_ns          # rows of host steps without device time are empty slots
    busy_cols = [j for j, k in enumerate(cols.names) if not k.startswith("idle:")]
    return {"index": cols.index[has], "duration": (cols.end_ns - cols.start_ns)[has] / 1e6,
            "busy": cols.phases[has][:, busy_cols].sum(axis=1) / 1e6, "traced": cols.traced[has]}


def _busy_chart(d, dev: dict, warmup: int, host_steps: list) -> dict:
    """Busy/idle bars under the step chart's bars: one category per host step (a step without device time, the
    first one, keeps an empty slot), so bar i sits under bar i of "Time per step" and both shade the same steps."""
    per = device_per_step(d, dev)
    n = len(per["index"])
    aligned = bool(host_steps) and len(host_steps) <= charts.MAX_BARS and set(per["index"].tolist()) <= set(host_steps)
    if aligned:
        xs = list(host_steps)
        at = {i: k for k, i in enumerate(per["index"].tolist())}
        busy = [float(per["busy"][at[i]]) if i in at else None for i in xs]
        idle = [max(0.0, float(per["duration"][at[i]] - per["busy"][at[i]])) if i in at else None for i in xs]
    else:
        xs, busy = per["index"].tolist(), per["busy"].tolist()
        idle = np.maximum(0.0, per["duration"] - per["busy"]).tolist()
    traced = per["index"][per["traced"]].tolist()
    shapes = charts.StepAxis.shapes(xs[0], xs[-1], warmup, traced) if xs else []
    title = "GPU busy (kernels and copies) and idle per step (device clock)"
    if len(xs) > charts.MAX_BARS:    # a long run: bucket means, never a JSON number per step
        # (the bars drawn are clipped, not every step: a 10^6-step run's 25,642 periodic stalls were labelled
        # one by one first, then merged, quadratically: minutes)
        xs, busy, idle = charts.thin(xs, busy, idle)
        totals = [(b or 0) + (i or 0) for b, i in zip(busy, idle)]
        yaxis, notes = charts.clip_outliers(xs, totals, totals, "ms")
        title += f" (mean of {-(-n // charts.MAX_BARS)} steps per bar)"
    else:
        totals = [(b or 0) + (i or 0) for b, i in zip(busy, idle)]
        keep = set(np.asarray(d.device_steady).tolist())   # the analysis's steady steps (one rule), not a rule here
        steady = [t for x, t in zip(xs, totals) if x in keep]
        yaxis, notes = charts.clip_outliers(xs, totals, steady, "ms")
    return {"data": [{"type": "bar", "name": "GPU busy", "x": xs, "y": busy, "marker": {"color": "#4c78a8"}},
                     {"type": "bar", "name": "GPU idle", "x": xs, "y": idle, "marker": {"color": "#bab0ac"}}],
            "layout": charts._layout(title, "ms", barmode="stack", annotations=notes, yaxis=yaxis, shapes=shapes,
                                     xaxis={"title": {"text": "step"}, "exponentformat": "none"})}


def _memory_chart(mem: dict, host_steps: list) -> dict:
    per = mem["per_step"]
    gib = 2 ** -30
    xs, alloc, reserved = charts.thin([p["index"] for p in per], [p["peak_allocated"] * gib for p in per],
                                      [p["peak_reserved"] * gib for p in per])   # long runs: bucket means
    xaxis = {"title": {"text": "step"}, "exponentformat": "none"}
    if host_steps:     # the step chart's extent, so step i sits over bar i
        xaxis["range"] = [host_steps[0] - 0.5, host_steps[-1] + 0.5]
    return {"data": [{"type": "scatter", "mode": "lines+markers", "name": "peak allocated (so far)", "x": xs,
                      "y": alloc},
                     {"type": "scatter", "mode": "lines+markers", "name": "peak reserved (so far)", "x": xs,
                      "y": reserved}],
            "layout": charts._layout("Device memory per step", "GiB", xaxis=xaxis,
                                     yaxis={"title": {"text": "GiB"}, "range": [0, (mem.get("capacity_bytes") or
                                            max(p["peak_reserved"] for p in per) * 1.2) * gib]})}


def _sig(x: float) -> str:
    """Three significant digits, never 0.00 for a small non-zero time."""
    return f"{x:.3g}"


def _kernels(g: dict) -> dict:
    steps = g.get("steps")
    tc = g.get("tensor_core_share")
    rows = [{"full_name": k["full_name"], "name": k["name"],
             "variants": k["variants"] if k.get("variants", 1) > 1 else None,
             "launched_by": k.get("launched_by") or "n/a", "tensor_cores": "yes" if k.get("tensor_cores") else "no",
             "launches": k["count"], "ms": _sig(k["total_us"] / 1e3 / (steps or 1)), "mean_us": _sig(k["mean_us"]),
             "share": _pct(k["share"])} for k in g["top_kernels"]]
    return {"launches": g["kernel_count"], "distinct": g["distinct_kernels"], "rows": rows,
            "per": f" per traced step ({steps} steps)" if steps else "",
            "tc_note": (f" Tensor cores (by kernel name: tf32/bf16/f16/hmma… against ffma/simt): {_pct(tc)} of "
                        f"kernel time." if tc is not None else "")}


def _gbs(x) -> str:
    return "n/a" if not x else f"{x:.1f}"


def _copies(g: dict) -> list:
    return [(c["kind"], c["count"], f"{c['bytes'] / 1e6:.1f}", f"{c['total_us'] / 1e3:.2f}", _gbs(c["gb_per_s"]),
             _pct(c["share"])) for c in g["copies"]]


def _memory(d, figs, host_steps: list) -> dict:
    mem = d.summary.get("memory")
    f = next((x for x in d.summary.get("findings", []) if x.get("kind") == "memory"), None)
    warn = f["message"] if f else ""
    if not mem or not mem.get("per_step"):
        return {"warn": warn, "facts": ""}
    figs["gpu-mem"] = _memory_chart(mem, host_steps)
    cap = mem.get("capacity_bytes")
    facts = (f"peak allocated {mem['peak_allocated_bytes'] / 2**30:.2f} GiB, peak reserved "
             f"{mem['peak_reserved_bytes'] / 2**30:.2f} GiB" + (f" of {cap / 2**30:.1f} GiB "
             f"({_pct(mem['peak_share_of_capacity'])})" if cap else ""))
    return {"warn": warn, "facts": facts}


def section_gpu(d, figs) -> str:
    dev, g = d.summary.get("device"), d.summary.get("gpu")
    if not dev and not g:
        return ""
    steps = d.steps
    host_steps = steps.index.tolist() if len(steps) else []   # the step chart's categories
    device, idle_rows = None, []
    if dev:
        idle = dev.get("idle_by_host") or {}
        total_idle = sum(idle.values()) or 1.0
        device = {"step_ms": f"{dev['steady_step_s'] * 1e3:.1f}", "busy": _pct(dev["busy_share"]),
                  "idle": _pct(dev["idle_share"])}
        figs["gpu-steps"] = _busy_chart(d, dev, d.summary.get("warmup_steps_excluded", 0), host_steps)
        idle_rows = [(IDLE_LABELS.get(k, k), _pct(v), _pct(v / total_idle))
                     for k, v in sorted(idle.items(), key=lambda kv: -kv[1]) if v >= 0.005]
    return render("gpu.html.j2", "section", device=device, idle_rows=idle_rows, kernels=_kernels(g) if g else None,
                  copies=_copies(g) if g else [], memory=_memory(d, figs, host_steps))
