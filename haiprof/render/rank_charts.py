"""Figures of a job with many ranks, as plotly figure dicts: ranks as distributions, and a ranks x steps heatmap.

A per-rank bar stops reading beyond a few dozen ranks; a histogram of the ranks' medians shows the bulk and the
tail at any world size, and a heatmap (one row per rank, ordered by host then local rank, so a node is a band)
shows when and where time goes: step time, waiting for data, exposed communication.
"""
from __future__ import annotations

import math

from . import charts

HIST_BINS = 30
HEATMAPS = (("step", "Step time", "Viridis"),
            ("data", "Waiting for data (DataLoader + copy to device)", [[0, "#fbf3f3"], [1, "#b2182b"]]),
            ("comm", "Exposed communication (sync not hidden by backward)", [[0, "#f5f0f8"], [1, "#5e3c99"]]),
            ("late", "Arrival at the gradient sync after the first rank (the others wait this long)",
             [[0, "#f7f7f7"], [1, "#e66101"]]))
# histogram title, colour; what the others wait for is the time a rank spends before the gradient sync
DIST_METRICS = (("work_ms", "Time before the sync", "#4c78a8"),
                ("dataloader_ms", "Waiting for data", charts.PHASE_COLORS["dataloader"]),
                ("comm_ms", "Exposed communication", charts.PHASE_COLORS["allreduce"]))


def histogram(values: list, title: str, color: str, unit: str = "ms per step (median over the rank's steps)") -> dict:
    """Ranks per bin of a per-rank figure: bars, so it draws with any plotly-compatible renderer."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return {}
    lo, hi = min(vals), max(vals)
    width = (hi - lo) / HIST_BINS if hi > lo else max(abs(lo) * 0.01, 1e-3)
    counts = [0] * HIST_BINS
    for v in vals:
        counts[min(HIST_BINS - 1, int((v - lo) / width))] += 1
    centers = [round(lo + (i + 0.5) * width, 2) for i in range(HIST_BINS)]
    return {"data": [{"type": "bar", "name": "ranks", "x": centers, "y": counts, "marker": {"color": color},
                      "hovertemplate": "%{y} rank(s) around %{x} ms<extra></extra>"}],
            "layout": charts._layout(title, "ranks", height=240, bargap=0.05, showlegend=False,
                                     xaxis={"title": {"text": unit}},
                                     # log counts: the few outliers stay visible beside a thousand typical ranks
                                     yaxis={"title": {"text": "ranks (log)"}, "type": "log"})}


def distributions(per_rank: list) -> dict:
    """fig id -> histogram of the ranks' medians, one per metric (rank_spread.rank_medians)."""
    out = {}
    for key, title, color in DIST_METRICS:
        fig = histogram([r.get(key) for r in per_rank], f"Ranks by {title[0].lower()}{title[1:]}", color)
        if fig:
            out[f"rank-dist-{key.split('_')[0]}"] = fig
    return out


def heatmaps(grid: dict) -> dict:
    """fig id -> heatmap (ranks x step buckets, ms per step) for step time, waiting for data, exposed comm."""
    ranks = grid.get("ranks") or []
    if not ranks or not grid.get("buckets"):
        return {}
    labels = [f"{r['host']} · local {r['local_rank']} · rank {r['rank']}" for r in ranks]
    out = {}
    for key, title, scale in HEATMAPS:
        if key not in grid:
            continue
        z = [[round(float(v), 2) for v in row] for row in grid[key]]
        out[f"rank-heat-{key}"] = {
            "data": [{"type": "heatmap", "z": z, "x": grid["buckets"], "y": labels, "colorscale": scale,
                      "colorbar": {"title": {"text": "ms"}},
                      "hovertemplate": "%{y}<br>from step %{x}: %{z:.1f} ms/step<extra></extra>"}],
            "layout": charts._layout(f"{title}, per rank over the run", "rank (by host, local rank)",
                                     height=min(900, 160 + 3 * len(ranks)),
                                     margin={"l": 200 if len(ranks) <= 64 else 60, "r": 20, "t": 40, "b": 40},
                                     xaxis={"title": {"text": "step (bucket start)"}},
                                     yaxis={"title": {"text": "rank (by host, local rank)"}, "autorange": "reversed",
                                            "showticklabels": len(ranks) <= 64})}
    return out
