"""The before/after step-time histogram shows its "> N" bin (issue 28): the steps slower than the bins, exactly
those a fix that slows some steps adds, used to fall off the end of the x-axis (plotly read the numeric bin
labels as a linear axis, where "> N" is no number)."""
from conftest import artifact
from test_report_browser import browser, open_report  # noqa: F401  (browser: a fixture)

from haiprof.analyzers.compare import step_distribution
from haiprof.render import before_after

BEFORE = [0.050] * 40 + [0.052] * 10
AFTER = [0.045] * 47 + [1.0] * 3   # the fix made three steps 20x slower: all of them in the overflow bin


def _figure():
    dist = step_distribution(BEFORE, AFTER)
    assert dist["after"][-1] == 3
    return before_after.distribution_figure(dist)


def test_the_x_range_reaches_the_overflow_bin():
    fig = _figure()
    cats = fig["data"][0]["x"]
    over = len(cats) - 1
    assert cats[over].startswith("> ") and fig["data"][1]["y"][over] == 3
    xaxis = fig["layout"]["xaxis"]
    assert xaxis.get("type") == "category"                 # category positions: the bin's index
    lo, hi = xaxis.get("range") or (None, None)
    assert hi is not None and hi >= over + 0.5 and lo <= -0.5, xaxis   # the whole overflow bar, and the first
    assert cats[over] in xaxis.get("ticktext", ()) and xaxis["tickvals"][-1] == cats[over]   # and its label


def test_the_drawn_axis_shows_the_overflow_bin(browser, tmp_path):  # noqa: F811
    cmp = {"before": {"step_time_s": 0.05, "steps_per_s": 20.0, "bottleneck": "io", "headline": ""},
           "after": {"step_time_s": 0.045, "steps_per_s": 22.0, "bottleneck": "io", "headline": ""},
           "verdict_changed": False, "phases": {}, "step_distribution": step_distribution(BEFORE, AFTER)}
    out = tmp_path / "cmp.html"
    out.write_text(before_after.page({"comparison": cmp, "gain": {}, "loss_guard": None}, "a", "b"))
    page, problems, _ = open_report(browser, out)
    assert problems == []
    drawn = page.evaluate("""() => {
        const el = document.getElementById('fig-ba_steps'), xa = el._fullLayout.xaxis;
        return {type: xa.type, range: xa.range, ticks: (xa._vals || []).map(t => t.text),
                over: xa.d2c(el.data[1].x[el.data[1].x.length - 1])};
    }""")
    label = _figure()["data"][0]["x"][-1]
    assert drawn["type"] == "category" and label in drawn["ticks"], drawn
    assert drawn["over"] is not None and drawn["range"][1] >= drawn["over"] + 0.5, drawn
    page.locator("#fig-ba_steps").screenshot(path=artifact("before_after_overflow.png"))
    page.close()
