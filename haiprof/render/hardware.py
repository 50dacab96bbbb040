"""Report panels for the hardware collectors: GPUs, IB/NIC links, NUMA, disks, memory bandwidth, energy.

Each panel shows its chart, or the collector's recorded reason when it did not run (never an empty chart).
"""
from __future__ import annotations

from . import charts
from .escape import esc


def _why(hw: dict, *names: str) -> str:
    reasons = [f"{n}: {hw['collectors'][n]['reason']}" for n in names
               if n in hw.get("collectors", {}) and hw["collectors"][n].get("reason")]
    return "; ".join(reasons) or "no data"


def _rate_series(d, series: list, scale: float) -> list:
    t0 = d.meta.get("start_monotonic_ns") or min((r["t0"][0] for _, r in series if r["t0"]), default=0)
    return [(label, [(t - t0) / 1e9 for t in r["t1"]], [v * scale for v in r["rate"]]) for label, r in series]


def _fmt_rate(x) -> str:
    return "n/a" if x is None else f"{x / 2**20:.2f} MiB/s"


def _panel(pid: str, title: str, body: str) -> str:
    return f'<div class="hw-panel" id="hw-{pid}"><h4>{esc(title)}</h4>{body}</div>'


def _unavailable(text: str) -> str:
    return f'<p class="unavailable">Unavailable: {esc(text)}</p>'


def _gpu(d, hw, tl, figs) -> str:
    devs = hw.get("gpu", {}).get("devices") or {}
    if not devs:
        return _panel("gpu", "GPUs", _unavailable(_why(hw, "gpu")))
    rows = "".join(
        f"<tr><td>{esc(i)}</td><td>{esc(g['name'])}</td><td>{(g['sm_util_pct_mean'] or 0):.0f}%</td>"
        f"<td>{(g['power_w_mean'] or 0):.0f} W</td><td>{g['mem_used_bytes_max'] / 2**30:.2f} GiB</td>"
        f"<td>{esc(', '.join(g['throttle_reasons_seen']) or '-')}</td></tr>" for i, g in devs.items())
    g = tl.get("gpu", {})
    figs["hw-gpu-util"] = charts.timeline_chart("GPU SM utilization", "%", g.get("util", []))
    figs["hw-gpu-power"] = charts.timeline_chart("GPU power", "W", g.get("power", []))
    figs["hw-gpu-mem"] = charts.timeline_chart("GPU memory used", "GiB", g.get("memory", []))
    return _panel("gpu", "GPUs", f'<table class="grid"><tr><td>#</td><td>name</td><td>SM util</td><td>power</td>'
                  f'<td>peak memory</td><td>throttled by</td></tr>{rows}</table>'
                  '<div class="chart" id="fig-hw-gpu-util"></div><div class="chart" id="fig-hw-gpu-power"></div>'
                  '<div class="chart" id="fig-hw-gpu-mem"></div>')


def _links(d, hw, tl, figs) -> str:
    links = hw.get("links", {})
    rows = ""
    for group in ("infiniband", "nic"):
        for key, s in links.get(group, {}).items():
            cap = s.get("capacity_bytes_per_s")
            share = s.get("peak_share_of_capacity")
            rows += (f"<tr><td>{esc(group)}</td><td>{esc(key)}</td><td>{_fmt_rate(s.get('tx_bytes_per_s_mean'))}</td>"
                     f"<td>{_fmt_rate(s.get('rx_bytes_per_s_mean'))}</td>"
                     f"<td>{'unknown' if not cap else f'{cap * 8 / 1e9:.0f} Gb/s'}</td>"
                     f"<td>{'n/a' if share is None else f'{100 * share:.1f}%'}</td></tr>")
    notes = "" if links.get("infiniband") else _unavailable(_why(hw, "infiniband"))
    if not rows:
        return _panel("links", "InfiniBand and NICs", notes + _unavailable(_why(hw, "nic")))
    figs["hw-links"] = charts.timeline_chart("Link throughput", "MiB/s", _rate_series(d, tl.get("links", []), 2**-20))
    return _panel("links", "InfiniBand and NICs (throughput vs link rate)",
                  f'{notes}<table class="grid"><tr><td>kind</td><td>port</td><td>tx mean</td><td>rx mean</td>'
                  f'<td>link rate</td><td>peak share of link</td></tr>{rows}</table>'
                  '<div class="chart" id="fig-hw-links"></div>')


