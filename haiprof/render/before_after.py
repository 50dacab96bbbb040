"""Before/after of two runs as HTML: the tables, per-phase bars and step-time distributions of baseline vs fixed.

Used by a fixed run's own report (fixes_panel.py, against its baseline) and by `haiprof compare A B --html OUT`
(`page`: one self-contained file, plotly.js inlined, no network). Reads finished numbers only
(analyzers/compare.py `compare_summaries` + `step_distribution`, analyzers/fix_gain.py, the loss guard).
"""
from __future__ import annotations

from . import plotly_inline
from .charts import PHASE_COLORS, _layout, safe_text, with_hover
from .escape import esc

BEFORE, AFTER = "#9aa5b1", "#4c78a8"


def _ms(x) -> str:
    return "n/a" if x is None else f"{x * 1e3:.1f} ms"


def _comparison(cmp: dict) -> str:
    a, b = cmp["before"], cmp["after"]
    speed = f"{cmp['speedup']:.2f}×" if cmp.get("speedup") else "n/a"
    rows = [
        f"<tr><td>steady step time</td><td>{_ms(a['step_time_s'])}</td><td>{_ms(b['step_time_s'])}</td>"
        f"<td>{speed}</td></tr>",
        f"<tr><td>throughput (steps/s)</td><td>{(a['steps_per_s'] or 0):.2f}</td>"
        f"<td>{(b['steps_per_s'] or 0):.2f}</td><td></td></tr>",
        f"<tr><td>verdict</td><td>{esc(a['bottleneck'])}</td><td>{esc(b['bottleneck'])}</td>"
        f"<td>{'changed' if cmp['verdict_changed'] else 'unchanged'}</td></tr>",
    ]
    for p, r in cmp["phases"].items():
        if r["before_s"] is None or r["after_s"] is None or max(r["before_s"], r["after_s"]) < 1e-5:
            continue
        rows.append(f"<tr><td>{esc(p)} per step</td><td>{_ms(r['before_s'])}</td><td>{_ms(r['after_s'])}</td>"
                    f"<td>{r['delta_s'] * 1e3:+.1f} ms</td></tr>")
    base = f'<p>Baseline: <code>{esc(cmp["baseline_run"])}</code></p>' if cmp.get("baseline_run") else ""
    return (f'{base}<table class="grid" id="before-after">'
            f"<tr><th></th><th>before</th><th>after</th><th>change</th></tr>{''.join(rows)}</table>")


def _gain(g: dict) -> str:
    """Wall time of both runs and, for compile-type fixes, the compile cost and the break-even step."""
    rows = []
    il = g.get("interleaved")
    if il:
        rows.append(f"<tr><td>interleaved A/B ({il['pairs']} pass pairs, same conditions each)</td>"
                    f"<td colspan='2'>per pair {il['min']:.2f}× – {il['max']:.2f}× (spread "
                    f"{100 * il['spread']:.0f}%)</td><td>{il['speedup']:.2f}× median</td></tr>")
    if g.get("wall_time_before_s") and g.get("wall_time_after_s"):
        same = g.get("steps_before") == g.get("steps_after")
        ratio = f"{g['wall_speedup']:.2f}×" if same and g.get("wall_speedup") else "different step counts"
        rows.append(f"<tr><td>whole run wall time</td><td>{g['wall_time_before_s']:.1f} s "
                    f"({esc(g.get('steps_before'))} steps)</td><td>{g['wall_time_after_s']:.1f} s "
                    f"({esc(g.get('steps_after'))} steps)</td><td>{esc(ratio)}</td></tr>")
    c = g.get("compile") or {}
    if c.get("cost_s") is not None:
        n = c.get("break_even_step")
        pay = "never (no step is faster)" if n is None else f"pays for itself after step {n}"
        rows.append(f"<tr><td>compile cost</td><td></td><td>{c['cost_s']:.1f} s</td><td>{esc(pay)}</td></tr>")
    warn = f'<p class="warn" id="fix-conditions">{esc(g["conditions"])}</p>' if g.get("conditions") else ""
    return warn + (f'<table class="grid" id="fix-gain">{"".join(rows)}</table>' if rows else "")


