"""The GPU busy chart of a long run (more steps than bars) clips and labels the bars it draws, never every step
first: a 10^6-step run with a stall every 39 steps had 25,642 steps over the clip line, each labelled and the
labels merged pairwise (quadratic), minutes of its report for a result then thrown away."""
from types import SimpleNamespace

import numpy as np

from haiprof.analyzers.step_columns import StepColumns
from haiprof.render import charts
from haiprof.render import gpu as render_gpu

N = 3 * charts.MAX_BARS


def _long_run():
    idx = np.arange(1, N + 1, dtype=np.int64)
    start = idx * 10_000_000
    dur = np.where(idx % 39 == 0, 80_000_000, 10_000_000)      # a periodic stall, 8x the usual step
    phases = np.stack([dur * 0.8, dur * 0.2], axis=1)
    cols = StepColumns(idx, start, start + dur, phases, np.zeros(N, dtype=bool), ["forward", "idle:other"])
    return SimpleNamespace(device_steps=cols, device_steady=idx[5:])


def test_long_busy_chart_clips_only_the_bars_it_draws(monkeypatch):
    sizes = []
    clip = charts.clip_outliers

    def spy(xs, totals, steady, unit, *a, **k):
        sizes.append(len(xs))
        return clip(xs, totals, steady, unit, *a, **k)

    monkeypatch.setattr(charts, "clip_outliers", spy)
    fig = render_gpu._busy_chart(_long_run(), {}, 5, [])
    assert sizes and max(sizes) <= charts.MAX_BARS
    assert len(fig["data"][0]["x"]) <= charts.MAX_BARS and "steps per bar" in fig["layout"]["title"]["text"]
