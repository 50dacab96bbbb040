"""Report panels for the hardware collectors: GPUs, IB/NIC links, NUMA, disks, memory bandwidth, energy.

Each panel shows its chart; collectors that did not run are named once, in one line that points to the
Collectors section (their reasons and how to enable them are there, not repeated here). Rates read in decimal
units (kB/s, MB/s, GB/s); a cross-NUMA chart with nothing on it is a sentence instead.
"""
from __future__ import annotations

from . import charts
from .escape import render

TEMPLATE = "hardware.html.j2"


def _missing(missing: list, *names: str) -> str:
    """Note collectors that did not run (listed once by section_hardware); the panel itself draws nothing."""
    missing.extend(n for n in names if n not in missing)
    return ""


def _rate_series(d, series: list, scale: float) -> list:
    t0 = d.timelines.get("origin_ns") or d.meta.get("start_monotonic_ns") or \
        min((r["t0"][0] for _, r in series if r["t0"]), default=0)
    return [(label, [(t - t0) / 1e9 for t in r["t1"]], [v * scale for v in r["rate"]]) for label, r in series]


def _fmt_rate(x) -> str:
    """Bytes per second in decimal units that read: 0 B/s, 950 B/s, 12.3 kB/s, 1.25 MB/s, 3.4 GB/s."""
    if x is None:
        return "n/a"
    for unit, div in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if abs(x) >= div:
            v = x / div
            return f"{v:.3g} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return f"{x:.0f} B/s"


def _pct(x) -> str:
    return "n/a" if x is None else f"{x:.0f}%"


def _watts(x) -> str:
    return "n/a" if x is None else f"{x:.0f} W"


def _gpu(d, hw, tl, figs, missing, axis) -> str:
    devs = hw.get("gpu", {}).get("devices") or {}
    if not devs:
        return _missing(missing, "gpu")
    rows = [(i, g["name"], _pct(g.get("sm_util_pct_steady_mean")), _pct(g["sm_util_pct_mean"]),
             _watts(g.get("power_w_steady_mean")), f"{g['mem_used_bytes_max'] / 2**30:.2f} GiB",
             ", ".join(g["throttle_reasons_seen"]) or "-") for i, g in devs.items()]
    g = tl.get("gpu", {})
    figs["hw-gpu-util"] = charts.timeline_chart("GPU SM utilization", "%", g.get("util", []), axis)
    figs["hw-gpu-power"] = charts.timeline_chart("GPU power", "W", g.get("power", []), axis)
    figs["hw-gpu-mem"] = charts.timeline_chart("GPU memory used", "GiB", g.get("memory", []), axis)
    return render(TEMPLATE, "gpu", rows=rows)


def _links(d, hw, tl, figs, missing, axis) -> str:
    links = hw.get("links", {})
    rows = []
    for group in ("infiniband", "nic"):
        for key, s in links.get(group, {}).items():
            cap = s.get("capacity_bytes_per_s")
            share = s.get("peak_share_of_capacity")
            rows.append((group, key, _fmt_rate(s.get("tx_bytes_per_s_mean")), _fmt_rate(s.get("rx_bytes_per_s_mean")),
                         "unknown" if not cap else f"{cap * 8 / 1e9:.0f} Gb/s",
                         "n/a" if share is None else f"{100 * share:.1f}%"))
    if not links.get("infiniband"):
        _missing(missing, "infiniband")
    if not rows:
        return _missing(missing, "nic")
    figs["hw-links"] = charts.timeline_chart("Link throughput", "MB/s", _rate_series(d, tl.get("links", []), 1e-6),
                                             axis)
    return render(TEMPLATE, "links", rows=rows)


