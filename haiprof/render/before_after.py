"""Before/after of two runs as HTML: the tables, per-phase bars and step-time distributions of baseline vs fixed.

Used by a fixed run's own report (fixes_panel.py, against its baseline) and by `haiprof compare A B --html OUT`
(`page`: one self-contained file, plotly.js inlined, no network). Reads finished numbers only
(analyzers/compare.py `compare_summaries` + `step_distribution`, analyzers/fix_gain.py, the loss guard).
"""
from __future__ import annotations

from . import plotly_inline
from .charts import PHASE_COLORS, _layout, safe_text, with_hover
from .escape import render

BEFORE, AFTER = "#9aa5b1", "#4c78a8"
TEMPLATE = "before_after.html.j2"


def _ms(x) -> str:
    return "n/a" if x is None else f"{x * 1e3:.1f} ms"


def _cells(*texts) -> list:
    return [(t, 1) for t in texts]


def _comparison(cmp: dict) -> list:
    """The rows of the before/after table."""
    a, b = cmp["before"], cmp["after"]
    speed = f"{cmp['speedup']:.2f}×" if cmp.get("speedup") else "n/a"
    rows = [_cells("steady step time", _ms(a["step_time_s"]), _ms(b["step_time_s"]), speed),
            _cells("throughput (steps/s)", f"{(a['steps_per_s'] or 0):.2f}", f"{(b['steps_per_s'] or 0):.2f}", ""),
            _cells("verdict", a["bottleneck"], b["bottleneck"], "changed" if cmp["verdict_changed"] else "unchanged")]
    for p, r in cmp["phases"].items():
        if r["before_s"] is None or r["after_s"] is None or max(r["before_s"], r["after_s"]) < 1e-5:
            continue
        rows.append(_cells(f"{p} per step", _ms(r["before_s"]), _ms(r["after_s"]), f"{r['delta_s'] * 1e3:+.1f} ms"))
    return rows


def _gain(g: dict) -> list:
    """Wall time of both runs and, for compile-type fixes, the compile cost and the break-even step."""
    rows = []
    il = g.get("interleaved")
    if il:
        rows.append([(f"interleaved A/B ({il['pairs']} pass pairs, same conditions each)", 1),
                     (f"per pair {il['min']:.2f}× – {il['max']:.2f}× (spread {100 * il['spread']:.0f}%)", 2),
                     (f"{il['speedup']:.2f}× median" if il.get("measurable", True) else
                      "no measurable change: the pairs spread wider than the effect", 1)])
    if g.get("unreliable_why") and g.get("speedup"):
        rows.append([("steady step speedup", 1), (f"{g['speedup']:.2f}×: unreliable, {g['unreliable_why']}", 3)])
    if g.get("regression_withheld"):
        rows.append([("slower, not held against the fix", 1),
                     (f"{g['regression_withheld']}; --interleave N measures it in like conditions", 3)])
    p = g.get("predicted")
    if p and p.get("measured_step_after_s"):
        rows.append(_cells("predicted before the fix (what-if of the baseline)", _ms(p["step_before_s"]),
                           f"{_ms(p['step_after_pred_s'])}{_predicted_range(p)}",
                           f"measured {_ms(p['measured_step_after_s'])}: off by {p['error_points']:.0f} points"))
    if g.get("wall_time_before_s") and g.get("wall_time_after_s"):
        same = g.get("steps_before") == g.get("steps_after")
        ratio = f"{g['wall_speedup']:.2f}×" if same and g.get("wall_speedup") else "different step counts"
        rows.append(_cells("whole run wall time", f"{g['wall_time_before_s']:.1f} s ({g.get('steps_before')} steps)",
                           f"{g['wall_time_after_s']:.1f} s ({g.get('steps_after')} steps)", ratio))
    c = g.get("compile") or {}
    if c.get("cost_s") is not None:
        n = c.get("break_even_step")
        pay = "never (no step is faster)" if n is None else f"pays for itself after step {n}"
        rows.append(_cells("compile cost", "", f"{c['cost_s']:.1f} s", pay))
    return rows


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
    charts = []
    dist = distribution_figure(cmp.get("step_distribution"))
    for key, fig in (("ba_phases", phase_figure(cmp)), ("ba_steps", dist)):
        if fig is not None:
            figs[key] = fig
            charts.append(key)
    gain = gain or {}
    return render(TEMPLATE, "block", baseline=cmp.get("baseline_run"), rows=_comparison(cmp),
                  conditions=gain.get("conditions"), gain_rows=_gain(gain), charts=charts)


def guard_html(guard: dict | None) -> str:
    return render(TEMPLATE, "guard", available=bool(guard), status=(guard or {}).get("status"),
                  message=(guard or {}).get("message"))


def page(result: dict, name_a: str, name_b: str, notes: list[str] = ()) -> str:
    """`haiprof compare A B --html OUT`: result is analysis.fix_results.before_after's dict."""
    cmp, gain = result["comparison"], result.get("gain") or {}
    cmp = {**cmp, "baseline_run": None}   # A, named above
    figs: dict = {}
    body = block(cmp, gain, figs) + guard_html(result.get("loss_guard"))
    return render(TEMPLATE, "page", regression=gain.get("message"), notes=list(notes),
                  runs=[("A (before)", name_a, cmp["before"]), ("B (after)", name_b, cmp["after"])], body=body,
                  scripts=plotly_inline.scripts(with_hover(figs)))


def _predicted_range(p: dict) -> str:
    """The prediction's range in the what-if's own words (analyzers/whatif.range_text, carried in the
    prediction): worded once, for the console and the page alike."""
    return f" ({p['range']})" if p.get("range") else ""
