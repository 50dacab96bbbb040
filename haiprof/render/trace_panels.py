"""Report panels for `haiprof analyze`: per-rank device time (HTA's temporal breakdown), overlap, kernel types,
launch statistics, and the host operators (all that a GPU-less trace has). Empty for `haiprof run` reports."""
from __future__ import annotations

from . import charts

TEMPORAL_COLORS = {"idle": "#bab0ac", "compute": "#4c78a8", "non-compute": "#f58518"}


def _esc(x) -> str:
    return charts.safe_text("" if x is None else x)


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


def _rank_row(r: str, v: dict) -> str:
    t = v.get("temporal_breakdown")
    ls = v.get("launch_stats") or {}
    idle = v.get("idle_breakdown_us") or {}
    flag = " (truncated)" if v.get("truncated") else ""
    if t is None:
        return (f"<tr><td>{_esc(r)}{flag}</td><td colspan='8'>no GPU activity: "
                f"{v['host_ops']['ops']} host operators</td></tr>")
    span = t["kernel_time_us"] or 1.0
    return (f"<tr><td>{_esc(r)}{flag}</td><td>{t['kernel_time_us'] / 1e3:.1f}</td><td>{t['idle_time_pct']:.2f}</td>"
            f"<td>{t['compute_time_pct']:.2f}</td><td>{t['non_compute_time_pct']:.2f}</td>"
            f"<td>{_num(v.get('comm_comp_overlap_pct'), '{:.2f}')}</td><td>{ls.get('kernels', 0)}</td>"
            f"<td>{_num((ls.get('kernel_dur_us') or {}).get('p50'))}</td>"
            f"<td>{_num(ls.get('mean_cpu_launch_us'))}</td><td>{100 * idle.get('host_wait_us', 0) / span:.1f}</td></tr>")


def _host_table(r: str, host: dict) -> str:
    rows = "".join(f"<tr><td><code>{_esc(o['name'][:120])}</code></td><td>{o['count']}</td>"
                   f"<td>{o['self_us'] / 1e3:.2f}</td><td>{100 * o['self_share']:.1f}</td></tr>"
                   for o in host.get("top_ops", []))
    if not rows:
        return ""
    return (f"<details><summary>rank {_esc(r)}: top host operators by self time ({host['ops']} operators, "
            f"median self time {_num(host.get('median_self_us'))} µs)</summary><table class='grid'>"
            f"<tr><th>operator</th><th>calls</th><th>self ms</th><th>% of host self time</th></tr>{rows}"
            f"</table></details>")


def section_trace(d, figs) -> str:
    tr = d.timelines.get("trace")
    if not tr:
        return ""
    ranks = tr.get("ranks", {})
    parts = ['<section id="trace"><h3>Trace analysis</h3>']
    if not tr.get("device_present"):
        parts.append("<p class='unavailable'>No GPU activity in the trace(s): no kernels, copies or device events. "
                     "The host-side view follows.</p>")
    else:
        figs["temporal"] = _temporal_chart(ranks)
        parts.append('<div class="chart" id="fig-temporal"></div>')
    head = ("<tr><th>rank</th><th>span ms</th><th>idle %</th><th>compute %</th><th>non-compute %</th>"
            "<th>comm hidden by compute %</th><th>kernels</th><th>median kernel µs</th><th>mean launch µs</th>"
            "<th>host wait %</th></tr>")
    parts.append(f"<table class='grid' id=\"trace-ranks\">{head}"
                 + "".join(_rank_row(r, ranks[r]) for r in sorted(ranks, key=int)) + "</table>")
    kt = tr.get("kernel_type_breakdown") or []
    if kt:
        rows = "".join(f"<tr><td>{_esc(k['kernel_type'])}</td><td>{k['time_us'] / 1e3:.2f}</td>"
                       f"<td>{k['percentage']:.1f}</td></tr>" for k in kt)
        parts.append(f"<h4>Kernel types, all ranks</h4><table class='grid' id=\"kernel-types\"><tr><th>kernel type"
                     f"</th><th>ms</th><th>%</th></tr>{rows}</table>")
    parts += [_host_table(r, ranks[r]["host_ops"]) for r in sorted(ranks, key=int)]
    if tr.get("notes"):
        parts.append("<p class='note'>" + "<br>".join(_esc(n) for n in tr["notes"]) + "</p>")
    parts.append("<p class='note'>Idle, compute and non-compute follow Holistic Trace Analysis's definitions "
                 "(span from the first to the last kernel; the last ProfilerStep is left out when a trace has "
                 "several).</p></section>")
    return "".join(parts)
