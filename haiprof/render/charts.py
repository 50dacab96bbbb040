"""Plotly figure specs as plain dicts (no plotly import: it costs start-up time and nothing here needs it)."""
from __future__ import annotations

import html

import numpy as np

from . import step_detail

PHASE_COLORS = {
    "dataloader": "#e45756", "h2d": "#f58518", "forward": "#4c78a8", "backward": "#72b7b2",
    "optimizer": "#54a24b", "allreduce": "#b279a2", "other": "#bab0ac",
}
# The device-clock step chart (CUDA runs): busy by phase in the phase colours, idle by what the host was doing
# in light tints of the same colours, so "waiting for the DataLoader" reads as red and "idle" at once.
IDLE_COLORS = {
    "idle:dataloader": "#f4b6b5", "idle:h2d": "#fbcf9b", "idle:forward": "#b9cce3", "idle:backward": "#c5e3e0",
    "idle:optimizer": "#bfe0b8", "idle:allreduce": "#e2cbdd", "idle:other": "#dedad8",
    "idle:inside_spans": "#d9d2e9", "busy:estimated": "#9ecae9",
}
SERIES_NAMES = {
    "idle:dataloader": "idle: host waiting for the DataLoader", "idle:h2d": "idle: host in a synchronous copy",
    "idle:forward": "idle: host dispatching forward", "idle:backward": "idle: host dispatching backward",
    "idle:optimizer": "idle: host dispatching the optimizer", "idle:allreduce": "idle: host in a collective",
    "idle:other": "idle: host outside the phases", "idle:inside_spans": "idle: gaps between kernels in a phase",
    "busy:estimated": "busy (estimated: events not resolved)",
}
MAX_BARS = 2000


def safe_text(s) -> str:
    """Plotly renders a subset of HTML in labels: escape anything that came from the run."""
    return html.escape(str(s), quote=True)


def _layout(title: str, ytitle: str, unit: str | None = None, **extra) -> dict:
    """`unit`: what hover values are in (meta.unit, read by with_hover); the y title by default."""
    layout = {"title": {"text": safe_text(title)}, "height": 320, "margin": {"l": 60, "r": 20, "t": 40, "b": 40},
              "yaxis": {"title": {"text": ytitle}}, "legend": {"orientation": "h"}, "template": None,
              "meta": {"unit": ytitle if unit is None else unit}}
    layout.update(extra)
    return layout


STEP_DETAIL_BUDGET = 250_000   # bytes of base64 for the per-step detail of a page's step charts (report <= 1 MB)


def flight_marks(windows) -> list:
    """The flight recorder's traced steps to mark on the step chart (summary.json `trace_windows`): each window's
    traced stall (its explained step; the due step when its trace explained none) and its trace file, the file
    the slowest-steps table links."""
    out = []
    for w in windows or []:
        an, x = w.get("anomaly"), w.get("explained") or {}
        step = x.get("step", an.get("due_step") if an else None)
        if an and w.get("file") and step is not None and not w.get("missed"):   # a miss traced no stall
            out.append({"step": int(step), "file": w["file"]})
    return out


def _flight_trace(flight: list) -> dict:
    """A marker over each traced stall, on its own axis (the top of the plot, whatever the bars' range: a stall's
    bar is often clipped); a click opens its trace (js/steps.js)."""
    return {"type": "scatter", "mode": "markers+text", "name": "flight recorder trace (click to open)",
            "x": [m["step"] for m in flight], "y": [1.0] * len(flight), "yaxis": "y2", "meta": "flight",
            "text": ["trace"] * len(flight), "textposition": "middle right", "cliponaxis": False,
            "customdata": [m["file"] for m in flight],
            "marker": {"symbol": "triangle-down", "size": 12, "color": "#b00"},
            "hovertemplate": "step %{x:d}: traced by the flight recorder<br>%{customdata} (click to open)"
                             "<extra></extra>"}