def phase_figure(cmp: dict) -> dict | None:
    """Grouped bars: ms per step of each phase, baseline beside fixed."""
    names = [p for p, r in (cmp.get("phases") or {}).items() if p in PHASE_COLORS
             and r.get("before_s") is not None and r.get("after_s") is not None
             and max(r["before_s"], r["after_s"]) >= 1e-5]
    if not names:
        return None
    data = [{"type": "bar", "name": label, "x": names, "y": [cmp["phases"][p][key] * 1e3 for p in names],
             "marker": {"color": color}}
            for label, key, color in (("before", "before_s", BEFORE), ("after", "after_s", AFTER))]
    return {"data": data, "layout": _layout("Time per step by phase: before vs after", "ms per step",
                                            xaxis={"title": {"text": "phase"}})}


def _edge(x: float) -> str:
    return f"{x:.3g}"


def distribution_figure(dist: dict | None) -> dict | None:
    """Histogram of both runs' step times on shared bins; slower steps (start-up) in a last bin of their own."""
    if not dist:
        return None
    e = dist["edges_ms"]
    cats = [_edge((e[i] + e[i + 1]) / 2) for i in range(len(e) - 1)] + [f"> {_edge(e[-1])}"]
    data = [{"type": "bar", "name": safe_text(f"{label} (p50 {dist[key + '_p50_ms']:.3g} ms, "
                                              f"p90 {dist[key + '_p90_ms']:.3g} ms)"),
             "x": cats, "y": dist[key], "marker": {"color": color}}
            for label, key, color in (("before", "before", BEFORE), ("after", "after", AFTER))]
    # A category axis, said outright: plotly reads the numeric labels as a linear axis, where "> N" is no number and
    # its bar (the steps slower than the bins: what a fix that slows some steps adds) is dropped off the axis's end.
    # The range and the ticks name every bin, the overflow one included.
    xaxis = {"title": {"text": "ms per step (bin centre)"}, "type": "category", "range": [-0.5, len(cats) - 0.5],
             "tickmode": "array", "tickvals": cats, "ticktext": cats}
    return {"data": data, "layout": _layout("Step time distribution (steady steps)", "steps", xaxis=xaxis)}


def block(cmp: dict, gain: dict, figs: dict) -> str:
    """Tables, then the two charts (their figure dicts added to figs under ba_phases / ba_steps)."""
    charts = ""
    dist = distribution_figure(cmp.get("step_distribution"))
    for key, fig in (("ba_phases", phase_figure(cmp)), ("ba_steps", dist)):
        if fig is not None:
            figs[key] = fig
            charts += f'<div class="chart" id="fig-{key}"></div>'
    return _comparison(cmp) + _gain(gain or {}) + charts


def guard_html(guard: dict | None) -> str:
    if not guard:
        return ('<p class="note" id="loss-guard">Loss guard: not available (a run recorded no losses: '
                'losses.json is missing)</p>')
    cls = "warn" if guard.get("status") == "diverged" else "note"
    return (f'<p class="{cls}" id="loss-guard">Loss guard: {esc(guard.get("status"))}: '
            f'{esc(guard.get("message"))}</p>')


PAGE_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1100px;padding:16px;color:#222}
h1{font-size:20px}.warn{color:#b00}.note{color:#666}code{background:#f3f3f3;padding:1px 4px}
table.grid{border-collapse:collapse;margin:8px 0}table.grid td,table.grid th{border:1px solid #ddd;padding:3px 8px}
th{text-align:left;background:#fafafa}
"""


def page(result: dict, name_a: str, name_b: str, notes: list[str] = ()) -> str:
    """`haiprof compare A B --html OUT`: result is analysis.fix_results.before_after's dict."""
    cmp, gain = result["comparison"], result.get("gain") or {}
    cmp = {**cmp, "baseline_run": None}   # A, named above
    figs: dict = {}
    warn = f'<p class="warn" id="fix-regression"><b>{esc(gain["message"])}</b></p>' if gain.get("message") else ""
    warn += "".join(f'<p class="warn">{esc(n)}</p>' for n in notes)
    a, b = cmp["before"], cmp["after"]
    heads = (f'<p>A (before): <code>{esc(name_a)}</code> [{esc(a.get("bottleneck"))}] {esc(a.get("headline"))}</p>'
             f'<p>B (after): <code>{esc(name_b)}</code> [{esc(b.get("bottleneck"))}] {esc(b.get("headline"))}</p>')
    body = block(cmp, gain, figs) + guard_html(result.get("loss_guard"))
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>haiprof compare</title>'
            f'<style>{PAGE_CSS}{plotly_inline.CSS}</style></head><body><h1>haiprof compare: before / after</h1>'
            f'<section id="compare">{warn}{heads}{body}</section>{plotly_inline.scripts(with_hover(figs))}'
            f'</body></html>')