def _numa(d, hw, tl, figs, missing, axis) -> str:
    n = hw.get("numa", {})
    cross, place = n.get("cross_node", {}), n.get("placement", {})
    if not cross.get("samples"):
        return _missing(missing, "numa")
    facts = (f"{cross.get('nodes')} NUMA node(s); cross-node allocations "
             f"{_fmt_rate(cross.get('cross_node_bytes_per_s'))} "
             f"({100 * (cross.get('cross_node_share') or 0):.1f}% of allocations)")
    series = _rate_series(d, tl.get("numa", []), 1e-6)
    chart = any(v for _, _, ys in series for v in ys)
    if chart:
        figs["hw-numa"] = charts.timeline_chart("Cross-NUMA allocations", "MB/s", series, axis)
    return render(TEMPLATE, "numa", facts=facts, chart=chart,
                  processes=[(p["pid"], p["role"], p["cpus"], p["nodes"]) for p in place.get("processes", [])],
                  devices=[(k, x["bdf"], x["numa_node"]) for k in ("gpus", "nics") for x in place.get(k, [])])


def _disks(d, hw, tl, figs, missing, axis) -> str:
    disks, membw = hw.get("disks") or {}, hw.get("membw") or {}
    if disks:
        figs["hw-disks"] = charts.timeline_chart("Disk throughput", "MB/s", _rate_series(d, tl.get("disks", []), 1e-6),
                                                 axis)
    else:
        _missing(missing, "storage")
    if membw:
        figs["hw-membw"] = charts.timeline_chart("Memory bandwidth", "MB/s", _rate_series(d, tl.get("membw", []), 1e-6),
                                                 axis)
    else:
        _missing(missing, "membw")
    if not disks and not membw:
        return ""
    rows = [(k, _fmt_rate(v["read_bytes_per_s_mean"]), _fmt_rate(v["write_bytes_per_s_mean"]),
             f"{(v['reads_per_s_mean'] or 0):.0f}", f"{100 * (v['busy_share_mean'] or 0):.0f}%")
            for k, v in disks.items()]
    return render(TEMPLATE, "disks", rows=rows, membw=bool(membw))


def _energy(d, figs, missing) -> str:
    en = d.summary.get("energy") or {}
    if not en.get("available"):   # its reason is the GPU and RAPL collectors' own, in Collectors
        return _missing(missing, "energy (no power source)")
    # the series and the text below are one computation (analyzers/energy.summarize): the same steady steps
    per = d.timelines.get("hardware", {}).get("energy_per_step", [])
    bucketed = any(p.get("steps", 1) > 1 for p in per)
    figs["hw-energy"] = {"data": [{"type": "bar", "x": [p["index"] for p in per], "y": [p["joules"] for p in per],
                                   "name": "J/step"}],
                         "layout": charts._layout(f"Energy per steady step ({en['steps']} steps"
                                                  + ("; mean per bucket of steps)" if bucketed else ")"), "J",
                                                  xaxis={"title": {"text": "step"}, "exponentformat": "none"})}
    shares = ", ".join(f"{k} {100 * v:.0f}%" for k, v in en["phase_share"].items() if v > 0.005)
    facts = (f"{en['joules_total']:.1f} J over {en['steps']} steady steps (warm-up and traced steps left out), "
             f"median {en['joules_per_step_median']:.2f} J/step; "
             f"{100 * en['waiting_for_input_share']:.0f}% spent waiting for input; by phase: {shares}")
    return render(TEMPLATE, "energy", facts=facts)


def _input(d) -> str:
    io = next((f for f in d.summary.get("findings", []) if f.get("kind") == "io" and f.get("recommendation")), None)
    if io is None:
        return ""
    kind = io["evidence"].get("input_bound")
    return render(TEMPLATE, "input", kind=kind, recommendation=io["recommendation"])


def section_hardware(d, figs) -> str:
    hw = d.summary.get("hardware")
    if not hw:
        return ""
    tl = d.timelines.get("hardware", {})
    missing: list = []
    axis = charts.step_axis(d)   # every time series lined up with the step chart
    parts = [_input(d), _gpu(d, hw, tl, figs, missing, axis), _energy(d, figs, missing),
             _links(d, hw, tl, figs, missing, axis), _numa(d, hw, tl, figs, missing, axis),
             _disks(d, hw, tl, figs, missing, axis)]
    return render(TEMPLATE, "section", panels=[p for p in parts if p], missing=missing)