def step_chart(cols: dict, warmup: int, phases, title: str = "Time per step by phase",
               budget: int = STEP_DETAIL_BUDGET, flight: list | None = None) -> dict:
    """Stacked bars of ms per phase from numpy columns: cols = {"index", "duration_ns", "phases": {name: ns},
    "traced": bool (optional: the op-level tracing window's steps, shaded)}; `flight`: the flight recorder's
    traced stalls (flight_marks), each marked and linked to its trace.

    Up to MAX_BARS steps: a bar per step. Longer runs: a bar per bucket of consecutive steps (the mean phase
    split) with the bucket's median and min-max whisker, a range slider, and the per-step detail embedded
    ("zoom", step_detail.encode) so the page re-buckets the visible range on zoom, down to single steps."""
    idx = np.asarray(cols["index"], dtype=np.int64)
    dur = np.asarray(cols["duration_ns"], dtype=np.float64)
    ph = {p: np.asarray(cols["phases"][p], dtype=np.float64) for p in phases
          if p in cols["phases"] and np.any(cols["phases"][p])}
    n = len(idx)
    if n == 0:
        return {"data": [], "layout": _layout(title, "ms", unit="ms")}
    k = max(1, -(-n // MAX_BARS))
    b = step_detail.buckets(idx, dur, ph, k)
    xs = ((b["first"] + b["last"]) / 2).tolist() if k > 1 else idx.tolist()
    ms = {p: (v / 1e6).tolist() for p, v in b["phases"].items()}
    what = "mean of the bucket's steps" if k > 1 else ""
    traces = [{"type": "bar", "name": SERIES_NAMES.get(p, p), "x": xs, "y": ms[p],
               "marker": {"color": PHASE_COLORS.get(p) or IDLE_COLORS.get(p, "#888")},
               "hovertemplate": (("steps %{customdata[0]:d}-%{customdata[1]:d}<br>" if k > 1 else "step %{x:d}<br>")
                                 + safe_text(SERIES_NAMES.get(p, p)) + f": %{{y:.3g}} ms {what}<extra></extra>")}
              for p in ph]
    if k > 1:
        span = [[int(a), int(z)] for a, z in zip(b["first"], b["last"])]
        for t in traces:
            t.update(customdata=span, width=(b["last"] - b["first"] + 1).tolist())
        med, lo, hi = b["median"] / 1e6, b["min"] / 1e6, b["max"] / 1e6
        traces.append({"type": "scatter", "mode": "markers", "name": "median step, min-max whisker",
                       "x": xs, "y": med.tolist(), "marker": {"color": "#222", "size": 3},
                       "error_y": {"type": "data", "symmetric": False, "array": (hi - med).tolist(),
                                   "arrayminus": (med - lo).tolist(), "color": "#555", "thickness": 1, "width": 0},
                       "customdata": [[a, z, float(x), float(y)] for (a, z), x, y in zip(span, lo, hi)],
                       "hovertemplate": "steps %{customdata[0]:d}-%{customdata[1]:d}<br>median %{y:.3g} ms<br>"
                                        "min %{customdata[2]:.3g} ms, max %{customdata[3]:.3g} ms<extra></extra>"})
    totals = [sum(ms[p][i] for p in ms) for i in range(len(xs))]
    first = int(idx[0])
    traced_set = set(idx[np.asarray(cols["traced"], dtype=bool)].tolist()) if "traced" in cols else set()
    keep = [x >= first + warmup and (k > 1 or x not in traced_set) for x in xs]
    zoom = step_detail.encode(idx, dur, ph, budget) if k > 1 else None
    # The title says what holds at any zoom; how many steps a bar holds goes to the y title, which the page
    # rewrites on every zoom (js/steps.js: its whole-run bars hold ceil(units / MAX_BARS) units of zoom k steps).
    per_bar = -(-zoom["units"] // MAX_BARS) * zoom["k"] if zoom else k
    said = [f"{per_bar} steps a bar"] if k > 1 else []
    yaxis, notes = clip_outliers(xs, totals, [t for t, ok in zip(totals, keep) if ok], "ms", said)
    if k > 1:
        title += (f" ({n:,} steps" + ("" if not zoom else ": zoom in, down to single steps" if zoom["k"] == 1 else
                                     f": zoom in, down to groups of {zoom['k']} steps (every step of the run does "
                                     "not fit in the report)") + ")")
        # the bars set the axis: a bucket's min-max whisker (one slow step in it) is clipped, not scaled to
        yaxis.setdefault("range", [0, 1.05 * max(totals)])
    # warm-up and the op-level tracing window's steps (profiler overhead) are shaded: not in the statistics
    wu = warmup if n > warmup else 0
    shapes = StepAxis.shapes(first, int(idx[-1]), wu, sorted(traced_set))
    layout = _layout(title, "ms", unit="ms", barmode="stack", bargap=0.2 if k == 1 else 0, shapes=shapes,
                     annotations=notes, xaxis={"title": {"text": "step"}, "exponentformat": "none",
                                               "range": [first - 0.5, int(idx[-1]) + 0.5]}, yaxis=yaxis)
    fig = {"data": traces, "layout": layout,
           "shading": {"warmup": [first, first + wu - 1] if wu else None,
                       "traced": step_detail.traced_runs(traced_set)}}
    flight = [m for m in flight or [] if first <= m["step"] <= int(idx[-1])]
    if flight:
        fig["flight"] = _flight_trace(flight)
        traces.append(fig["flight"])
        layout["yaxis2"] = {"overlaying": "y", "range": [0, 1.04], "visible": False, "fixedrange": True}
    if zoom:
        # the page draws the buckets from the detail (the same buckets, min/median/max from the embedded
        # times): whole-run bars as JSON would cost as much as the detail itself
        fig["data"] = []
        zoom["phases"] = [{"key": p, "name": safe_text(SERIES_NAMES.get(p, p)),
                           "color": PHASE_COLORS.get(p) or IDLE_COLORS.get(p, "#888")} for p in ph]
        fig["zoom"] = zoom
        layout["xaxis"]["rangeslider"] = {"visible": True, "thickness": 0.08,
                                          "range": [first - 0.5, int(idx[-1]) + 0.5]}
        layout["yaxis"]["fixedrange"] = True    # a drag zooms the steps, not the milliseconds
        layout["height"] = 400
        # the slider takes the space under the axis: the legend goes between the title and the plot
        layout["legend"] = {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"}
        layout["margin"] = {**layout["margin"], "t": 80}
    return fig


OUTLIER = 1.5      # a bar above this x the steady steps' p90 is clipped and labelled instead of setting the axis
MAX_NOTES = 6
NOTE_CHAR = 0.011  # a label character's width as a share of the x axis (12 px text on a plot of ~700 px or more)


def fmt_ms(ms: float) -> str:
    return f"{ms / 1e3:.1f} s" if ms >= 1000 else f"{ms:.0f} ms" if ms >= 10 else f"{ms:.2g} ms"


def clip_outliers(xs, totals, steady, unit: str, said: list | tuple = ()) -> tuple[dict, list]:
    """(yaxis, annotations): the axis is set by the steady steps; slower bars (initialisation, compilation) are
    clipped at the top and labelled with their own value. `said`: what else the y title says of the bars."""
    parts = list(said)
    yaxis = {"title": {"text": unit}, "rangemode": "tozero"}
    notes: list = []
    if steady and totals:
        s = sorted(steady)
        cap = OUTLIER * s[min(len(s) - 1, int(0.9 * (len(s) - 1)))]
        if cap > 0 and max(totals) > cap:
            yaxis["range"] = [0, cap]
            notes = _clipped_notes(xs, [(x, t) for x, t in zip(xs, totals) if t > cap], unit)
            parts.append(f"bars above {fmt_ms(cap) if unit == 'ms' else f'{cap:.3g}'} clipped")
    if parts:
        yaxis["title"]["text"] = f"{unit} ({'; '.join(parts)})"
    return yaxis, notes


def _clipped_notes(xs, clipped: list, unit: str) -> list:
    """One label per clipped bar, or per run of bars whose labels would overlap ("▲ 3 bars, max 16.9 s"): the
    start-up steps 0, 1, 2 of a 300-step chart are a few pixels apart, and their labels were drawn over each other."""
    span = (max(xs) - min(xs) + 1) if xs else 1

    def text(g):
        top = max(t for _, t in g)
        v = fmt_ms(top) if unit == "ms" else f"{top:.3g}"
        return f"▲ {v}" if len(g) == 1 else f"▲ {len(g)} bars, max {v}"

    def centre(g):
        return (g[0][0] + g[-1][0]) / 2

    groups: list = []
    for x, t in clipped:   # in x order: merge the last two while their labels (centred) overlap
        groups.append([(x, t)])
        while len(groups) > 1 and centre(groups[-1]) - centre(groups[-2]) < \
                (len(text(groups[-1])) + len(text(groups[-2])) + 2) / 2 * NOTE_CHAR * span:
            groups[-2:] = [groups[-2] + groups[-1]]
    if len(groups) > MAX_NOTES:   # the tallest, in x order
        tallest = sorted(range(len(groups)), key=lambda i: -max(t for _, t in groups[i]))[:MAX_NOTES]
        groups = [groups[i] for i in sorted(tallest)]
    lo, hi = (min(xs) - 0.5, max(xs) + 0.5) if xs else (0, 1)
    notes = []
    for g in groups:   # a label that would run past the axis's end starts (or ends) at it, off the tick labels
        half, note = len(text(g)) / 2 * NOTE_CHAR * span, {"y": 0.93, "yref": "paper", "text": text(g),
                                                             "showarrow": False, "x": centre(g)}
        if note["x"] - half < lo:
            note.update(x=g[0][0] - 0.5, xanchor="left")
        elif note["x"] + half > hi:
            note.update(x=g[-1][0] + 0.5, xanchor="right")
        notes.append(note)
    return notes


def share_chart(share: dict) -> dict:
    phases = [p for p in share if share[p] > 0]
    return {"data": [{"type": "bar", "orientation": "h", "y": phases, "x": [100 * share[p] for p in phases],
                      "marker": {"color": [PHASE_COLORS.get(p, "#888") for p in phases]},
                      "text": [f"{100 * share[p]:.1f}%" for p in phases], "textposition": "auto"}],
            "layout": _layout("Share of step time", "", unit="%", height=260, xaxis={"title": {"text": "% of step time"}},
                              yaxis={"autorange": "reversed"})}


class StepAxis:
    """Maps a time (seconds from the timelines' origin) onto the step chart's x axis: a sample at fraction f of
    step i sits at i - 0.5 + f, so it lines up with bar i of "Time per step"; a sample between two steps (an
    evaluation pass, a checkpoint) sits on their boundary. Samples before the first step (start-up: imports,
    CUDA initialisation, model loading) or after the last are left out and the chart's title says how long."""

    MIN_STEPS = 3

    def __init__(self, steps, origin_ns, warmup: int = 0):
        cols = steps.arrays()   # the steps as columns (analyzers.step_columns.StepColumns): arrays, one entry a step
        self.index = cols["index"]
        self.starts = (cols["start_ns"] - origin_ns) / 1e9
        self.ends = (cols["end_ns"] - origin_ns) / 1e9
        self.warmup, self.traced = warmup, self.index[cols["traced"]].tolist()

    @classmethod
    def of(cls, steps, origin_ns, warmup: int = 0):
        """None when there are too few steps to draw against (then the charts keep a seconds axis)."""
        return cls(steps, origin_ns, warmup) if origin_ns is not None and len(steps) >= cls.MIN_STEPS else None

    def x(self, t: float):
        i = int(np.searchsorted(self.starts, t, side="right")) - 1
        if i < 0:
            return None
        index, a, b = int(self.index[i]), float(self.starts[i]), float(self.ends[i])
        if t <= b:
            return index - 0.5 + (t - a) / ((b - a) or 1e-12)
        return index + 0.5 if i + 1 < len(self.index) else None

    def series(self, series):
        out = []
        for name, ts, ys in series:
            pts = [(self.x(t), y) for t, y in zip(ts, ys)]
            pts = [(x, y) for x, y in pts if x is not None]
            out.append((name, [x for x, _ in pts], [y for _, y in pts]))
        return out

    def left_out(self, series) -> str:
        ts = [t for _, xs, _ in series for t in xs]
        before = self.starts[0] - min(ts) if ts and min(ts) < self.starts[0] else 0.0
        after = max(ts) - self.ends[-1] if ts and max(ts) > self.ends[-1] else 0.0
        parts = ([f"{before:.1f} s of start-up"] if before >= 0.05 else []) + \
                ([f"{after:.1f} s after the last step"] if after >= 0.05 else [])
        return f" (per step; {' and '.join(parts)} not shown)" if parts else " (per step)"

    @staticmethod
    def shapes(first: int, last: int, warmup: int, traced) -> list:
        """The step chart's shading: warm-up steps grey, the tracing window's steps orange."""
        out = []
        if warmup:
            out.append({"type": "rect", "xref": "x", "yref": "paper", "x0": first - 0.5,
                        "x1": min(last, first + warmup - 1) + 0.5, "y0": 0, "y1": 1, "fillcolor": "#999",
                        "opacity": 0.15, "line": {"width": 0}})
        out += [{"type": "rect", "xref": "x", "yref": "paper", "x0": i - 0.5, "x1": i + 0.5, "y0": 0, "y1": 1,
                 "fillcolor": "#f58518", "opacity": 0.12, "line": {"width": 0}} for i in traced]
        return out

    def layout(self) -> dict:
        first, last = int(self.index[0]), int(self.index[-1])
        return {"xaxis": {"title": {"text": "step"}, "range": [first - 0.5, last + 0.5], "exponentformat": "none"},
                "shapes": self.shapes(first, last, self.warmup, self.traced)}


def step_axis(d) -> StepAxis | None:
    """The report's StepAxis for a run (RunData): its steps on the timelines' common origin."""
    return StepAxis.of(getattr(d, "steps", None) or [], (getattr(d, "timelines", None) or {}).get("origin_ns"),
                       d.summary.get("warmup_steps_excluded", 0))


def timeline_chart(title: str, ytitle: str, series: list[tuple[str, list, list]], axis: StepAxis | None = None) -> dict:
    """Lines over time; with a StepAxis, over the steps (lined up with the step chart), else seconds."""
    series = [(name, x, y) for name, x, y in series if x]
    extra = {"xaxis": {"title": {"text": "seconds since start"}}}
    if axis is not None and series:
        mapped = axis.series(series)
        if sum(len(x) for _, x, _ in mapped) >= 2:   # else the run was too short for a sample inside a step
            title, series, extra = title + axis.left_out(series), mapped, axis.layout()
    series = [(name, *thin(x, y)) for name, x, y in series]   # a days-long run: bucket means, not every sample
    traces = [{"type": "scatter", "mode": "lines", "name": safe_text(name), "x": x, "y": y}
              for name, x, y in series if x]
    return {"data": traces, "layout": _layout(title, ytitle, **extra)}


def with_hover(figs: dict) -> dict:
    """Every trace's hover gives its value with the chart's unit (layout.meta.unit), unless it has its own."""
    for fig in figs.values():
        layout = fig.get("layout") or {}
        unit = (layout.get("meta") or {}).get("unit") or ""
        unit = f" {safe_text(unit)}" if unit else ""
        xt = ((layout.get("xaxis") or {}).get("title") or {}).get("text") or ""
        where = "step %{x:.1f}" if xt == "step" else "%{x} s" if xt.startswith("seconds") else "%{x}"
        for t in fig.get("data") or []:
            if "hovertemplate" in t or t.get("type") not in ("bar", "scatter"):
                continue
            t["hovertemplate"] = (f"%{{y}}: %{{x:.3g}}{unit}" if t.get("orientation") == "h"
                                  else f"{where}: %{{y:.3g}}{unit}")
    return figs


def thin(xs: list, *series: list, max_points: int = MAX_BARS) -> tuple[list, ...]:
    """A per-step series of a long run as at most max_points bucket means (x: the bucket's centre), so a page
    never carries a million JSON numbers; None values (no data for a step) are left out of the means."""
    n = len(xs)
    k = -(-n // max_points) if n > max_points else 1
    if k == 1:
        return (list(xs), *[list(s) for s in series])
    starts = np.arange(0, n, k)
    x = np.asarray(xs, dtype=np.float64)
    cnt = np.diff(np.append(starts, n))
    out = [((np.add.reduceat(x, starts) / cnt)).tolist()]
    for s in series:
        v = np.asarray([np.nan if y is None else y for y in s], dtype=np.float64)
        ok = ~np.isnan(v)
        tot, num = np.add.reduceat(np.where(ok, v, 0.0), starts), np.add.reduceat(ok.astype(np.int64), starts)
        out.append([None if c == 0 else t / c for t, c in zip(tot.tolist(), num.tolist())])
    return tuple(out)