def _numa(d, hw, tl, figs) -> str:
    n = hw.get("numa", {})
    cross, place = n.get("cross_node", {}), n.get("placement", {})
    if not cross.get("samples"):
        return _panel("numa", "NUMA", _unavailable(_why(hw, "numa")))
    facts = (f"{cross.get('nodes')} NUMA node(s); cross-node allocations "
             f"{_fmt_rate(cross.get('cross_node_bytes_per_s'))} "
             f"({100 * (cross.get('cross_node_share') or 0):.1f}% of allocations)")
    figs["hw-numa"] = charts.timeline_chart("Cross-NUMA allocations", "MiB/s", _rate_series(d, tl.get("numa", []), 2**-20))
    rows = "".join(f"<tr><td>{esc(p['pid'])}</td><td>{esc(p['role'])}</td><td>{esc(p['cpus'])}</td>"
                   f"<td>{esc(p['nodes'])}</td></tr>" for p in place.get("processes", []))
    devs = "".join(f"<tr><td>{esc(k)}</td><td>{esc(x['bdf'])}</td><td>{esc(x['numa_node'])}</td></tr>"
                   for k in ("gpus", "nics") for x in place.get(k, []))
    return _panel("numa", "NUMA", f"<p>{esc(facts)}</p><div class='chart' id='fig-hw-numa'></div>"
                  f"<table class='grid'><tr><td>pid</td><td>role</td><td>CPU affinity</td><td>nodes</td></tr>{rows}"
                  f"</table><table class='grid'><tr><td>device</td><td>PCI</td><td>node</td></tr>{devs}</table>")


def _disks(d, hw, tl, figs) -> str:
    disks = hw.get("disks") or {}
    if not disks:
        return _panel("disks", "Disks", _unavailable(_why(hw, "storage")))
    figs["hw-disks"] = charts.timeline_chart("Disk throughput", "MiB/s", _rate_series(d, tl.get("disks", []), 2**-20))
    rows = "".join(f"<tr><td>{esc(k)}</td><td>{_fmt_rate(v['read_bytes_per_s_mean'])}</td>"
                   f"<td>{_fmt_rate(v['write_bytes_per_s_mean'])}</td><td>{(v['reads_per_s_mean'] or 0):.0f}</td>"
                   f"<td>{100 * (v['busy_share_mean'] or 0):.0f}%</td></tr>" for k, v in disks.items())
    body = (f"<table class='grid'><tr><td>device</td><td>read</td><td>write</td><td>reads/s</td><td>busy</td></tr>"
            f"{rows}</table><div class='chart' id='fig-hw-disks'></div>")
    membw = hw.get("membw") or {}
    if membw:
        figs["hw-membw"] = charts.timeline_chart("Memory bandwidth", "MiB/s", _rate_series(d, tl.get("membw", []), 2**-20))
        body += "<div class='chart' id='fig-hw-membw'></div>"
    else:
        body += f"<div><b>Memory bandwidth</b>{_unavailable(_why(hw, 'membw'))}</div>"
    return _panel("disks", "Disks and memory bandwidth", body)


def _energy(d, figs) -> str:
    en = d.summary.get("energy") or {}
    if not en.get("available"):
        return _panel("energy", "Energy", _unavailable(en.get("reason") or "no power source"))
    per = d.timelines.get("hardware", {}).get("energy_per_step", [])
    figs["hw-energy"] = {"data": [{"type": "bar", "x": [p["index"] for p in per], "y": [p["joules"] for p in per],
                                   "name": "J/step"}],
                         "layout": charts._layout("Energy per step", "J", xaxis={"title": {"text": "step"}})}
    shares = ", ".join(f"{k} {100 * v:.0f}%" for k, v in en["phase_share"].items() if v > 0.005)
    facts = (f"{en['joules_total']:.1f} J over {en['steps']} steps, median {en['joules_per_step_median']:.2f} J/step; "
             f"{100 * en['waiting_for_input_share']:.0f}% spent waiting for input; by phase: {shares}")
    return _panel("energy", "Energy", f"<p>{esc(facts)}</p><div class='chart' id='fig-hw-energy'></div>")


def _input(d) -> str:
    io = next((f for f in d.summary.get("findings", []) if f.get("kind") == "io" and f.get("recommendation")), None)
    if io is None:
        return ""
    kind = io["evidence"].get("input_bound")
    return _panel("input", "Input pipeline", f"<p><b>{esc(kind)}-bound</b>: {esc(io['recommendation'])}</p>")


def section_hardware(d, figs) -> str:
    hw = d.summary.get("hardware")
    if not hw:
        return ""
    tl = d.timelines.get("hardware", {})
    parts = [_input(d), _gpu(d, hw, tl, figs), _energy(d, figs), _links(d, hw, tl, figs), _numa(d, hw, tl, figs),
             _disks(d, hw, tl, figs)]
    return f'<section id="hardware"><h3>Hardware</h3>{"".join(parts)}</section>'
