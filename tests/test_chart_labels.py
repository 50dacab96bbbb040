"""Issue 28, the step chart's figure (render/charts.py) without a browser: clipped bars' labels one per group of
bars whose labels would overlap, kept inside the axis; a long run's title true at any zoom, its bucket size in the
y title, its y range set by the bars (not the whiskers)."""
import numpy as np

from haiprof.render import charts
from haiprof.render.charts import clip_outliers

NOTE_CHAR = getattr(charts, "NOTE_CHAR", 0.011)   # a label character's share of the x axis


def _apart(notes, span):
    xs = sorted(n["x"] for n in notes if "xanchor" not in n)
    return all(b - a >= 9 * NOTE_CHAR * span for a, b in zip(xs, xs[1:]))


def test_the_start_up_bars_of_a_300_step_chart_get_one_label():
    xs = list(range(301))
    totals = [20.0] * 301
    for x, ms in ((1, 16_900.0), (2, 1_700.0), (3, 83.0), (6, 152.0), (150, 90.0)):
        totals[x] = ms
    yaxis, notes = clip_outliers(xs, totals, totals[10:], "ms")
    assert yaxis["range"][1] < 83 and "clipped" in yaxis["title"]["text"]
    assert [n["text"] for n in notes] == ["▲ 4 bars, max 16.9 s", "▲ 90 ms"]
    assert notes[0]["xanchor"] == "left" and notes[0]["x"] >= -0.5   # starts at the axis, off the tick labels
    assert notes[1]["x"] == 150


def test_far_apart_bars_keep_their_own_labels():
    xs = list(range(48))
    totals = [4.0] * 48
    for x in (8, 16, 24):
        totals[x] = 300.0
    _, notes = clip_outliers(xs, totals, totals, "ms")
    assert [(n["x"], n["text"]) for n in notes] == [(8, "▲ 300 ms"), (16, "▲ 300 ms"), (24, "▲ 300 ms")]
    assert _apart(notes, 48)


def test_a_long_runs_title_holds_at_any_zoom_and_the_bars_set_its_axis():
    n = 100_000
    rng = np.random.default_rng(0)
    fwd = rng.uniform(1e6, 1.2e6, n)
    fwd[73_421] = 20e6     # one slow step: its bucket's whisker reaches 20 ms, its bar (a mean of 50) is not clipped
    cols = {"index": np.arange(n), "duration_ns": fwd, "phases": {"forward": fwd}}
    fig = charts.step_chart(cols, 1, ["forward"])
    title, ytitle = fig["layout"]["title"]["text"], fig["layout"]["yaxis"]["title"]["text"]
    assert "100,000 steps" in title and "buckets" not in title and "50" not in title, title
    per_bar = -(-fig["zoom"]["units"] // charts.MAX_BARS) * fig["zoom"]["k"]   # what js/steps.js draws
    assert f"({per_bar} steps a bar" in ytitle, ytitle
    assert "clipped" not in ytitle and fig["layout"]["yaxis"]["range"][1] < 5   # the whisker clips
