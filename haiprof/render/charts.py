"""Plotly figure specs as plain dicts (no plotly import: it costs start-up time and nothing here needs it)."""
from __future__ import annotations

import html

import numpy as np

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


def _layout(title: str, ytitle: str, **extra) -> dict:
    layout = {"title": {"text": safe_text(title)}, "height": 320, "margin": {"l": 60, "r": 20, "t": 40, "b": 40},
              "yaxis": {"title": {"text": ytitle}}, "legend": {"orientation": "h"}, "template": None}
    layout.update(extra)
    return layout


def step_chart(steps, warmup: int, phases, traced=(), title: str = "Time per step by phase") -> dict:
    """Stacked bar per step (ms per phase); long runs are binned so the chart stays small."""
    n = len(steps)
    bin_size = max(1, -(-n // MAX_BARS))
    xs, per_phase = [], {p: [] for p in phases}
    if hasattr(steps, "arrays") and n:   # steps as columns (a long run): the bins' means through numpy
        cols = steps.arrays()
        at = list(range(0, n, bin_size))
        xs = cols["index"][at].tolist()
        counts = [min(bin_size, n - i) for i in at]
        for p in phases:
            col = cols["phases"].get(p)
            sums = np.add.reduceat(col, at).tolist() if col is not None else [0] * len(at)
            per_phase[p] = [int(x) / c / 1e6 for x, c in zip(sums, counts)]
    for i in range(0, n if not xs else 0, bin_size):
        chunk = steps[i:i + bin_size]
        xs.append(chunk[0].index)
        for p in phases:
            per_phase[p].append(sum(s.phases_ns.get(p, 0) for s in chunk) / len(chunk) / 1e6)
    traces = [{"type": "bar", "name": SERIES_NAMES.get(p, p), "x": xs, "y": per_phase[p],
               "marker": {"color": PHASE_COLORS.get(p) or IDLE_COLORS.get(p, "#888")}}
              for p in phases if any(per_phase[p])]
    title += f" (mean of {bin_size} steps per bar)" if bin_size > 1 else ""
    totals = [sum(per_phase[p][i] for p in phases) for i in range(len(xs))]
    shaded = set(traced)
    steady = [t for x, t in zip(xs, totals) if x >= warmup and x not in shaded]
    yaxis, notes = clip_outliers(xs, totals, steady, "ms")
    # warm-up and the op-level tracing window's steps (profiler overhead) are shaded: not in the statistics
    shapes = StepAxis.shapes(xs[0], xs[-1], warmup if n > warmup else 0, traced) if xs else []
    return {"data": traces, "layout": _layout(title, "ms", barmode="stack", shapes=shapes, annotations=notes,
                                               xaxis={"title": {"text": "step"}}, yaxis=yaxis)}


OUTLIER = 1.5      # a bar above this x the steady steps' p90 is clipped and labelled instead of setting the axis
MAX_NOTES = 6


def fmt_ms(ms: float) -> str:
    return f"{ms / 1e3:.1f} s" if ms >= 1000 else f"{ms:.0f} ms" if ms >= 10 else f"{ms:.2g} ms"


def clip_outliers(xs, totals, steady, unit: str) -> tuple[dict, list]:
    """(yaxis, annotations): the axis is set by the steady steps; slower bars (initialisation, compilation) are
    clipped at the top and labelled with their own value."""
    yaxis = {"title": {"text": unit}, "rangemode": "tozero"}
    if not steady or not totals:
        return yaxis, []
    s = sorted(steady)
    cap = OUTLIER * s[min(len(s) - 1, int(0.9 * (len(s) - 1)))]
    if cap <= 0 or max(totals) <= cap:
        return yaxis, []
    yaxis["range"] = [0, cap]
    clipped = [(x, t) for x, t in zip(xs, totals) if t > cap]
    notes = [{"x": x, "y": 0.93, "yref": "paper", "text": f"▲ {fmt_ms(t) if unit == 'ms' else t}",
              "showarrow": False} for x, t in clipped[:MAX_NOTES]]
    yaxis["title"]["text"] = f"{unit} (bars above {fmt_ms(cap)} clipped)"
    return yaxis, notes


def share_chart(share: dict) -> dict:
    phases = [p for p in share if share[p] > 0]
    return {"data": [{"type": "bar", "orientation": "h", "y": phases, "x": [100 * share[p] for p in phases],
                      "marker": {"color": [PHASE_COLORS.get(p, "#888") for p in phases]},
                      "text": [f"{100 * share[p]:.1f}%" for p in phases], "textposition": "auto"}],
            "layout": _layout("Share of step time", "", height=260, xaxis={"title": {"text": "% of step time"}},
                              yaxis={"autorange": "reversed"})}


class StepAxis:
    """Maps a time (seconds from the timelines' origin) onto the step chart's x axis: a sample at fraction f of
    step i sits at i - 0.5 + f, so it lines up with bar i of "Time per step"; a sample between two steps (an
    evaluation pass, a checkpoint) sits on their boundary. Samples before the first step (start-up: imports,
    CUDA initialisation, model loading) or after the last are left out and the chart's title says how long."""

    MIN_STEPS = 3

    def __init__(self, steps, origin_ns, warmup: int = 0):
        # arrays, one entry per step: a long run's steps as columns (steps.arrays()) or a list of steps
        cols = steps.arrays() if hasattr(steps, "arrays") else {
            "index": np.array([st.index for st in steps], dtype=np.int64),
            "start_ns": np.array([st.start_ns for st in steps], dtype=np.int64),
            "end_ns": np.array([st.end_ns for st in steps], dtype=np.int64),
            "traced": np.array([bool(getattr(st, "traced", False)) for st in steps], dtype=bool)}
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
        return {"xaxis": {"title": {"text": "step"}, "range": [first - 0.5, last + 0.5]},
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
    traces = [{"type": "scatter", "mode": "lines", "name": safe_text(name), "x": x, "y": y}
              for name, x, y in series if x]
    return {"data": traces, "layout": _layout(title, ytitle, **extra)}
