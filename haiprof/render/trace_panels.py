"""Report panels for `haiprof analyze`: per-rank device time (HTA's temporal breakdown), overlap, kernel types,
launch statistics, and the host operators (all that a GPU-less trace has). Empty for `haiprof run` reports."""
from __future__ import annotations

from .escape import render

TEMPORAL_COLORS = {"idle": "#bab0ac", "compute": "#4c78a8", "non-compute": "#f58518"}


def _num(x, fmt="{:.1f}") -> str:
    return "n/a" if x is None else fmt.format(x)


def _temporal_chart(ranks: dict) -> dict:
    order = sorted(ranks, key=int)
    xs = [f"rank {r}" for r in order]
    data = []
    for label, key in (("idle", "idle_time_pct"), ("compute", "compute_time_pct"),
                       ("non-compute", "non_compute_time_pct")):
        ys = [(ranks[r]["temporal_breakdown"] or {}).get(key, 0.0) for r in order]
        data.append({"type": "bar", "name": label, "x": xs, "y": ys, "marker": {"color": TEMPORAL_COLORS[label]}})
    layout = {"title": {"text": "Device time per rank (first to last kernel)"}, "barmode": "stack", "height": 300,
              "margin": {"l": 60, "r": 20, "t": 40, "b": 40}, "yaxis": {"title": {"text": "% of span"}},
              "legend": {"orientation": "h"}, "template": None}
    return {"data": data, "layout": layout}


def _rank_row(r: str, v: dict) -> dict:
    t = v.get("temporal_breakdown")
    ls = v.get("launch_stats") or {}
    idle = v.get("idle_breakdown_us") or {}
    rank = f"{r} (truncated)" if v.get("truncated") else r
    if t is None:
        return {"rank": rank, "cells": None, "host_ops": v["host_ops"]["ops"]}
    span = t["kernel_time_us"] or 1.0
    return {"rank": rank, "cells": [
        f"{t['kernel_time_us'] / 1e3:.1f}", f"{t['idle_time_pct']:.2f}", f"{t['compute_time_pct']:.2f}",
        f"{t['non_compute_time_pct']:.2f}", _num(v.get("comm_comp_overlap_pct"), "{:.2f}"), ls.get("kernels", 0),
        _num((ls.get("kernel_dur_us") or {}).get("p50")), _num(ls.get("mean_cpu_launch_us")),
        f"{100 * idle.get('host_wait_us', 0) / span:.1f}"]}


def _host(r: str, host: dict) -> dict | None:
    top = [(o["name"][:120], o["count"], f"{o['self_us'] / 1e3:.2f}", f"{100 * o['self_share']:.1f}")
           for o in host.get("top_ops", [])]
    if not top:
        return None
    return {"rank": r, "ops": host["ops"], "median": _num(host.get("median_self_us")), "top": top}


def section_trace(d, figs) -> str:
    tr = d.timelines.get("trace")
    if not tr:
        return ""
    ranks = tr.get("ranks", {})
    order = sorted(ranks, key=int)
    if tr.get("device_present"):
        figs["temporal"] = _temporal_chart(ranks)
    kernel_types = [(k["kernel_type"], f"{k['time_us'] / 1e3:.2f}", f"{k['percentage']:.1f}")
                    for k in tr.get("kernel_type_breakdown") or []]
    hosts = [h for h in (_host(r, ranks[r]["host_ops"]) for r in order) if h]
    return render("trace_panels.html.j2", "section", device=bool(tr.get("device_present")),
                  ranks=[_rank_row(r, ranks[r]) for r in order], kernel_types=kernel_types, hosts=hosts,
                  notes=tr.get("notes") or [])
